"""A thread as every protocol shows it: its open approval, its line in the thread list.

:class:`Pending` is the approval (or a tool's question) a thread waits for, built by the
runner from the checkpoint; :class:`ThreadSummary` one line of the thread list, kept by
``_index`` as the JSON :func:`summary_json` makes and read back by
:func:`summary_from_json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import agent as ours
from ..checkpoint.model import ThreadCheckpoint
from ..hitl import InterruptKind, is_interrupt_id
from ..messages import Message
from ._index import state_of
from ._questions import question_of

__all__ = [
    "Pending",
    "ThreadSummary",
    "pending_kind",
    "progress_value",
    "summary_from_json",
    "summary_json",
    "title_of",
]

_TITLE_LENGTH = 80


def progress_value(event: ours.ToolProgressEvent) -> dict[str, Any]:
    """A running call's progress as every protocol shows it.

    AG-UI's ``CUSTOM`` event ``tool_progress`` has it as its ``value``; A2A's data part is
    it with ``"type": "tool_progress"``.
    """
    return {
        "toolCallId": event.call_id,
        "tool": event.tool,
        "progress": event.progress,
        "total": event.total,
        "message": event.message,
    }


@dataclass(frozen=True, slots=True)
class Pending:
    """The approval (or the tool's question) a thread waits for, as every protocol shows it.

    ``kind`` is ``"tool_call"`` for an approval and ``"elicitation"`` for a question a
    tool asked mid-call (an MCP server's elicitation): then ``message`` and ``schema`` are
    the question and the requested schema (the tool's own state stays in the checkpoint),
    and ``allowed_decisions`` are :data:`ANSWER_KINDS`.
    """

    interrupt_id: str
    tool_call_id: str
    tool: str
    args: dict[str, Any]
    key: str
    allowed_decisions: tuple[str, ...]
    outcome_unknown: bool = False
    #: The key the agent's decisions use for this interrupt.
    decision_key: str = ""
    kind: InterruptKind = "tool_call"
    message: str | None = None
    schema: dict[str, Any] | None = None

    @property
    def asks(self) -> bool:
        """Whether this is a tool's question (``kind == "elicitation"``), not an approval."""
        return self.kind == "elicitation"

    def names(self) -> set[str]:
        """Every key a client may use to name this approval.

        A call of unknown outcome only by its ``interrupt_id``: a decision given before it
        ran (a replayed request, a double click) names the call or the tool, and must not
        run it again.
        """
        if self.outcome_unknown:
            return {self.interrupt_id}
        return {self.interrupt_id, self.tool_call_id, self.key, self.tool}

    def replaced(self, key: str) -> bool:
        """Whether ``key`` names this call of unknown outcome as it was before it ran.

        Its call, its tool, or an interrupt id (the approval that let it run, replaced by
        this interrupt when its process died in it): a decision sent again after its
        answer was lost. Such a decision runs nothing; it is answered with this interrupt.
        """
        if not self.outcome_unknown or key == self.interrupt_id:
            return False
        return key in (self.tool_call_id, self.key, self.tool) or is_interrupt_id(key)

    def to_json(self) -> dict[str, Any]:
        """The JSON API shape (``docs/server.md``)."""
        return {
            "interrupt_id": self.interrupt_id,
            "kind": self.kind,
            "tool_call_id": self.tool_call_id,
            "tool": self.tool,
            "args": self.args,
            "key": self.key,
            "allowed_decisions": list(self.allowed_decisions),
            "outcome_unknown": self.outcome_unknown,
            "message": self.message,
            "schema": self.schema,
        }


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """One line of the thread list."""

    thread_id: str
    saved_at: datetime
    title: str
    message_count: int
    pending: bool
    #: ``running``, ``waiting`` (an approval is open) or ``finished``.
    state: str = "finished"
    #: What a waiting thread waits for: ``tool_call`` (an approval) or ``elicitation`` (a
    #: tool's question); ``None`` when nothing is pending (or a line written before it).
    pending_kind: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON API shape."""
        return {
            "thread_id": self.thread_id,
            "saved_at": self.saved_at.isoformat(),
            "title": self.title,
            "message_count": self.message_count,
            "pending": self.pending,
            "pending_kind": self.pending_kind,
            "state": self.state,
        }


def title_of(messages: list[Message]) -> str:
    """The first user message's text, cut to 80 characters."""
    for message in messages:
        if message.role == "user":
            text = " ".join(message.text.split())
            return text if len(text) <= _TITLE_LENGTH else text[: _TITLE_LENGTH - 1] + "\u2026"
    return ""


def summary_json(checkpoint: ThreadCheckpoint) -> dict[str, Any]:
    """The thread list's line of a thread (``_index`` keeps it)."""
    return {
        "saved_at": checkpoint.saved_at.isoformat(),
        "title": title_of(checkpoint.messages),
        "message_count": len(checkpoint.messages),
        "pending": checkpoint.pending is not None,
        "pending_kind": pending_kind(checkpoint),
    }


def pending_kind(checkpoint: ThreadCheckpoint) -> str | None:
    """What the thread waits for: ``tool_call`` (an approval), ``elicitation`` (a question)."""
    if checkpoint.pending is None:
        return None
    return "elicitation" if question_of(checkpoint) else "tool_call"


def _kind(value: Any) -> str | None:
    return value if value in ("tool_call", "elicitation") else None


def summary_from_json(row: dict[str, Any]) -> ThreadSummary | None:
    """A stored line back as a summary (``None`` for a damaged one: it is skipped)."""
    try:
        return ThreadSummary(
            str(row["thread_id"]),
            datetime.fromisoformat(str(row["saved_at"])),
            str(row["title"]),
            int(row["message_count"]),
            bool(row["pending"]),
            state_of(row),
            # only with a pending call: a running line keeps its last waiting one's key
            _kind(row.get("pending_kind")) if row["pending"] else None,
        )
    except (KeyError, TypeError, ValueError):
        return None
