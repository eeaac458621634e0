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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..errors import AgentError
from ..messages import Message, ToolCall

if TYPE_CHECKING:
    from ..hitl import HitlInterrupt
    from .result import RunResult

__all__ = [
    "AgentEvent",
    "InterruptEvent",
    "MessageCompletedEvent",
    "MessageStartedEvent",
    "ReasoningDeltaEvent",
    "RunErrorEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "TextDeltaEvent",
    "ToolCallEvent",
    "ToolResultEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStartedEvent:
    """A run began (AG-UI ``RUN_STARTED``; A2A task status ``working``)."""

    run_id: str
    agent_id: str
    thread_id: str | None = None
    prompt: Message | None = None
    type: Literal["run_started"] = field(default="run_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStartedEvent:
    """The model began answering; ``message_id`` names the assistant message."""

    message_id: str
    turn: int
    role: Literal["assistant"] = "assistant"
    type: Literal["message_started"] = field(default="message_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDeltaEvent:
    """A piece of answer text (AG-UI ``TEXT_MESSAGE_CONTENT``)."""

    message_id: str
    delta: str
    type: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDeltaEvent:
    """A piece of the model's thinking (AG-UI ``THINKING_TEXT_MESSAGE_CONTENT``)."""

    message_id: str
    delta: str
    type: Literal["reasoning_delta"] = field(default="reasoning_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCompletedEvent:
    """The whole assistant message as the model returned it (after middleware)."""

    message: Message
    turn: int
    type: Literal["message_completed"] = field(default="message_completed", init=False)

    @property
    def message_id(self) -> str:
        """The id shared with this message's deltas."""
        return self.message.id


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent:
    """The model called a tool (AG-UI ``TOOL_CALL_START``/``ARGS``/``END``)."""

    call: ToolCall
    message_id: str
    requires_approval: bool = False
    type: Literal["tool_call"] = field(default="tool_call", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent:
    """A call's result message (AG-UI ``TOOL_CALL_RESULT``)."""

    call_id: str
    tool: str
    message: Message
    type: Literal["tool_result"] = field(default="tool_result", init=False)

    @property
    def is_error(self) -> bool:
        """Whether the call failed (bad arguments, unknown tool, or the tool raised)."""
        return self.message.kind == "tool_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptEvent:
    """The run stopped for a human decision (A2A status ``input-required``)."""

    run_id: str
    interrupt: HitlInterrupt
    type: Literal["interrupt"] = field(default="interrupt", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinishedEvent:
    """The run ended normally (AG-UI ``RUN_FINISHED``; A2A status ``completed``)."""

    run_id: str
    result: RunResult
    type: Literal["run_finished"] = field(default="run_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunErrorEvent:
    """The run failed (AG-UI ``RUN_ERROR``; A2A status ``failed``); the error is re-raised."""

    run_id: str
    error: BaseException
    type: Literal["run_error"] = field(default="run_error", init=False)

    @property
    def code(self) -> str:
        """The error's ``code`` (``"INTERNAL"`` for errors that are not AgentErrors)."""
        return self.error.code if isinstance(self.error, AgentError) else "INTERNAL"

    @property
    def message(self) -> str:
        """A human-readable description of the error."""
        return str(self.error)


AgentEvent = (
    RunStartedEvent
    | MessageStartedEvent
    | TextDeltaEvent
    | ReasoningDeltaEvent
    | MessageCompletedEvent
    | ToolCallEvent
    | ToolResultEvent
    | InterruptEvent
    | RunFinishedEvent
    | RunErrorEvent
)
