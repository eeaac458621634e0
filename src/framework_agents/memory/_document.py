"""The ``memory.json`` document: strict parsing and per-message JSON fragments.

The document is ``{"version": 1, "messages": [...]}`` and nothing else. The reader is
strict because a document it accepted would later be rewritten: anything it cannot read
exactly (bad UTF-8 or JSON, duplicate keys, NaN or infinite numbers, nesting too deep,
wrong types, unknown keys, a newer version) is reported as corrupt instead. The writer
emits the document as ``HEADER + fragment ("," fragment)* + FOOTER`` so that a writer can
reuse the fragments of messages it already serialised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from .._persist import json_type, strict_loads
from ..errors import InvalidArgumentError, MemoryCorruptError
from ..messages import Message, MessageList

__all__ = [
    "FOOTER",
    "HEADER",
    "MEMORY_FORMAT_VERSION",
    "SEP",
    "encode_message",
    "encode_stored",
    "parse_document",
    "same_json_message",
    "strict_loads",
]

#: Version of the ``memory.json`` document; readers refuse newer ones.
MEMORY_FORMAT_VERSION = 1

HEADER = b'{"version":%d,"messages":[' % MEMORY_FORMAT_VERSION
FOOTER = b"]}"
SEP = b","

_KEYS = frozenset({"version", "messages"})
_SERIALIZER = Message.__pydantic_serializer__


def _canonical_messages(data: bytes) -> list[Message] | None:
    """The messages of ``data`` parsed in one pass if it is exactly what writing them makes.

    The strict reader runs a Python hook for every JSON object. A document that is byte
    for byte ``HEADER`` + the serialisation of the messages it parses to + ``FOOTER``
    cannot hold anything that reader refuses (a duplicate key, NaN, an out-of-range
    number or a surrogate escape would each serialise differently, or not at all): that
    is every file FileMemory wrote. Anything else goes to the strict reader, which alone
    decides what is accepted and names the problem.
    """
    if len(data) < len(HEADER) + len(FOOTER) or not (
        data.startswith(HEADER) and data.endswith(FOOTER)
    ):
        return None
    items = data[len(HEADER) - 1 : len(data) - len(FOOTER) + 1]  # the "[...]" of messages
    try:
        messages = MessageList.validate_json(items)
        if MessageList.dump_json(messages) == items:
            return messages
    except (ValidationError, PydanticSerializationError, ValueError, RecursionError):
        pass
    return None


def parse_document(data: bytes, path: Path) -> list[Message]:
    """The messages of a ``memory.json`` document, or ``MemoryCorruptError``."""
    fast = _canonical_messages(data)
    if fast is not None:
        return fast

    def corrupt(reason: str) -> MemoryCorruptError:
        return MemoryCorruptError(
            f"{path} is not a valid memory file ({reason}); it was left untouched — "
            "inspect or remove it to continue"
        )

    try:
        doc = strict_loads(data)
    except RecursionError:
        raise corrupt("nested too deeply") from None
    except ValueError as exc:
        raise corrupt(f"unreadable JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise corrupt(f"top level is {json_type(doc)}, not an object")
    if doc.keys() != _KEYS:
        missing = sorted(_KEYS - doc.keys())
        extra = sorted(doc.keys() - _KEYS)
        raise corrupt(f"missing keys {missing}, unknown keys {extra}")
    version = doc["version"]
    if type(version) is not int:
        raise corrupt(f"version is {version!r}, not an integer")
    if version > MEMORY_FORMAT_VERSION:
        raise corrupt(
            f"version {version} was written by a newer framework-agents; "
            f"this one reads up to version {MEMORY_FORMAT_VERSION}"
        )
    if version < 1:
        raise corrupt(f"unknown version {version}")
    items = doc["messages"]
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


def encode_stored(msg: Message) -> bytes:
    """The JSON fragment of a message read back from a valid document."""
    return _SERIALIZER.to_json(msg)


def encode_message(msg: Message) -> tuple[bytes, Message]:
    """The JSON fragment of a message to save, checked to read back equal, and its read-back.

    A message whose content, tool-call args or metadata hold values JSON cannot carry
    exactly (NaN, tuples, sets, datetimes, lone surrogates, arbitrary objects) would come
    back different or make the file unreadable, so it is refused with
    ``InvalidArgumentError`` rather than stored altered. The read-back message is an
    independent object equal to ``msg`` (see :func:`same_json_message`).
    """
    try:
        fragment = _SERIALIZER.to_json(msg)
        back = Message.model_validate(strict_loads(fragment))
    except (PydanticSerializationError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"message {msg.id!r} cannot be stored as JSON: {exc}") from None
    if back.__dict__ != msg.__dict__ or type(msg) is not Message:
        raise InvalidArgumentError(
            f"message {msg.id!r} would not read back equal: content, tool-call args and "
            "metadata must hold JSON values only (str, int, finite float, bool, None, "
            "list, dict with str keys)"
        )
    return fragment, back


def _same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values would serialise the same: equal, and equal ``repr``.

    ``==`` alone holds for ``True`` and ``1``, ``1`` and ``1.0``, ``0.0`` and ``-0.0``, a
    tuple and a list, or dicts in another key order, all of which JSON writes (or reads
    back) differently; their ``repr`` tells each of them apart, in C.
    """
    return bool(a == b) and repr(a) == repr(b)


def same_json_message(a: Message, b: Message) -> bool:
    """Whether ``a`` and ``b`` would serialise to the same JSON fragment.

    Stricter than ``==``, which holds for ``True`` and ``1``, ``1`` and ``1.0``, ``0.0`` and
    ``-0.0`` or dicts in another key order: all of which JSON writes differently.
    """
    if type(a) is not Message or type(b) is not Message:
        return False
    da, db = a.__dict__, b.__dict__
    if (
        da["content"].__class__ is str
        and db["content"].__class__ is str
        and not (da["tool_calls"] or db["tool_calls"] or da["metadata"] or db["metadata"])
    ):
        # Most messages: text only. Their other fields are compared with == as below, and
        # empty tool calls and metadata serialise alike when == (not: [] and (), {} and []).
        return bool(da == db)
    if (a.id, a.role, a.tool_call_id, a.name) != (b.id, b.role, b.tool_call_id, b.name):
        return False
    ca, cb = a.content, b.content
    if type(ca) is not type(cb) or len(ca) != len(cb):
        return False
    if isinstance(ca, str):
        if ca != cb:
            return False
    elif not all(type(x) is type(y) and x == y for x, y in zip(ca, cb, strict=True)):
        return False
    if len(a.tool_calls) != len(b.tool_calls):
        return False
    for x, y in zip(a.tool_calls, b.tool_calls, strict=True):
        if type(x) is not type(y) or (x.id, x.name) != (y.id, y.name):
            return False
        if not _same_json(x.args, y.args):
            return False
    return _same_json(a.metadata, b.metadata)
