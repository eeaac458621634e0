"""Durable file primitives shared by every on-disk backend (blocking; call from a thread).

Kept for the modules that import it; the implementation is the persistence layer's
(:mod:`framework_agents._persist`). ``atomic_write`` publishes a file all at once (temp
file, fsync, rename, directory fsync) and creates it owner-only (``0600``) unless told
otherwise; ``read_bytes_or_none`` refuses anything but a regular file without hanging.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from pathlib import Path

from ._persist import (
    FILE_MODE,
    TEMP_SUFFIX,
    OddFileError,
    atomic_publish,
    fsync_dir,
    read_document,
    sweep_temp_files,
    temp_name,
)

__all__ = [
    "TEMP_SUFFIX",
    "atomic_write",
    "fsync_dir",
    "read_bytes_or_none",
    "sweep_temp_files",
    "temp_name",
]

#: Largest file ``read_bytes_or_none`` reads.
_READ_LIMIT = 1 << 40


def atomic_write(target: Path, chunks: bytes | Iterable[bytes], *, mode: int = FILE_MODE) -> None:
    """Atomically and durably replace ``target`` with ``chunks`` (owner-only by default)."""
    atomic_publish(target, chunks, mode=mode)


def read_bytes_or_none(path: Path) -> bytes | None:
    """The file's bytes, or ``None`` when it does not exist.

    Anything but a regular file there (a directory, a FIFO, a device, a symlink) raises
    ``OSError`` (``EINVAL``, "not a regular file"): opened non-blocking, a FIFO never hangs.
    """
    try:
        found = read_document(path, max_bytes=_READ_LIMIT)
    except OddFileError as exc:
        raise OSError(errno.EINVAL, f"not a regular file ({exc.reason})", str(path)) from None
    return None if found is None else found[0]
