"""What a swarm returns and streams: :class:`Handoff`, :class:`SwarmResult` and the events.

A swarm stream wraps every event of a member's run in a :class:`MemberEvent` (so each
event says which member produced it) and adds its own: ``swarm_started`` first, a
``handoff`` between two members, and one terminal event, ``swarm_finished`` (completed or
stopped by a limit), ``swarm_interrupt`` (an approval inside a member) or ``swarm_error``
(the error is raised after it). The AG-UI mapping is in ``docs/swarm.md``. Every event
has ``to_dict()`` and ``to_json()`` (:class:`~framework_agents.agent.events.StreamEvent`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..agent.events import AgentEvent, ErrorEvent, StreamEvent, json_value
from ..hitl import HitlInterrupt
from ..messages import Message

__all__ = [
    "Handoff",
    "HandoffEvent",
    "MemberEvent",
    "SwarmErrorEvent",
    "SwarmEvent",
    "SwarmFinishedEvent",
    "SwarmInterruptEvent",
    "SwarmResult",
    "SwarmStartedEvent",
    "SwarmStatus",
    "SwarmStopReason",
]

SwarmStatus = Literal["completed", "failed"]

#: Why a swarm stopped: the last member's own stop reason when it completed, else a limit.
SwarmStopReason = str


@dataclass(frozen=True, slots=True)
class Handoff:
    """One member passing the conversation to another, with the message it gave it."""

    from_agent: str
    to_agent: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form stored in the thread's swarm state."""
        return {"from_agent": self.from_agent, "to_agent": self.to_agent, "message": self.message}


@dataclass(frozen=True, slots=True)
class SwarmResult:
    """The outcome of a swarm run (or resume) that was not interrupted.

    ``status`` is ``"completed"`` when a member gave a final answer, else ``"failed"``
    with ``stop_reason`` naming the limit: ``"max_handoffs"``, ``"max_iterations"``,
    ``"execution_timeout"``, ``"node_timeout"`` or ``"repetition"``. ``agent`` is the
    member that answered last, ``handoffs`` the handoffs this run followed, ``messages``
    the shared conversation as the thread now holds it and ``context`` the shared context
    (JSON, one object per member).
    """

    text: str
    status: SwarmStatus
    agent: str
    handoffs: list[Handoff]
    messages: list[Message]
    stop_reason: SwarmStopReason
    context: dict[str, dict[str, Any]] = field(default_factory=dict)
    iterations: int = 0
    thread_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmStartedEvent(StreamEvent):
    """A swarm run began; ``agent`` is the member that takes the first turn."""

    run_id: str
    swarm_id: str
    agent: str
    thread_id: str | None = None
    prompt: Message | None = None
    type: Literal["swarm_started"] = field(default="swarm_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberEvent(StreamEvent):
    """An event of one member's run, with the member (``agent``) that produced it.

    A member's run opens with a ``run_started`` and ends with ``run_finished``,
    ``interrupt`` or ``run_error``, like a stand-alone agent's stream.
    """

    agent: str
    event: AgentEvent
    type: Literal["member_event"] = field(default="member_event", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffEvent(StreamEvent):
    """A member handed the conversation to another (after the handing member's turn)."""

    handoff: Handoff
    context: dict[str, Any] = field(default_factory=dict)
    type: Literal["handoff"] = field(default="handoff", init=False)

    def to_dict(self) -> dict[str, Any]:
        """``{"type", "from", "to", "message", "context"}`` (the shape the servers send)."""
        handoff = self.handoff
        return {
            "type": self.type,
            "from": handoff.from_agent,
            "to": handoff.to_agent,
            "message": handoff.message,
            "context": json_value(self.context),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmFinishedEvent(StreamEvent):
    """The swarm run ended: completed, or stopped by a limit (``result.status``)."""

    run_id: str
    result: SwarmResult
    type: Literal["swarm_finished"] = field(default="swarm_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmInterruptEvent(StreamEvent):
    """A member needs a human decision; ``interrupt.agent`` names it (stream ends here)."""

    run_id: str
    agent: str
    interrupt: HitlInterrupt
    type: Literal["swarm_interrupt"] = field(default="swarm_interrupt", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmErrorEvent(ErrorEvent):
    """The swarm run failed in ``agent``; the error is raised after this event."""

    run_id: str
    agent: str
    error: BaseException
    type: Literal["swarm_error"] = field(default="swarm_error", init=False)


#: What ``swarm.stream()`` yields: one of the event classes above, told apart by ``event.type``.
SwarmEvent = (
    SwarmStartedEvent
    | MemberEvent
    | HandoffEvent
    | SwarmFinishedEvent
    | SwarmInterruptEvent
    | SwarmErrorEvent
)
