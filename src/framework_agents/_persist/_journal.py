"""The journal: framed, checksummed records appended with one ``fdatasync`` each.

A journal sits beside a pinned document and holds what was appended since the document
was last published. Its first record is a header ``{"journal": 1, "token": T}`` binding
it to the document whose token is ``T``; a journal whose token differs from its
document's is stale (left by a writer that published the document and died before
removing the journal) and is ignored.

Record frame (big-endian)::

    length (4) | crc32(length) (4) | crc32(payload) (4) | payload (length bytes)

The header checksum makes a damaged length detectable on its own. A record is
acknowledged once its append's ``fdatasync`` returned. A crash mid-append leaves at most
one incomplete or damaged record at the end: the *torn tail*. A damaged record that no
valid record follows is that tail (an unacknowledged append) and is ignored, and the next
writer truncates it under the store's lock before appending; a damaged record followed by
a valid one is corruption (the store's ``*_CORRUPT`` code).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass

from ._json import strict_loads
from ._version import version_problem

__all__ = [
    "FRAME_BYTES",
    "JOURNAL_FORMAT_VERSION",
    "JournalCorruptError",
    "Scan",
    "append_record",
    "frame",
    "header_payload",
    "parse_header",
    "scan",
]

#: Version of the journal's framing and header.
JOURNAL_FORMAT_VERSION = 1
#: Bytes of a record's frame before its payload.
FRAME_BYTES = 12
_HEAD = struct.Struct(">II")
_CRC = struct.Struct(">I")
#: How far past a damaged record a scan looks for a valid one (bounds the error path).
_RESYNC_LIMIT = 1 << 24


class JournalCorruptError(ValueError):
    """A damaged record with valid records after it, or a bad header."""


@dataclass(frozen=True, slots=True)
class Scan:
    """What a scan found: the payloads, where valid data ends, and whether a torn tail follows."""

    payloads: list[bytes]
    end: int
    torn: bool


def frame(payload: bytes) -> bytes:
    """The framed record of ``payload``."""
    length = len(payload).to_bytes(4, "big")
    return b"".join(
        (length, _CRC.pack(zlib.crc32(length)), _CRC.pack(zlib.crc32(payload)), payload)
    )


def _record_at(data: bytes | memoryview, offset: int) -> int | None:
    """End offset of the valid record at ``offset``, or ``None`` if there is none."""
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


def _valid_record_after(data: bytes, offset: int) -> int | None:
    """Offset of a valid record starting after ``offset``, if any (error path only)."""
    stop = min(len(data) - FRAME_BYTES, offset + _RESYNC_LIMIT)
    for candidate in range(offset + 1, stop + 1):
        if _record_at(data, candidate) is not None:
            return candidate
    return None


def scan(data: bytes, *, start: int = 0) -> Scan:
    """The records of ``data`` from ``start`` (a record boundary).

    Raises:
        JournalCorruptError: a damaged record is followed by a valid one.
    """
    view = memoryview(data)
    payloads: list[bytes] = []
    offset = start
    while offset < len(data):
        end = _record_at(view, offset)
        if end is None:
            found = _valid_record_after(data, offset)
            if found is not None:
                raise JournalCorruptError(
                    f"damaged record at byte {offset} with a valid record at byte {found} after it"
                )
            return Scan(payloads, offset, torn=True)
        payloads.append(bytes(view[offset + FRAME_BYTES : end]))
        offset = end
    return Scan(payloads, offset, torn=False)


def header_payload(token: str) -> bytes:
    """The payload of a journal's first record, binding it to the document ``token``."""
    return json.dumps(
        {"journal": JOURNAL_FORMAT_VERSION, "token": token}, separators=(",", ":")
    ).encode()


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
