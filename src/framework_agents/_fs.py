"""Durable file primitives shared by every on-disk backend (blocking; call from a thread).

``atomic_write`` publishes a file all at once: the bytes go to a uniquely named temp file
in the same directory, are fsynced, renamed over the target with ``os.replace`` and the
directory is fsynced, so a reader sees either the old file or the new one, never a torn
one, and a crash at any instant leaves the previous good state. Temp files of crashed
writers are swept by ``sweep_temp_files`` once they are older than a grace period (a
younger one may belong to a writer that is still running).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "TEMP_SUFFIX",
    "atomic_write",
    "fsync_dir",
    "read_bytes_or_none",
    "sweep_temp_files",
    "temp_name",
]

TEMP_SUFFIX = ".tmp"


def temp_name(target: Path) -> Path:
    """A unique temp path next to ``target`` (``.<name>.<uuid>.tmp``)."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")


def fsync_dir(directory: Path) -> None:
    """Make a rename or create inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(target: Path, chunks: bytes | Iterable[bytes], *, mode: int = 0o644) -> None:
    """Atomically and durably replace ``target`` with ``chunks`` (see module docstring)."""
    tmp = temp_name(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb", closefd=True) as fh:
            if isinstance(chunks, bytes):
                fh.write(chunks)
            else:
                fh.writelines(chunks)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def read_bytes_or_none(path: Path) -> bytes | None:
    """The file's bytes, or ``None`` when it does not exist.

    Anything but a regular file there (a directory, a FIFO, a device) raises ``OSError``
    (``EINVAL``, "not a regular file"): opened non-blocking, a FIFO never hangs the reader.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise OSError(errno.EINVAL, "not a regular file", str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", closefd=True) as fh:
        return fh.read()


def sweep_temp_files(target: Path, *, grace_seconds: float = 60.0) -> int:
    """Remove temp files of ``target`` older than ``grace_seconds``; return how many."""
    prefix = f".{target.name}."
    now = time.time()
    removed = 0
    try:
        entries = list(os.scandir(target.parent))
    except FileNotFoundError:
        return 0
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(TEMP_SUFFIX)):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime >= grace_seconds:
                os.unlink(entry.path)
                removed += 1
        except FileNotFoundError:
            continue
    return removed
