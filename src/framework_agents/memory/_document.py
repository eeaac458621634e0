"""The ``memory.json`` document and its journal records: strict parsing, JSON fragments.

Version 3 of the document (written since layout v3) is ``{"version": 3, "journal":
"<token>", "folded": "<token or empty>", "check": "<crc32>", "messages": [...]}``:
``journal`` binds the journal beside it (``memory.json.journal``) to this document,
``folded`` names the journal this document folded (the one a writer that died before
removing it leaves behind: the only journal the document may ignore) and ``check`` is the
CRC32 of every other byte of the document exactly as written (the tokens included), so a
bit flip anywhere is corrupt, never an altered history or a journal taken for stale.
Version 2 (``{"version": 2, "journal": "<token>", "check": "<crc32>", "messages": [...]}``,
its check over the messages array only) and version 1 (``{"version": 1, "messages":
[...]}``, no journal) are still read; the first write folds them into version 3. A
journal record's payload is a JSON array of messages, read as strictly as the document.
The reader is strict because a document it accepted would later be rewritten: anything
it cannot read exactly (bad UTF-8 or JSON, duplicate keys, NaN or infinite numbers,
nesting too deep, wrong types, unknown keys, a newer version, more items than the bound)
is reported as corrupt. The writer emits the document as ``header(...) + fragment (","
fragment)* + FOOTER`` so that it can reuse the fragments of messages it already
serialised.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from .._persist import (
    json_type,
    overlong_int,
    parse_items,
    strict_loads,
    version_problem,
)
from ..errors import MemoryCorruptError
from ..messages import Message, MessageList

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Document",
    "DEFAULT_MAX_ITEMS",
    "FOOTER",
    "HEADER",
    "MEMORY_FORMAT_VERSION",
    "SEP",
    "count_items",
    "document_head",
    "encode_stored",
    "header",
    "parse_document",
    "parse_record",
    "split_v3",
]

#: Version of the ``memory.json`` document; readers refuse newer ones.
MEMORY_FORMAT_VERSION = 3
#: Default bound on the bytes of ``memory.json`` plus its journal (checked before reading).
DEFAULT_MAX_BYTES = 256 << 20
#: Default bound on the objects with an ``"id"`` (messages and tool calls) in the document
#: and in its journal, each (counted before parsing).
DEFAULT_MAX_ITEMS = 200_000

#: Header of a version-1 document (read only).
HEADER = b'{"version":1,"messages":['
FOOTER = b"]}"
SEP = b","

_V2_HEADER = re.compile(
    rb'\{"version":2,"journal":"([0-9a-f]{32})","check":"([0-9a-f]{8})","messages":\['
)
_V3_HEADER = re.compile(
    rb'\{"version":3,"journal":"([0-9a-f]{32})","folded":"((?:[0-9a-f]{32})?)",'
    rb'"check":"([0-9a-f]{8})","messages":\['
)
#: Bytes of a version-3 header after its check digits.
_V3_TAIL = b'","messages":['
_V1_KEYS = frozenset({"version", "messages"})
_V2_KEYS = frozenset({"version", "journal", "check", "messages"})
_SERIALIZER = Message.__pydantic_serializer__
_ID_KEY = b'"id":'


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed ``memory.json``: its messages, version and journal tokens.

    ``token`` is ``None`` for version 1 (no journal); ``folded`` is ``None`` for versions
    before 3 (which named no folded journal), else the folded journal's token or ``""``.
    """

    messages: list[Message]
    version: int
    token: str | None
    folded: str | None


def header(token: str, folded: str, body: bytes) -> bytes:
    """The opening of a version-3 document holding messages ``body``, its check included."""
    prefix = b'{"version":3,"journal":"%s","folded":"%s","check":"' % (
        token.encode("ascii"),
        folded.encode("ascii"),
    )
    crc = zlib.crc32(prefix)
    for part in (_V3_TAIL, body, FOOTER):
        crc = zlib.crc32(part, crc)
    return b"%s%08x%s" % (prefix, crc, _V3_TAIL)


def split_v3(data: bytes) -> tuple[str, str, bytes] | None:
    """``(token, folded, messages body)`` of a version-3 document's bytes (no check made)."""
    match = _V3_HEADER.match(data)
    if match is None or not data.endswith(FOOTER) or match.end() > len(data) - len(FOOTER):
        return None
    body = data[match.end() : len(data) - len(FOOTER)]
    return match.group(1).decode("ascii"), match.group(2).decode("ascii"), body


def document_head(data: bytes) -> bytes:
    """The header of a canonical version-3 document (what :func:`header` made), else ``b""``."""
    match = _V3_HEADER.match(data)
    return b"" if match is None else match.group(0)


def _v2_check(data: bytes | memoryview) -> int:
    return zlib.crc32(data)


def count_items(data: bytes) -> int:
    """An upper bound on the messages and tool calls in ``data`` (one C scan).

    Every message and tool call has an ``"id"`` key; the pattern cannot occur inside a
    JSON string (its quotes would be escaped), so only keys named ``id`` are counted.
    """
    return data.count(_ID_KEY)


def _canonical_items(items: bytes) -> list[Message] | None:
    if overlong_int(items) is not None:
        return None  # the strict reader applies the interpreter's lowered digit limit
    try:
        messages = MessageList.validate_json(items)
        if MessageList.dump_json(messages) == items:
            return messages
    except (ValidationError, PydanticSerializationError, ValueError, RecursionError):
        pass
    return None


def _canonical_messages(data: bytes) -> list[Message] | None:
    """The messages of ``data`` parsed in one pass when it is exactly what FileMemory writes.

    Version 1: a document that is byte for byte ``HEADER`` + the serialisation of the
    messages it parses to + ``FOOTER`` cannot hold anything the strict reader refuses (a
    duplicate key, NaN, an out-of-range number or a surrogate escape would each serialise
    differently, or not at all). Version 2: the header's CRC32 of the messages array
    proves the bytes are what the writer serialised, so one parse is all it takes.
    Anything else goes to the strict reader, which alone names the problem.
    """
    found = _canonical_document(data)
    return found.messages if isinstance(found, Document) else None


def _canonical_document(data: bytes) -> Document | str | None:
    """The document of canonical ``data``, a reason it is corrupt, or ``None`` (not canonical)."""
    if not data.endswith(FOOTER):
        return None
    if data.startswith(HEADER):
        items = data[len(HEADER) - 1 : len(data) - len(FOOTER) + 1]
        messages = _canonical_items(items)
        return None if messages is None else Document(messages, 1, None, None)
    view = memoryview(data)
    end = len(data) - len(FOOTER)
    match = _V3_HEADER.match(data)
    if match is not None and match.end() <= end:
        start = match.end()
        check_at = match.start(3)
        crc = zlib.crc32(view[check_at + 8 :], zlib.crc32(view[:check_at]))
        if crc != int(match.group(3), 16):
            return "checksum mismatch: the document is not the bytes that were written"
        token, folded = match.group(1).decode("ascii"), match.group(2).decode("ascii")
        version = 3
    else:
        match = _V2_HEADER.match(data)
        if match is None or match.end() > end:
            return None
        start = match.end()
        if _v2_check(view[start - 1 : end + 1]) != int(match.group(2), 16):
            return "checksum mismatch: the messages are not the bytes that were written"
        token, folded, version = match.group(1).decode("ascii"), None, 2
    overlong = overlong_int(data)
    if overlong is not None:
        return overlong
    try:
        return Document(parse_items(data, start, end), version, token, folded)
    except (ValidationError, ValueError, RecursionError) as exc:
        return f"checksummed messages do not validate: {exc}"


def _corrupt_factory(path: Path, what: str) -> Callable[[str], MemoryCorruptError]:
    def corrupt(reason: str) -> MemoryCorruptError:
        return MemoryCorruptError(
            f"{path} is not a valid memory {what} ({reason}); it was left untouched — "
            "inspect or remove it to continue"
        )

    return corrupt


def _validate_items(items: Any, corrupt: Callable[[str], MemoryCorruptError]) -> list[Message]:
    if not isinstance(items, list):
        raise corrupt(f"messages is {json_type(items)}, not an array")
    try:
        return MessageList.validate_python(items)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        count = exc.error_count()
        more = f" and {count - 1} more problem(s)" if count > 1 else ""
        raise corrupt(f"message {where}: {first['msg']}{more}") from None
    except RecursionError:
        raise corrupt("nested too deeply") from None


def _strict(data: bytes, corrupt: Callable[[str], MemoryCorruptError]) -> Any:
    try:
        return strict_loads(data)
    except RecursionError:
        raise corrupt("nested too deeply") from None
    except ValueError as exc:
        raise corrupt(f"unreadable JSON: {exc}") from None


def _check_items(data: bytes, max_items: int, corrupt: Callable[[str], MemoryCorruptError]) -> None:
    if len(data) // len(_ID_KEY) <= max_items:
        return  # too short to hold more: each item takes at least its '"id":'
    count = count_items(data)
    if count > max_items:
        raise corrupt(f"{count} messages and tool calls, more than the bound of {max_items}")


def parse_document(data: bytes, path: Path, *, max_items: int = DEFAULT_MAX_ITEMS) -> Document:
    """The messages of a ``memory.json`` document, its version and its journal tokens.

    Raises:
        MemoryCorruptError: anything the strict reader refuses (see the module docstring).
    """
    corrupt = _corrupt_factory(path, "file")
    _check_items(data, max_items, corrupt)
    fast = _canonical_document(data)
    if isinstance(fast, str):
        raise corrupt(fast)
    if fast is not None:
        return fast
    doc = _strict(data, corrupt)
    if not isinstance(doc, dict):
        raise corrupt(f"top level is {json_type(doc)}, not an object")
    problem = version_problem(doc.get("version"), MEMORY_FORMAT_VERSION)
    if problem is not None:
        raise corrupt(problem)
    if doc["version"] >= 2:
        # Only a byte-exact document carries a valid checksum; it was read above.
        raise corrupt(f"a version-{doc['version']} document must be exactly as FileMemory wrote it")
    if doc.keys() != _V1_KEYS:
        missing = sorted(_V1_KEYS - doc.keys())
        extra = sorted(doc.keys() - _V1_KEYS)
        raise corrupt(f"missing keys {missing}, unknown keys {extra}")
    return Document(_validate_items(doc["messages"], corrupt), 1, None, None)


def parse_record(
    payload: bytes, path: Path, *, max_items: int = DEFAULT_MAX_ITEMS
) -> list[Message]:
    """The messages of one journal record (a JSON array of messages), read strictly.

    A record that is byte for byte the serialisation of the messages it parses to (every
    record FileMemory wrote) is read in one pass: it cannot hold what the strict reader
    refuses (a duplicate key, NaN, an infinite or out-of-range number would each
    serialise differently). Anything else goes to the strict reader, which names the
    problem: the record's checksum proves only that the bytes were not damaged.

    Raises:
        MemoryCorruptError: the record does not hold messages, or not strictly.
    """
    corrupt = _corrupt_factory(path, "journal")
    _check_items(payload, max_items, corrupt)
    if payload.startswith(b"[") and payload.endswith(b"]") and overlong_int(payload) is None:
        try:
            return parse_items(payload, 1, len(payload) - 1, exact=True)
        except (ValidationError, ValueError, RecursionError):
            pass
    return _validate_items(_strict(payload, corrupt), corrupt)


def encode_stored(msg: Message) -> bytes:
    """The JSON fragment of a message read back from a valid document."""
    return _SERIALIZER.to_json(msg)
