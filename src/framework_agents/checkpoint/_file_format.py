"""The on-disk documents of :class:`~.file.FileCheckpointer` and their readers.

``checkpoint.json`` of layout v3 is an envelope (:func:`envelope`)::

    {"version":3,"journal":"<token>","folded":"<token or empty>","check":"<crc32>",
     "checkpoint":<the checkpoint, version 2>}

``journal`` binds the journal beside it, ``folded`` names the journal it folded (the
only one a reader may ignore) and ``check`` is the CRC32 of every other byte of the file
(:func:`open_envelope`): a bit flip anywhere is ``CHECKPOINT_CORRUPT``, never a journal
taken for stale. The checkpoint inside (and a version-1 or version-2 file, which is the
checkpoint alone) is read by :func:`canonical` (one pass, when the bytes are exactly what
saving the parsed checkpoint writes: every file the checkpointer wrote) or else by the
strict reader (:func:`strict_json`, then validation), which alone decides what is
accepted and names the problem. ``progress.json`` (:class:`Progress`, written by an
earlier release) is a checkpoint without its history, bound to one ``checkpoint.json``.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError

from .._persist import (
    PARSE_SLICE,
    overlong_int,
    split_messages,
    strict_loads,
)
from ..errors import (
    AgentError,
    CheckpointCorruptError,
)
from ..messages import Message, ToolCall
from .model import (
    SavedAt,
    ThreadCheckpoint,
)

__all__ = [
    "ENVELOPE_FORMAT_VERSION",
    "OVERLAY_FIELDS",
    "PROGRESS_FORMAT_VERSION",
    "SLICED_BYTES",
    "Enveloped",
    "Progress",
    "canonical",
    "canonical_enveloped",
    "canonical_sliced",
    "corrupt",
    "envelope",
    "exact",
    "find_envelope",
    "open_envelope",
    "split_envelope",
    "strict_json",
]


#: Version of the JSON shape of ``progress.json``.
PROGRESS_FORMAT_VERSION = 1
#: Version of ``checkpoint.json``'s envelope (the layout: tokens and checksum).
ENVELOPE_FORMAT_VERSION = 3

_ENVELOPE = re.compile(
    rb'\{"version":3,"journal":"([0-9a-f]{32})","folded":"((?:[0-9a-f]{32})?)",'
    rb'"check":"([0-9a-f]{8})","checkpoint":'
)
_ENVELOPE_TAIL = b'","checkpoint":'
_ENVELOPE_END = b"}"


def envelope(token: str, folded: str, payload: bytes) -> tuple[bytes, bytes]:
    """The bytes before and after ``payload`` (a checkpoint's JSON) in a version-3 file."""
    prefix = b'{"version":3,"journal":"%s","folded":"%s","check":"' % (
        token.encode("ascii"),
        folded.encode("ascii"),
    )
    crc = zlib.crc32(
        _ENVELOPE_END, zlib.crc32(payload, zlib.crc32(_ENVELOPE_TAIL, zlib.crc32(prefix)))
    )
    return b"%s%08x%s" % (prefix, crc, _ENVELOPE_TAIL), _ENVELOPE_END


class Enveloped(NamedTuple):
    """Where a version-3 file's checkpoint lies (``data[start:stop]``) and its tokens."""

    start: int
    stop: int
    token: str
    folded: str


def find_envelope(path: Path, data: bytes) -> Enveloped | None:
    """Where the checkpoint of a version-3 file lies, and its tokens; ``None``: older.

    Raises:
        CheckpointCorruptError: a version-3 file that is not exactly as written (its
            checksum fails, or it is not the envelope byte for byte).
    """
    match = _ENVELOPE.match(data)
    if match is None or not data.endswith(_ENVELOPE_END) or match.end() >= len(data):
        if data.startswith(b'{"version":3,') or _looks_enveloped(data):
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} is unreadable (document: a version-3 checkpoint "
                "must be exactly as FileCheckpointer wrote it); it was left untouched"
            )
        return None
    view = memoryview(data)
    at = match.start(3)
    if zlib.crc32(view[at + 8 :], zlib.crc32(view[:at])) != int(match.group(3), 16):
        raise CheckpointCorruptError(
            f"checkpoint {str(path)!r} is unreadable (document: checksum mismatch, the "
            "file is not the bytes that were written); it was left untouched"
        )
    return Enveloped(
        match.end(),
        len(data) - len(_ENVELOPE_END),
        match.group(1).decode("ascii"),
        match.group(2).decode("ascii"),
    )


def split_envelope(data: bytes) -> tuple[str, str, bytes] | None:
    """``(token, folded, payload)`` of a version-3 file's bytes, unchecked; ``None``: not one.

    For a sealed payload (``cipher=``), whose authentication is stronger than the
    checksum and binds the token.
    """
    match = _ENVELOPE.match(data)
    if match is None or not data.endswith(_ENVELOPE_END) or match.end() >= len(data):
        return None
    payload = data[match.end() : len(data) - len(_ENVELOPE_END)]
    return match.group(1).decode("ascii"), match.group(2).decode("ascii"), payload


def open_envelope(path: Path, data: bytes) -> tuple[bytes, str, str] | None:
    """The checkpoint bytes, token and folded token of a version-3 file; ``None``: older.

    The checkpoint's bytes are copied out; :func:`find_envelope` gives where they lie.

    Raises:
        CheckpointCorruptError: as :func:`find_envelope`.
    """
    found = find_envelope(path, data)
    if found is None:
        return None
    return data[found.start : found.stop], found.token, found.folded


def canonical_enveloped(data: bytes, found: Enveloped) -> ThreadCheckpoint | None:
    """:func:`canonical` of the checkpoint inside the version-3 file ``data``, uncopied.

    A large one is parsed in slices straight from ``data`` (its messages) and only the
    rest, which holds none, is cut out of its envelope; a small one (or one not in its
    canonical form) is copied out and read as :func:`canonical` reads it.
    """
    tail = len(data) - found.stop
    if found.stop - found.start >= SLICED_BYTES and overlong_int(data) is None:

        def rest(doc: bytes) -> ThreadCheckpoint | None:
            return exact(doc[found.start : len(doc) - tail])

        split = split_messages(data, b',"messages":[', (b'],"state":',), rest)
        if split is not None:
            messages, shell = split
            try:
                return ThreadCheckpoint.model_validate({**shell.__dict__, "messages": messages})
            except (ValidationError, AgentError, ValueError, RecursionError):
                pass
    return canonical(data[found.start : found.stop])


def _looks_enveloped(data: bytes) -> bool:
    """Whether ``data`` opens like an envelope damaged in its first bytes (a bit flip)."""
    head = data[:80]
    return b'"journal":"' in head and b'"folded":"' in head


#: Fields a progress file carries (everything of a checkpoint but its history).
OVERLAY_FIELDS = (
    "saved_at",
    "state",
    "pending",
    "turn",
    "results",
    "in_flight",
    "outcome_unknown",
    "decisions",
)


class Progress(BaseModel):
    """``progress.json``: a checkpoint without its history, bound to one checkpoint.json."""

    model_config = ConfigDict(extra="forbid")

    # Required: every release that wrote progress.json wrote its version.
    version: int = Field(strict=True)
    thread_id: str
    base: str
    saved_at: SavedAt
    state: dict[str, Any]
    pending: ToolCall | None
    turn: Message | None
    results: list[Message]
    in_flight: list[ToolCall]
    outcome_unknown: bool
    decisions: dict[str, Any]

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if not 1 <= value <= PROGRESS_FORMAT_VERSION:
            raise ValueError(
                f"progress format version {value} is not one this framework-agents "
                f"understands (1..{PROGRESS_FORMAT_VERSION})"
            )
        return value


def strict_json(path: Path, data: bytes) -> Any:
    """Parse like ``memory.json``: what would not read back equal once saved is corrupt.

    A duplicate key, NaN/Infinity, an out-of-range number or an escaped lone surrogate
    would be accepted by a lenient parser and silently altered by the next save.
    """
    try:
        return strict_loads(data)
    except RecursionError:
        raise CheckpointCorruptError(f"checkpoint {str(path)!r} is nested too deeply") from None
    except ValueError as exc:
        raise CheckpointCorruptError(
            f"checkpoint {str(path)!r} is unreadable (document: invalid JSON: {exc})"
        ) from None


def canonical(data: bytes) -> ThreadCheckpoint | None:
    """``data`` parsed in one pass when it is exactly what saving the result writes, else None.

    The strict reader (:func:`strict_json`, then validation) is slow: a Python hook runs
    for every JSON object. But a document that is byte for byte the serialisation of the
    checkpoint it parses to cannot hold what the strict reader refuses: a duplicate key,
    a NaN, an out-of-range number or a surrogate escape would each serialise differently
    (or not at all). That is every file this checkpointer wrote; anything else (a file
    written by hand or by another writer, or a corrupt one) goes to the strict reader,
    which alone decides what is accepted and names the problem.
    """
    if overlong_int(data) is not None:
        return None  # the strict reader applies the interpreter's lowered digit limit
    if len(data) >= SLICED_BYTES:
        sliced = canonical_sliced(data)
        if sliced is not None:
            return sliced
    return exact(data)


#: A stored checkpoint this large has its messages parsed in slices
#: (:func:`canonical_sliced`); a smaller one is parsed whole, which is as fast.
SLICED_BYTES = 4 * PARSE_SLICE


def canonical_sliced(data: bytes) -> ThreadCheckpoint | None:
    """:func:`canonical` with the messages parsed in slices (``split_messages``).

    One parse of the whole document makes a pydantic fields set per message and, for
    the comparison, its whole serialisation again: a load peaked at 1.8x the memory of
    the rows of a database read back. In slices, each compared with its serialisation,
    the messages share fields sets and nothing of the document's size is made twice.
    The rest (the document with no messages) is read and compared the same way, then
    the checkpoint is validated whole from those values (every check of the model runs
    on the real messages).
    """
    split = split_messages(data, b',"messages":[', (b'],"state":',), exact)
    if split is None:
        return None
    messages, shell = split
    try:
        return ThreadCheckpoint.model_validate({**shell.__dict__, "messages": messages})
    except (ValidationError, AgentError, ValueError, RecursionError):
        return None


def exact(data: bytes) -> ThreadCheckpoint | None:
    """The checkpoint ``data`` parses to in one pass, if it serialises back to ``data``."""
    try:
        checkpoint = ThreadCheckpoint.model_validate_json(data)
        if checkpoint.__pydantic_serializer__.to_json(checkpoint) == data:
            return checkpoint
    except (ValidationError, PydanticSerializationError, AgentError, ValueError, RecursionError):
        pass
    return None


def corrupt(path: Path, exc: ValidationError) -> CheckpointCorruptError:
    errors = exc.errors()
    first = next((e for e in errors if e["loc"] == ("version",)), errors[0])
    where = ".".join(str(p) for p in first["loc"]) or "document"
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is unreadable ({where}: {first['msg']})"
    )
