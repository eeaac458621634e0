"""Logged values: records appended to a value since it was last stored (internal).

An optional ``Storage`` capability that lets ``SessionManager.save_latest`` write only
what is new: ``read_logged(key)`` gives the value, the records appended since it was
stored and a *tag* naming that state; ``append_logged(key, record, expected)`` appends a
record if the state is still ``expected`` (else ``CHECKPOINT_CONFLICT``) and returns the
new tag. Storing the value (``put``, ``swap``) starts a new, empty log. The tag of a value
without records is its :func:`~framework_agents.sessions._base.digest`, so ``swap``'s
``expected`` is a tag too.

On disk (``LocalFileStorage``) the log of ``<dir>/a/b.json`` is ``<dir>/a/.b.json.log``
(a dot name is never a key): the persistence layer's journal, whose header token is the
digest of the value it extends, so a log left beside a newer value is stale and ignored.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid

from .._persist import (
    JournalCorruptError,
    append_record,
    frame,
    header_payload,
    mark_landed,
    parse_header,
    scan,
)
from ..errors import SnapshotCorruptError, StorageKeyInvalidError
from ._base import digest

__all__ = [
    "LogState",
    "append_log_at",
    "digest_tag",
    "drop_log_at",
    "log_name",
    "read_log_at",
    "tag_of",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def log_name(name: str) -> str:
    """The file name of the log of the value file ``name``."""
    return f".{name}.log"


def tag_of(value: bytes | None, records: int, end: int) -> str | None:
    """The tag of a value with ``records`` log records ending at byte ``end``."""
    return None if value is None else digest_tag(digest(value), records, end)


def digest_tag(value_digest: str, records: int, end: int) -> str:
    """:func:`tag_of` a value whose digest is ``value_digest``."""
    return value_digest if records == 0 else f"{value_digest}:{end}"


class LogState:
    """A log as read: its records, where valid data ends, and whether the file exists."""

    def __init__(self, records: list[bytes], end: int, exists: bool, stale: bool) -> None:
        self.records = records
        self.end = end
        self.exists = exists
        self.stale = stale


def read_log_at(key: str, dfd: int, name: str, value: bytes | None) -> LogState:
    """The log of ``name`` in the directory ``dfd`` (stale when bound to another value)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC
    try:
        fd = os.open(log_name(name), flags, dir_fd=dfd)
    except FileNotFoundError:
        return LogState([], 0, exists=False, stale=False)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StorageKeyInvalidError(f"storage key {key!r}: its log is a symlink") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageKeyInvalidError(f"storage key {key!r}: its log is not a regular file")
        parts: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(parts)
    try:
        found = scan(data)
        if value is None or not found.payloads or parse_header(found.payloads[0]) != digest(value):
            return LogState([], 0, exists=True, stale=True)
    except JournalCorruptError as exc:
        raise SnapshotCorruptError(
            f"the log of {key!r} is damaged ({exc}); left untouched"
        ) from None
    return LogState(found.payloads[1:], found.end, exists=True, stale=False)


def append_log_at(dfd: int, name: str, value_digest: str, log: LogState, record: bytes) -> int:
    """Append ``record`` (one ``fdatasync``); a missing or stale log is replaced first.

    Returns the new end of the log's valid data.
    """
    framed = frame(record)
    if not log.exists or log.stale:
        head = frame(header_payload(value_digest))
        tmp = f".{name}.{uuid.uuid4().hex}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd
        )
        try:
            try:
                os.write(fd, head + framed)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, log_name(name), src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        try:
            os.fsync(dfd)
        except OSError as exc:
            raise mark_landed(exc) from None
        return len(head) + len(framed)
    fd = os.open(log_name(name), os.O_RDWR | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dfd)
    try:
        append_record(fd, log.end, framed)
    finally:
        os.close(fd)
    return log.end + len(framed)


def drop_log_at(dfd: int, name: str) -> None:
    """Remove the log of ``name`` (no error when there is none)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(log_name(name), dir_fd=dfd)
