"""Durable, private file primitives (blocking; call them from a worker thread).

* :func:`atomic_publish` replaces a file all at once: the bytes go to a uniquely named
  temp file in the same directory (created ``0600``), are fsynced, renamed over the
  target and the directory is fsynced, so a reader sees the old file or the new one,
  never a torn one, and a crash at any instant leaves the previous good state. An
  ``OSError`` raised after the rename carries ``may_have_landed = True``.
* :func:`read_document` reads a document without ever hanging or leaving the store: it
  opens with ``O_NOFOLLOW | O_NONBLOCK`` and refuses symlinks, FIFOs, devices and
  directories (:class:`OddFileError`) and files larger than the store's bound
  (:class:`TooLargeError`) before reading them.
* :func:`make_private_dirs` creates missing directories ``0700``, durably.
* :func:`io_error` turns an ``OSError`` into ``StorageIOError`` (``STORAGE_IO``) naming
  the key and the root, keeping ``errno`` and chaining the cause.
* :func:`file_ident` / :func:`ident_or_none`: a file as ``stat`` sees it, which every
  write changes (how a store knows its files are as it last left them).

Temp files of crashed writers are removed by :func:`sweep_temp_files` once older than a
grace period (a younger one may belong to a writer that is still running).
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

from ..errors import StorageIOError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "TEMP_SUFFIX",
    "FileIdent",
    "OddFileError",
    "TooLargeError",
    "atomic_publish",
    "file_ident",
    "fsync_dir",
    "ident_or_none",
    "io_error",
    "make_private_dirs",
    "mark_landed",
    "read_bounded",
    "read_document",
    "sweep_temp_files",
    "temp_name",
]

TEMP_SUFFIX = ".tmp"
#: Mode of every file a store creates (conversations are private).
FILE_MODE = 0o600
#: Mode of every directory a store creates.
DIR_MODE = 0o700

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


#: ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``: a replace changes the inode,
#: an append the size, any write the times.
FileIdent = tuple[int, int, int, int, int]


def file_ident(st: os.stat_result) -> FileIdent:
    """The :data:`FileIdent` of a ``stat`` result."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def ident_or_none(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> FileIdent | None:
    """The :data:`FileIdent` of ``path`` (not followed), ``None`` when it does not exist."""
    try:
        return file_ident(os.stat(path, dir_fd=dir_fd, follow_symlinks=False))
    except FileNotFoundError:
        return None


class OddFileError(Exception):
    """Something other than a regular file is where a document belongs (``reason`` says what)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class TooLargeError(Exception):
    """A stored document is larger than the store's bound (checked before reading it)."""

    def __init__(self, path: Path, size: int, bound: int) -> None:
        super().__init__(f"{path} holds {size} bytes, more than the bound of {bound}")
        self.path = path
        self.size = size
        self.bound = bound


def mark_landed(exc: OSError) -> OSError:
    """Flag ``exc`` as raised after the write became visible (it may have landed)."""
    exc.may_have_landed = True  # type: ignore[attr-defined]
    return exc


def io_error(
    exc: OSError, *, action: str, key: str, root: str | os.PathLike[str]
) -> StorageIOError:
    """``StorageIOError`` for an ``OSError`` of ``action`` on ``key`` under ``root``."""
    landed = bool(getattr(exc, "may_have_landed", False))
    code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    outcome = (
        "the write may have landed: reload before retrying"
        if landed
        else "nothing was written"
        if action != "read"
        else "nothing was changed"
    )
    err = StorageIOError(
        f"could not {action} {key!r} under {os.fspath(root)!r}: "
        f"{exc.strerror or exc} ({code}); {outcome}",
        errno=exc.errno,
        may_have_landed=landed,
    )
    err.__cause__ = exc
    return err


def temp_name(target: Path) -> Path:
    """A unique temp path next to ``target`` (``.<name>.<uuid>.tmp``)."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")


def fsync_dir(directory: Path) -> None:
    """Make a rename, create or unlink inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, chunks: bytes | Iterable[bytes]) -> None:
    for chunk in [chunks] if isinstance(chunks, bytes | bytearray | memoryview) else chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def atomic_publish(target: Path, chunks: bytes | Iterable[bytes], *, mode: int = FILE_MODE) -> None:
    """Atomically and durably replace ``target`` with ``chunks`` (see the module docstring)."""
    tmp = temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    try:
        try:
            _write_all(fd, chunks)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        fsync_dir(target.parent)
    except OSError as exc:
        raise mark_landed(exc) from None


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents (``0700``), durably."""
    missing: list[Path] = []
    path = directory
    while not path.exists():
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, DIR_MODE)
        fsync_dir(path.parent)


def read_document(path: Path, *, max_bytes: int) -> tuple[bytes, os.stat_result] | None:
    """The bytes and ``fstat`` of the regular file ``path``, or ``None`` when it is absent.

    Raises:
        OddFileError: a symlink, FIFO, device or directory is there, or a parent is a file.
        TooLargeError: the file is larger than ``max_bytes`` (nothing read).
        OSError: any other failure (the caller maps it with :func:`io_error`).
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (no effect on a file).
        # O_NOFOLLOW: a symlink is never read through (it could lead out of the store).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OddFileError(path, "a parent directory is not a directory") from None
    except IsADirectoryError:
        raise OddFileError(path, "a directory is in its place") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OddFileError(path, "it is a symlink, which is never followed") from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise OddFileError(path, "a directory is in its place")
        if not stat.S_ISREG(st.st_mode):
            raise OddFileError(path, "it is not a regular file (a FIFO, device or socket)")
        if st.st_size > max_bytes:
            raise TooLargeError(path, st.st_size, max_bytes)
        return read_bounded(fd, st.st_size, max_bytes, path), st
    finally:
        os.close(fd)


def read_bounded(fd: int, size: int, max_bytes: int, path: Path, offset: int = 0) -> bytes:
    """Everything from ``offset`` to the end of ``fd`` (usually one read), at most ``max_bytes``."""
    first = os.pread(fd, max(size - offset, 0) + 1, offset)
    if len(first) <= size - offset:
        return first
    parts = [first]
    total = len(first)
    while chunk := os.pread(fd, 1 << 20, offset + total):
        parts.append(chunk)
        total += len(chunk)
        if offset + total > max_bytes:
            raise TooLargeError(path, offset + total, max_bytes)
    return b"".join(parts)


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
