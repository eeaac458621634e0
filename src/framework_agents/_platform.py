"""What the file backends need from the operating system, imported where it is used.

``import framework_agents`` works everywhere Python does (Windows included): POSIX-only
modules such as ``fcntl`` are imported by the backends that lock files, when they lock.
Where they are missing, locking a file raises :class:`FileLockUnsupportedError`
(``FILE_LOCK_UNSUPPORTED``) naming what to use instead.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from .errors import AgentError

__all__ = ["FileLockUnsupportedError", "posix_fcntl"]


class FileLockUnsupportedError(AgentError):
    """File locking (``fcntl.flock``) does not exist on this platform."""

    default_code = "FILE_LOCK_UNSUPPORTED"


def posix_fcntl() -> ModuleType:
    """The ``fcntl`` module, or ``FILE_LOCK_UNSUPPORTED`` where the platform has none."""
    try:
        return importlib.import_module("fcntl")
    except ImportError:
        raise FileLockUnsupportedError(
            f"file locking needs POSIX fcntl, which {sys.platform!r} does not have: the file "
            "backends (FileCheckpointer, FileMemory, LocalFileStorage) run on Linux and macOS; "
            "elsewhere use the in-memory backends or a database store (SQLite, PostgreSQL, "
            "Redis)"
        ) from None
