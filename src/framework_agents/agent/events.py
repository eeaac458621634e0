"""Typed events of a run, as :meth:`Agent.stream` yields them.

Each event is a frozen dataclass with a ``type`` literal. The set is shaped so a server
maps it one to one onto AG-UI and A2A (the table is in ``docs/agent.md``):

* ``run_started`` ... ``run_finished`` / ``run_error`` bracket every run; an interrupted
  run ends with ``interrupt`` instead of ``run_finished``.
* Every model call opens one assistant message: ``message_started``, then
  ``reasoning_delta`` / ``text_delta`` pieces, then ``message_completed`` with the whole
  message. All carry the same ``message_id``, which is also the id of the stored message.
* ``tool_call`` announces each call of that message (arguments complete), and
  ``tool_result`` delivers each result as soon as it exists (concurrent calls may finish
  in any order; the stored history keeps call order).
* ``tool_progress`` reports how far a running call has got, as often as the tool says so
  (``ToolContext.report_progress``; an MCP server's progress notifications), between
  that call's ``tool_call`` and its ``tool_result``; it is never stored.

Every event (the swarm's too) is a :class:`StreamEvent`: ``event.to_dict()`` is its JSON
form (a dict of JSON values, ``"type"`` first, then its fields), ``event.to_json()`` that
dict as a JSON string, the way ``Message.to_json()`` is a string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic_core import to_jsonable_python

from ..errors import AgentError
from ..hitl import HitlInterrupt
from ..messages import Message, ToolCall

if TYPE_CHECKING:
    from .result import RunResult

__all__ = [
    "AgentEvent",
    "ErrorEvent",
    "InterruptEvent",
    "MessageCompletedEvent",
    "MessageStartedEvent",
    "ReasoningDeltaEvent",
    "RunErrorEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StreamEvent",
    "TextDeltaEvent",
    "ToolCallEvent",
    "ToolProgressEvent",
    "ToolResultEvent",
    "error_code",
    "json_value",
]


def error_code(error: BaseException) -> str:
    """The error's ``code`` (``"INTERNAL"`` for errors that are not AgentErrors)."""
    return error.code if isinstance(error, AgentError) else "INTERNAL"


def json_value(value: object) -> Any:
    """``value`` as JSON values (what :meth:`StreamEvent.to_dict` puts in).

    Events and interrupts by their own JSON form, an error as ``{"code", "message"}``,
    anything else (messages, results, JSON) by pydantic's rules.
    """
    if isinstance(value, StreamEvent):
        return value.to_dict()
    if isinstance(value, HitlInterrupt):
        return value.to_dict()
    if isinstance(value, BaseException):
        message = value.message if isinstance(value, AgentError) else str(value)
        return {"code": error_code(value), "message": message}
    return to_jsonable_python(value)


class StreamEvent:
    """What every stream event shares: its JSON form.

    ``to_dict()`` is ``{"type": ..., <each field>: <its JSON>}`` (a message as its stored
    JSON, a result as its fields, an error as ``{"code", "message"}``); an event whose JSON
    adds or renames something says so in its own ``to_dict``. Nothing in it is
    shortened or hidden: a server that must not show an error's text to its clients
    (an internal error) or the whole history maps it itself.
    """

    __slots__ = ()
    type: str

    def to_dict(self) -> dict[str, Any]:
        """This event as a dict of JSON values (``"type"`` first)."""
        data: dict[str, Any] = {"type": self.type}
        for f in fields(cast(Any, self)):
            if f.name != "type":
                data[f.name] = json_value(getattr(self, f.name))
        return data

    def to_json(self) -> str:
        """This event as a JSON string (:meth:`to_dict`, non-ASCII kept as is)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)


class ErrorEvent(StreamEvent):
    """What the failing events share: the ``error`` they carry, its code and message."""

    __slots__ = ()
    error: BaseException

    @property
    def code(self) -> str:
        """The error's ``code`` (``"INTERNAL"`` for errors that are not AgentErrors)."""
        return error_code(self.error)

    @property
    def message(self) -> str:
        """A human-readable description of the error."""
        return str(self.error)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStartedEvent(StreamEvent):
    """A run began (AG-UI ``RUN_STARTED``; A2A task status ``working``)."""

    run_id: str
    agent_id: str
    thread_id: str | None = None
    prompt: Message | None = None
    type: Literal["run_started"] = field(default="run_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStartedEvent(StreamEvent):
    """The model began answering; ``message_id`` names the assistant message."""

    message_id: str
    turn: int
    role: Literal["assistant"] = "assistant"
    type: Literal["message_started"] = field(default="message_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaEvent(StreamEvent):
    """A piece of answer text (AG-UI ``TEXT_MESSAGE_CONTENT``)."""

    message_id: str
    delta: str
    type: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDeltaEvent(StreamEvent):
    """A piece of the model's thinking (AG-UI ``THINKING_TEXT_MESSAGE_CONTENT``)."""

    message_id: str
    delta: str
    type: Literal["reasoning_delta"] = field(default="reasoning_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCompletedEvent(StreamEvent):
    """The whole assistant message as the model returned it (after middleware)."""

    message: Message
    turn: int
    type: Literal["message_completed"] = field(default="message_completed", init=False)

    @property
    def message_id(self) -> str:
        """The id shared with this message's deltas."""
        return self.message.id


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(StreamEvent):
    """The model called a tool (AG-UI ``TOOL_CALL_START``/``ARGS``/``END``)."""

    call: ToolCall
    message_id: str
    requires_approval: bool = False
    type: Literal["tool_call"] = field(default="tool_call", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent(StreamEvent):
    """A call's result message (AG-UI ``TOOL_CALL_RESULT``)."""

    call_id: str
    tool: str
    message: Message
    type: Literal["tool_result"] = field(default="tool_result", init=False)

    @property
    def is_error(self) -> bool:
        """Whether the call failed (bad arguments, unknown tool, or the tool raised)."""
        return self.message.kind == "tool_error"

    def to_dict(self) -> dict[str, Any]:
        """The fields' JSON, and ``is_error``."""
        return {**StreamEvent.to_dict(self), "is_error": self.is_error}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgressEvent(StreamEvent):
    """A running call reported progress (an MCP server's ``notifications/progress``).

    ``progress`` only grows within one call; ``total`` is ``None`` when the tool does not
    know it; ``message`` is the tool's own words, if any. Not stored in the history.
    """

    call_id: str
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None
    type: Literal["tool_progress"] = field(default="tool_progress", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptEvent(StreamEvent):
    """The run stopped for a human decision (A2A status ``input-required``)."""

    run_id: str
    interrupt: HitlInterrupt
    type: Literal["interrupt"] = field(default="interrupt", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinishedEvent(StreamEvent):
    """The run ended normally (AG-UI ``RUN_FINISHED``; A2A status ``completed``)."""

    run_id: str
    result: RunResult
    type: Literal["run_finished"] = field(default="run_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunErrorEvent(ErrorEvent):
    """The run failed (AG-UI ``RUN_ERROR``; A2A status ``failed``); the error is re-raised."""

    run_id: str
    error: BaseException
    type: Literal["run_error"] = field(default="run_error", init=False)


#: What ``agent.stream()`` yields: one of the event classes above, told apart by ``event.type``.
AgentEvent = (
    RunStartedEvent
    | MessageStartedEvent
    | TextDeltaEvent
    | ReasoningDeltaEvent
    | MessageCompletedEvent
    | ToolCallEvent
    | ToolProgressEvent
    | ToolResultEvent
    | InterruptEvent
    | RunFinishedEvent
    | RunErrorEvent
)
