"""The journal beside ``checkpoint.json``: one delta record per save (internal).

``checkpoint.journal`` starts with a header record whose token is the blake2b digest of
the ``checkpoint.json`` it extends (so a journal left beside a newer document is stale
and ignored; digests survive copying a directory, inode numbers would not). Each further
record is a :class:`Delta`: keep the first ``keep`` messages, append ``messages``, and
replace every other field (``saved_at``, ``state``, ``pending``, ``turn``, ``results``,
``in_flight``, ``outcome_unknown``, ``decisions``). Framing, checksums and the torn-tail
rule are the persistence layer's (:mod:`framework_agents._persist._journal`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._persist import (
    JournalCorruptError,
    append_record,
    atomic_publish,
    frame,
    header_payload,
    mark_landed,
    overlong_int,
    parse_header,
    read_bounded,
    scan,
)
from ..errors import CheckpointCorruptError
from ..messages import Message, ToolCall
from .model import SavedAt, ThreadCheckpoint

__all__ = ["OVERLAY", "Delta", "JournalView", "append_delta", "apply_deltas", "read_journal"]

#: Fields a delta replaces (everything of a checkpoint but its history).
OVERLAY = (
    "saved_at",
    "state",
    "pending",
    "turn",
    "results",
    "in_flight",
    "outcome_unknown",
    "decisions",
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
    ) -> None:
        self.deltas = deltas
        self.key = key
        self.end = end
        self.stamp = stamp  # (size, mtime_ns, ctime_ns) when last read or written


def _corrupt(path: Path, reason: str) -> CheckpointCorruptError:
    return CheckpointCorruptError(f"checkpoint journal {str(path)!r} is unreadable ({reason})")


def read_journal(path: Path, digest: str, *, max_bytes: int) -> JournalView:
    """The deltas of the journal at ``path`` bound to the document ``digest``.

    A missing or stale journal has no deltas (``key`` is ``None`` when missing). Raises
    ``CHECKPOINT_CORRUPT`` for a symlink or odd file, a damaged record before the tail, a
    newer journal version or a record that is not a delta.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return JournalView([], None, 0)
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
        data = read_bounded(fd, st.st_size, max_bytes, path)
    finally:
        os.close(fd)
    key = (st.st_dev, st.st_ino)
    try:
        found = scan(data)
        if not found.payloads or parse_header(found.payloads[0]) != digest:
            return JournalView([], key, -1, _stamp(st))  # stale: replaced by the next append
    except JournalCorruptError as exc:
        raise _corrupt(path, str(exc)) from None
    deltas = []
    for payload in found.payloads[1:]:
        overlong = overlong_int(payload)
        if overlong is not None:
            raise _corrupt(path, f"a record holds {overlong}")
        try:
            deltas.append(Delta.model_validate_json(payload))
        except ValidationError as exc:
            raise _corrupt(path, f"a record is not a delta: {exc.errors()[0]['msg']}") from None
    return JournalView(deltas, key, found.end, _stamp(st))


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


def append_delta(path: Path, digest: str, view: JournalView, payload: bytes) -> JournalView:
    """Append one delta record (creating the journal, or replacing a stale one, first)."""
    record = frame(payload)
    if view.key is None or view.end < 0:
        head = frame(header_payload(digest))
        atomic_publish(path, [head, record])
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            raise mark_landed(exc) from None
        return JournalView([], (st.st_dev, st.st_ino), len(head) + len(record), _stamp(st))
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
    return JournalView([], view.key, view.end + len(record), _stamp(after))
