"""The journal beside ``checkpoint.json``: one delta record per save (internal).

``checkpoint.journal`` starts with a header record whose token is the token of the
``checkpoint.json`` it extends (version 3: the token the document names; version 2: the
blake2b digest of the document's bytes). A journal bound to another document is stale
and ignored only when the document names it as the journal it folded (version 3; a
version-2 document named none, so any other journal was stale); else the thread is
``CHECKPOINT_CORRUPT`` and left as it is. Each further record is a :class:`Delta`: keep
the first ``keep`` messages, append ``messages``, and replace every other field
(``saved_at``, ``state``, ``pending``, ``turn``, ``results``, ``in_flight``,
``outcome_unknown``, ``decisions``). Records are read as strictly as documents (a record
not byte for byte its delta's serialisation goes to the strict reader). Framing,
checksums and the torn-tail rule are the persistence layer's
(:mod:`framework_agents._persist._journal`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._persist import (
    JOURNAL_FORMAT_VERSION,
    JournalCorruptError,
    append_record,
    atomic_publish,
    bound,
    frame,
    header_payload,
    mark_landed,
    overlong_int,
    parse_header,
    read_bounded,
    scan,
    strict_loads,
)
from ..errors import CheckpointCorruptError
from ..messages import Message, ToolCall
from ._file_format import OVERLAY_FIELDS
from .model import SavedAt, ThreadCheckpoint

__all__ = [
    "OVERLAY",
    "Delta",
    "JournalView",
    "append_delta",
    "apply_deltas",
    "read_journal",
]

#: Fields a delta replaces (everything of a checkpoint but its history): those of a
#: progress file, and those added since.
OVERLAY = (
    *OVERLAY_FIELDS,
    "interrupt_id",
    "pending_turn",
    "finished",
    "app_data",
    "elicitation",
)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC


class Delta(BaseModel):
    """One journal record: what a save changed."""

    model_config = ConfigDict(extra="forbid")

    keep: int = Field(strict=True, ge=0)
    messages: list[Message]
    saved_at: SavedAt
    state: dict[str, Any]
    pending: ToolCall | None
    turn: Message | None
    results: list[Message]
    in_flight: list[ToolCall]
    outcome_unknown: bool = Field(strict=True)
    decisions: dict[str, Any]
    # Fields a record may lack (journals written before they existed): their defaults.
    interrupt_id: str | None = None
    pending_turn: Message | None = None
    finished: bool = Field(False, strict=True)
    app_data: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None


class JournalView:
    """A journal as read: its deltas, its identity and where its valid records end."""

    def __init__(
        self,
        deltas: list[Delta],
        key: tuple[int, int] | None,
        end: int,
        stamp: tuple[int, int, int] | None = None,
        token: str | None = None,
        version: int = JOURNAL_FORMAT_VERSION,
        count: int = 0,
    ) -> None:
        self.deltas = deltas
        self.count = count  # the records after its header (what a sealed record binds)
        self.key = key
        self.end = end
        self.stamp = stamp  # (size, mtime_ns, ctime_ns) when last read or written
        self.token = token  # the token its header names (None: no journal, or unread)
        self.version = version  # its framing


def _corrupt(path: Path, reason: str) -> CheckpointCorruptError:
    return CheckpointCorruptError(f"checkpoint journal {str(path)!r} is unreadable ({reason})")


def read_journal(
    path: Path,
    token: str,
    folded: str | None,
    *,
    max_bytes: int,
    max_items: int,
    opener: Callable[[bytes, int], bytes] | None = None,
) -> JournalView:
    """The deltas of the journal at ``path`` bound to the document ``token``.

    ``folded``: the token of the journal the document folded (``None``: a version-2
    document, which named none). A missing or stale journal has no deltas (``key`` is
    ``None`` when missing). Raises ``CHECKPOINT_CORRUPT`` for a symlink or odd file, a
    damaged record (a complete one, or one before the tail), a journal bound to neither
    the document nor the journal it folded, a newer journal version, more than
    ``max_items`` messages and tool calls, or a record that is not a delta.
    ``opener(payload, index)``: a record's plain bytes (sealed records, ``cipher=``).
    """
    found_bytes = _read_bytes(path, max_bytes)
    if found_bytes is None:
        return JournalView([], None, 0)
    data, st = found_bytes
    key = (st.st_dev, st.st_ino)
    try:
        found = scan(data)
        if not found.payloads:  # empty: nothing was ever acknowledged in it
            return JournalView([], key, -1, _stamp(st))
        header = parse_header(found.payloads[0])
        if not bound(header, token, folded):
            # stale: replaced by the next append
            return JournalView([], key, -1, _stamp(st), header, found.version)
    except JournalCorruptError as exc:
        raise _corrupt(path, str(exc)) from None
    items = data.count(b'"id":')
    if items > max_items:
        raise _corrupt(
            path,
            f"{items} messages and tool calls, more than the bound of {max_items} "
            "(FileCheckpointer(max_items=...))",
        )
    deltas = []
    for index, payload in enumerate(found.payloads[1:]):
        if opener is not None:
            payload = opener(payload, index)
        overlong = overlong_int(payload)
        if overlong is not None:
            raise _corrupt(path, f"a record holds {overlong}")
        deltas.append(_delta(path, payload))
    return JournalView(deltas, key, found.end, _stamp(st), header, found.version, count=len(deltas))


def _read_bytes(path: Path, max_bytes: int) -> tuple[bytes, os.stat_result] | None:
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            raise _corrupt(path, "not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _corrupt(path, "not a regular file")
        if st.st_size > max_bytes:
            raise _corrupt(path, f"{st.st_size} bytes, more than the bound of {max_bytes}")
        return read_bounded(fd, st.st_size, max_bytes, path), st
    finally:
        os.close(fd)


def _delta(path: Path, payload: bytes) -> Delta:
    """The delta of a record, read strictly.

    A record that is byte for byte the serialisation of the delta it parses to (every
    record this checkpointer wrote) cannot hold what the strict reader refuses (a
    duplicate key, NaN, an infinite or out-of-range number each serialise otherwise);
    anything else is read by the strict reader, which names the problem.
    """
    try:
        delta = Delta.model_validate_json(payload)
        if delta.__pydantic_serializer__.to_json(delta) == payload:
            return delta
    except (ValidationError, ValueError, RecursionError):
        pass
    try:
        doc = strict_loads(payload)
    except RecursionError:
        raise _corrupt(path, "a record is nested too deeply") from None
    except ValueError as exc:
        raise _corrupt(path, f"a record is not strict JSON: {exc}") from None
    try:
        return Delta.model_validate(doc)
    except ValidationError as exc:
        raise _corrupt(path, f"a record is not a delta: {exc.errors()[0]['msg']}") from None


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def apply_deltas(checkpoint: ThreadCheckpoint, deltas: list[Delta], path: Path) -> ThreadCheckpoint:
    """``checkpoint`` with ``deltas`` applied in order (validated once, at the end)."""
    if not deltas:
        return checkpoint
    messages = list(checkpoint.messages)
    for delta in deltas:
        if delta.keep > len(messages):
            raise _corrupt(path, f"a delta keeps {delta.keep} of {len(messages)} messages")
        del messages[delta.keep :]
        messages.extend(delta.messages)
    last = deltas[-1]
    fields: dict[str, Any] = {"version": checkpoint.version, "thread_id": checkpoint.thread_id}
    fields["messages"] = messages
    fields.update({name: getattr(last, name) for name in OVERLAY})
    try:
        return ThreadCheckpoint.model_validate(fields)
    except ValidationError as exc:
        raise _corrupt(
            path, f"the deltas make no valid checkpoint: {exc.errors()[0]['msg']}"
        ) from None


def append_delta(path: Path, token: str, view: JournalView, payload: bytes) -> JournalView:
    """Append one delta record (creating the journal, or replacing a stale one, first)."""
    if view.key is None or view.end < 0:
        record = frame(payload)
        head = frame(header_payload(token))
        atomic_publish(path, [head, record])
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            raise mark_landed(exc) from None
        key = (st.st_dev, st.st_ino)
        return JournalView([], key, len(head) + len(record), _stamp(st), token, count=1)
    record = frame(payload, view.version)
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != view.key:
            raise _corrupt(path, "it was replaced while the write lock was held")
        append_record(fd, view.end, record)
        try:
            after = os.fstat(fd)
        except OSError as exc:
            raise mark_landed(exc) from None
    finally:
        os.close(fd)
    return JournalView(
        [],
        view.key,
        view.end + len(record),
        _stamp(after),
        view.token,
        view.version,
        count=view.count + 1,
    )
