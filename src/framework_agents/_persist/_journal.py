"""The journal: framed, checksummed records appended with one ``fdatasync`` each.

A journal sits beside a pinned document and holds what was appended since the document
was last published. Its first record is a header ``{"journal": V, "token": T}``: ``V`` is
the framing version (below) and ``T`` binds the journal to the document whose token is
``T``. A journal is created holding its header and its first record at once (atomic
publish), so a damaged or missing header is corruption, never a torn write.

Which journals a document may ignore is its store's rule (:func:`bound`): a version-3
document names both its own token and the token of the journal it folded, and a journal
bound to neither is corruption (``*_CORRUPT``), never a stale file that is silently
dropped; an older document (which named no folded journal) ignores any journal whose
token differs.

Record frame, version 2 (written since layout v3; big-endian)::

    length (4) | crc32(length) (4) | crc32(payload) (4) | payload | commit (4)

``commit`` is the constant :data:`COMMIT`, written with the record and made durable by
its ``fdatasync``. It tells a torn write from a damaged record: a crash mid-append leaves
at most one incomplete record at the end, whose missing bytes read as nothing (the file
is shorter) or as zeros (blocks never written). So the last record is a *torn tail*,
ignored and cut by the next writer under the store's lock, only when the file ends
inside it or its commit marker is all zeros; a complete record that fails any check
(its length's checksum, its payload's, its marker), last or not, is corruption.

Version 1 (read only; appended to only while its version-2 document is not folded yet)
had no commit marker: a damaged record that no valid record follows was taken for the
torn tail.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import zlib
from dataclasses import dataclass

from ._json import strict_loads
from ._version import version_problem

__all__ = [
    "COMMIT",
    "FRAME_BYTES",
    "JOURNAL_FORMAT_VERSION",
    "JournalCorruptError",
    "Scan",
    "append_record",
    "bound",
    "frame",
    "header_payload",
    "header_token_at",
    "header_token_of",
    "parse_header",
    "scan",
]

#: Version of the journal's framing and header (2: records end with :data:`COMMIT`).
JOURNAL_FORMAT_VERSION = 2
#: Bytes of a record's frame before its payload.
FRAME_BYTES = 12
#: The commit marker ending every version-2 record (no single bit flip makes it zero).
COMMIT = b"\xc0\x4d\x17\xfa"
_HEAD = struct.Struct(">II")
_CRC = struct.Struct(">I")
#: How far past a damaged record a version-1 scan looks for a valid one (error path).
_RESYNC_LIMIT = 1 << 24


class JournalCorruptError(ValueError):
    """A damaged record (a complete one, or one with valid records after it), or a bad header."""


@dataclass(frozen=True, slots=True)
class Scan:
    """What a scan found: the payloads, where valid data ends, whether a torn tail follows.

    ``version`` is the journal's framing version (from its header, or as given).
    """

    payloads: list[bytes]
    end: int
    torn: bool
    version: int = JOURNAL_FORMAT_VERSION


def frame(payload: bytes, version: int = JOURNAL_FORMAT_VERSION) -> bytes:
    """The framed record of ``payload`` (``version``: of the journal it goes to)."""
    length = len(payload).to_bytes(4, "big")
    parts = [length, _CRC.pack(zlib.crc32(length)), _CRC.pack(zlib.crc32(payload)), payload]
    if version >= 2:
        parts.append(COMMIT)
    return b"".join(parts)


def _v1_record_at(data: bytes | memoryview, offset: int) -> int | None:
    """End offset of the valid version-1 record at ``offset``, or ``None`` if there is none."""
    if len(data) - offset < FRAME_BYTES:
        return None
    length, head_crc = _HEAD.unpack_from(data, offset)
    if zlib.crc32(bytes(data[offset : offset + 4])) != head_crc:
        return None
    end: int = offset + FRAME_BYTES + length
    if end > len(data):
        return None
    (crc,) = _CRC.unpack_from(data, offset + 8)
    if zlib.crc32(data[offset + FRAME_BYTES : end]) != crc:
        return None
    return end


def _v1_valid_after(data: bytes, offset: int) -> int | None:
    """Offset of a valid version-1 record starting after ``offset``, if any (error path)."""
    stop = min(len(data) - FRAME_BYTES, offset + _RESYNC_LIMIT)
    for candidate in range(offset + 1, stop + 1):
        if _v1_record_at(data, candidate) is not None:
            return candidate
    return None


def _zeros(view: memoryview) -> bool:
    return not any(view)


#: What a version-2 record at an offset is: its end (valid), torn, or why it is damaged.
_TORN = -1


def _v2_record_at(view: memoryview, offset: int) -> int | str:
    """End of the valid version-2 record at ``offset``, :data:`_TORN`, or why it is damaged."""
    size = len(view)
    if size - offset < FRAME_BYTES:
        return _TORN  # the file ends inside the frame
    length, head_crc = _HEAD.unpack_from(view, offset)
    if zlib.crc32(view[offset : offset + 4]) != head_crc:
        if _zeros(view[offset:]):
            return _TORN  # blocks allocated, never written
        return "its length is damaged"
    end: int = offset + FRAME_BYTES + length + len(COMMIT)
    if end > size:
        return _TORN  # the file ends inside the record
    marker = view[end - len(COMMIT) : end]
    if end == size and _zeros(marker):
        return _TORN  # complete in size, never committed (its last bytes not written)
    (crc,) = _CRC.unpack_from(view, offset + 8)
    if zlib.crc32(view[offset + FRAME_BYTES : end - len(COMMIT)]) != crc:
        return "its payload fails its checksum"
    if marker != COMMIT:
        return "its commit marker is damaged"
    return end


def _scan_records(data: bytes, start: int, version: int) -> Scan:
    view = memoryview(data)
    payloads: list[bytes] = []
    offset = start
    size = len(data)
    while offset < size:
        if version >= 2:
            found = _v2_record_at(view, offset)
            if found == _TORN:
                return Scan(payloads, offset, torn=True, version=version)
            if isinstance(found, str):
                raise JournalCorruptError(f"damaged record at byte {offset}: {found}")
            payloads.append(bytes(view[offset + FRAME_BYTES : found - len(COMMIT)]))
            offset = found
            continue
        end = _v1_record_at(view, offset)
        if end is None:
            after = _v1_valid_after(data, offset)
            if after is not None:
                raise JournalCorruptError(
                    f"damaged record at byte {offset} with a valid record at byte {after} after it"
                )
            return Scan(payloads, offset, torn=True, version=version)
        payloads.append(bytes(view[offset + FRAME_BYTES : end]))
        offset = end
    return Scan(payloads, offset, torn=False, version=version)


def _header_version(data: bytes) -> tuple[bytes, int, int]:
    """The header payload of a whole journal, its framing version and where it ends."""
    end = _v1_record_at(data, 0)
    if end is None:
        raise JournalCorruptError("its header record is damaged or incomplete")
    payload = data[FRAME_BYTES:end]
    try:
        doc = strict_loads(payload)
    except (ValueError, RecursionError) as exc:
        raise JournalCorruptError(f"unreadable journal header: {exc}") from None
    version = doc.get("journal") if isinstance(doc, dict) else None
    problem = version_problem(version, JOURNAL_FORMAT_VERSION)
    if problem is not None:
        raise JournalCorruptError(f"journal {problem}")
    assert isinstance(version, int)
    if version >= 2:
        if data[end : end + len(COMMIT)] != COMMIT:
            raise JournalCorruptError("its header record has no commit marker")
        end += len(COMMIT)
    return payload, version, end


def scan(data: bytes, *, version: int | None = None) -> Scan:
    """The records of ``data``.

    Without ``version``, ``data`` is a whole journal: its header record (returned as the
    first payload) says the framing. With it, ``data`` is the part of a journal after a
    record boundary (a journal read on from where a previous scan ended). Empty ``data``
    has no records.

    Raises:
        JournalCorruptError: a damaged record (see the module docstring) or header.
    """
    if version is not None:
        return _scan_records(data, 0, version)
    if not data:
        return Scan([], 0, torn=False)
    head, found_version, end = _header_version(data)
    rest = _scan_records(data, end, found_version)
    return Scan([head, *rest.payloads], rest.end, rest.torn, found_version)


def header_payload(token: str, version: int = JOURNAL_FORMAT_VERSION) -> bytes:
    """The payload of a journal's first record, binding it to the document ``token``."""
    return json.dumps({"journal": version, "token": token}, separators=(",", ":")).encode()


def parse_header(payload: bytes) -> str:
    """The token of a journal header record.

    Raises:
        JournalCorruptError: not a header, or one of a newer journal version.
    """
    try:
        doc = strict_loads(payload)
    except (ValueError, RecursionError) as exc:
        raise JournalCorruptError(f"unreadable journal header: {exc}") from None
    if not isinstance(doc, dict) or doc.keys() != {"journal", "token"}:
        raise JournalCorruptError("the first record is not a journal header")
    problem = version_problem(doc["journal"], JOURNAL_FORMAT_VERSION)
    if problem is not None:
        raise JournalCorruptError(f"journal {problem}")
    token = doc["token"]
    if not isinstance(token, str) or not token:
        raise JournalCorruptError("journal header has no token")
    return token


def bound(found: str, token: str, folded: str | None) -> bool:
    """Whether a journal whose header names ``found`` extends the document ``token``.

    ``False``: the journal is stale (left by a writer that published the document and
    died before removing it) and is ignored. ``folded`` is the token of the journal the
    document says it folded; ``None`` for a document of a layout that named none (any
    other journal is stale then).

    Raises:
        JournalCorruptError: the document names a folded journal and this is not it: the
            document or the journal is damaged, and ignoring the journal would drop saves
            that were acknowledged.
    """
    if found == token:
        return True
    if folded is None or found == folded:
        return False
    raise JournalCorruptError(
        "its header binds it to neither this document nor the journal the document folded"
    )


def append_record(fd: int, offset: int, record: bytes) -> None:
    """Write ``record`` at ``offset`` (the valid end) and ``fdatasync`` it.

    Whatever lies past ``offset`` (a torn tail) is cut first, so the record follows the
    last valid one. ``OSError`` raised once the record was fully written carries
    ``may_have_landed = True``.
    """
    if os.fstat(fd).st_size != offset:
        os.ftruncate(fd, offset)
    view = memoryview(record)
    pos = offset
    while view:
        written = os.pwrite(fd, view, pos)
        view = view[written:]
        pos += written
    try:
        os.fdatasync(fd)
    except OSError as exc:
        exc.may_have_landed = True  # type: ignore[attr-defined]
        raise


def header_token_of(fd: int) -> str | None:
    """The token in the header of the journal open at ``fd`` (``None``: none, or unreadable).

    Reads the first 4 KiB once; the fd stays open (its owner closes it).
    """
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return None
    data = os.pread(fd, 4096, 0)
    try:
        head = data[: 16 + int.from_bytes(data[:4], "big")] if len(data) >= 4 else data
        return parse_header(scan(head).payloads[0])
    except (JournalCorruptError, IndexError):
        return None


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def header_token_at(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> str | None:
    """The token in the header of the journal at ``path`` (``None``: none, or unreadable).

    A symlink is never followed; ``dir_fd``: ``path`` is relative to that directory.
    """
    try:
        fd = os.open(path, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return header_token_of(fd)
    finally:
        os.close(fd)
