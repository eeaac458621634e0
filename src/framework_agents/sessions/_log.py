r"""Logged values: records appended to a value since it was last stored (internal).

An optional ``Storage`` capability that lets ``SessionManager.save_latest`` write only
what is new: ``read_logged(key)`` gives the value, the records appended since it was
stored and a *tag* naming that state; ``append_logged(key, record, expected)`` appends a
record if the state is still ``expected`` (else ``CHECKPOINT_CONFLICT``) and returns the
new tag. Storing the value (``put``, ``swap``) starts a new, empty log. The tag of a value
without records is its :func:`~framework_agents.sessions._base.digest`, so ``swap``'s
``expected`` is a tag too.

On disk (``LocalFileStorage``) the log of ``<dir>/a/b.json`` is ``<dir>/a/.b.json.log``
(a dot name is never a key): the persistence layer's journal, whose header token is the
token of the value it extends.

A value file of layout v3 opens with a header line (:func:`value_header`)::

    \x00fa-value-3 <token> <folded token, or 32 "-"> <crc32>\n<the value's bytes>

``token`` binds the log to this value, ``folded`` names the log that was beside the
value it replaced (the only log a reader may take for stale: a writer that died before
removing it left it) and the CRC32 covers every other byte of the file, so a bit flip
anywhere is ``SNAPSHOT_CORRUPT``, never a log silently dropped as stale; a log bound to
neither is ``SNAPSHOT_CORRUPT`` too. A file without the header (layout v2 and before: the
value's bytes alone, whose log's token was their digest) is still read as it was, a
header damaged in its first bytes being told from such a file (:func:`open_value`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import uuid
import zlib
from dataclasses import dataclass

from .._persist import (
    JOURNAL_FORMAT_VERSION,
    JournalCorruptError,
    append_record,
    bound,
    frame,
    header_payload,
    mark_landed,
    parse_header,
    scan,
)
from ..errors import SnapshotCorruptError, StorageKeyInvalidError
from ._base import digest

__all__ = [
    "VALUE_HEADER_BYTES",
    "LogState",
    "Value",
    "append_log_at",
    "digest_tag",
    "drop_log_at",
    "log_name",
    "open_value",
    "open_value_parts",
    "read_log_at",
    "tag_of",
    "value_header",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

#: The opening of a layout-v3 value file (no JSON text starts with a NUL byte).
_MAGIC = b"\x00fa-value-3 "
_HEADER = re.compile(rb"\x00fa-value-3 ([0-9a-f]{32}) ([0-9a-f]{32}|-{32}) ([0-9a-f]{8})\n")
#: Bytes of a value file's header line.
VALUE_HEADER_BYTES = len(_MAGIC) + 32 + 1 + 32 + 1 + 8 + 1
_CHECK_AT = VALUE_HEADER_BYTES - 9
#: A file whose first bytes differ from the header's opening in this many bits or fewer
#: is a damaged header, not a value of an older layout.
_NEAR_BITS = 4


@dataclass(frozen=True, slots=True)
class Value:
    """A value as stored: its bytes and the tokens of its header.

    ``folded`` is ``None`` for a value of an older layout (no header: its log's token is
    its digest, and any other log is stale), else the folded log's token or ``""``.
    """

    data: bytes
    token: str
    folded: str | None


def value_header(token: str, folded: str, data: bytes) -> bytes:
    """The header line of a layout-v3 file holding ``data`` (its CRC32 included)."""
    start = b"%s%s %s " % (_MAGIC, token.encode("ascii"), (folded or "-" * 32).encode("ascii"))
    crc = zlib.crc32(data, zlib.crc32(b"\n", zlib.crc32(start)))
    return b"%s%08x\n" % (start, crc)


def open_value(key: str, raw: bytes) -> Value:
    """The value a file's bytes ``raw`` hold (see the module docstring).

    Raises:
        SnapshotCorruptError: a layout-v3 file that is not the bytes that were written.
    """
    match = _HEADER.match(raw)
    if match is None:
        head = raw[: len(_MAGIC)]
        near = sum((a ^ b).bit_count() for a, b in zip(head, _MAGIC, strict=False))
        if len(head) == len(_MAGIC) and near <= _NEAR_BITS:
            raise _corrupt_value(key, "its header is damaged")
        return Value(raw, digest(raw), None)
    view = memoryview(raw)
    crc = zlib.crc32(view[_CHECK_AT + 8 :], zlib.crc32(view[:_CHECK_AT]))
    if crc != int(match.group(3), 16):
        raise _corrupt_value(key, "checksum mismatch: the file is not the bytes that were written")
    folded = match.group(2).decode("ascii")
    return Value(raw[VALUE_HEADER_BYTES:], match.group(1).decode("ascii"), folded.strip("-"))


def open_value_parts(key: str, head: bytes, body: bytes) -> Value:
    """:func:`open_value` of a file read as its first :data:`VALUE_HEADER_BYTES` and the rest.

    A layout-v3 file's value is ``body`` itself (checked, never copied); any other file
    is joined and read as :func:`open_value` reads it.
    """
    match = _HEADER.fullmatch(head)
    if match is None:
        return open_value(key, head + body)
    crc = zlib.crc32(body, zlib.crc32(head[_CHECK_AT + 8 :], zlib.crc32(head[:_CHECK_AT])))
    if crc != int(match.group(3), 16):
        raise _corrupt_value(key, "checksum mismatch: the file is not the bytes that were written")
    folded = match.group(2).decode("ascii")
    return Value(body, match.group(1).decode("ascii"), folded.strip("-"))


def _corrupt_value(key: str, reason: str) -> SnapshotCorruptError:
    return SnapshotCorruptError(f"the value of {key!r} is damaged ({reason}); left untouched")


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
    """A log as read: its records, where valid data ends, and whether the file exists.

    ``token``: the token its header names (``None``: no log, or not read); ``version``:
    its framing.
    """

    def __init__(
        self,
        records: list[bytes],
        end: int,
        exists: bool,
        stale: bool,
        token: str | None = None,
        version: int = JOURNAL_FORMAT_VERSION,
    ) -> None:
        self.records = records
        self.end = end
        self.exists = exists
        self.stale = stale
        self.token = token
        self.version = version


def read_log_at(key: str, dfd: int, name: str, value: Value | None) -> LogState:
    """The log of ``name`` in the directory ``dfd`` (stale when bound to another value).

    Raises ``SNAPSHOT_CORRUPT`` for a damaged log, or one bound to neither ``value`` nor
    the log ``value`` says it folded.
    """
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
        if not found.payloads:  # empty: nothing was ever acknowledged in it
            return LogState([], 0, exists=True, stale=True)
        token = parse_header(found.payloads[0])
        if value is None or not bound(token, value.token, value.folded):
            return LogState([], 0, exists=True, stale=True, token=token, version=found.version)
    except JournalCorruptError as exc:
        raise SnapshotCorruptError(
            f"the log of {key!r} is damaged ({exc}); left untouched"
        ) from None
    return LogState(
        found.payloads[1:], found.end, exists=True, stale=False, token=token, version=found.version
    )


def append_log_at(dfd: int, name: str, token: str, log: LogState, record: bytes) -> int:
    """Append ``record`` (one ``fdatasync``); a missing or stale log is replaced first.

    ``token``: the token of the value the log extends. Returns the new end of the log's
    valid data.
    """
    if not log.exists or log.stale:
        framed = frame(record)
        head = frame(header_payload(token))
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
    framed = frame(record, log.version)
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
