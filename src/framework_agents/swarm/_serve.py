"""A swarm's stream in the shape of an agent's, for servers that speak agent events.

A server that maps :class:`~framework_agents.agent.events.AgentEvent` onto AG-UI or A2A
serves a swarm by driving ``swarm_agent_events(swarm.stream(...))``: one ``run_started`` for the
swarm run, the members' message, reasoning and tool events as they come, and one terminal
``run_finished`` (its result a :class:`RunResult` made from the :class:`SwarmResult`),
``interrupt`` or ``run_error``. The member a passed-through event came from, and the
handoffs, are lost in that shape: a server that shows them (AG-UI steps, a ``CUSTOM``
handoff event) reads the swarm's own events instead (``docs/swarm.md``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..agent.events import (
    AgentEvent,
    InterruptEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ..agent.result import RunResult
from ..messages import Message
from ..tools import Tool
from ._types import (
    HandoffEvent,
    MemberEvent,
    SwarmErrorEvent,
    SwarmEvent,
    SwarmFinishedEvent,
    SwarmInterruptEvent,
    SwarmResult,
    SwarmStartedEvent,
)

if TYPE_CHECKING:
    from .swarm import Swarm

__all__ = ["SwarmAgentView", "swarm_agent_events", "swarm_run_result"]

#: A member's own bracket events: the swarm's run has one bracket for all members.
_BRACKETS = (RunStartedEvent, RunFinishedEvent, InterruptEvent, RunErrorEvent)


def swarm_run_result(result: SwarmResult, run_id: str = "") -> RunResult:
    """``result`` as an agent's :class:`RunResult` (``stop_reason`` names a limit if any)."""
    return RunResult(
        text=result.text,
        messages=list(result.messages),
        stop_reason=result.stop_reason,
        run_id=run_id,
        turns=result.iterations,
    )


#: What a served swarm streams: agent events, plus each member's run brackets (its steps,
#: as ``MemberEvent``) and the handoffs between members.
ServedEvent = AgentEvent | MemberEvent | HandoffEvent


async def swarm_agent_events(events: AsyncIterator[SwarmEvent]) -> AsyncIterator[ServedEvent]:
    """The swarm events ``events`` as agent events (module docstring); errors propagate."""
    run_id = ""
    try:
        async for event in events:
            if isinstance(event, SwarmStartedEvent):
                run_id = event.run_id
                yield RunStartedEvent(
                    run_id=run_id,
                    agent_id=event.agent,
                    thread_id=event.thread_id,
                    prompt=event.prompt,
                )
            elif isinstance(event, MemberEvent):
                # A member's own run brackets become the member's steps (kept wrapped, so
                # they are never taken for the swarm run's start or end).
                yield event if isinstance(event.event, _BRACKETS) else event.event
            elif isinstance(event, HandoffEvent):
                yield event
            elif isinstance(event, SwarmFinishedEvent):
                yield RunFinishedEvent(run_id=run_id, result=swarm_run_result(event.result, run_id))
            elif isinstance(event, SwarmInterruptEvent):
                yield InterruptEvent(run_id=run_id, interrupt=event.interrupt)
            elif isinstance(event, SwarmErrorEvent):
                yield RunErrorEvent(run_id=run_id, error=event.error)
    finally:
        aclose = getattr(events, "aclose", None)
        if callable(aclose):
            await aclose()


class SwarmAgentView:
    """A swarm behind an agent's surface: ``run``/``stream``/``resume`` with agent events.

    For servers and UIs written against :class:`~framework_agents.Agent`: ``stream``
    yields :func:`swarm_agent_events`, ``run`` and ``resume`` return a :class:`RunResult`
    (:func:`swarm_run_result`) and raise the member's :class:`HitlInterrupt` (its
    ``agent`` names the member). ``tools`` are the members' own tools (first of each
    name), ``agents`` the members, ``agent_id`` the swarm's id. ``swarm.as_agent()``.
    """

    def __init__(self, swarm: Swarm) -> None:
        self.swarm = swarm
        self.agent_id: str = swarm.swarm_id
        self.agents = swarm.agents
        tools: dict[str, Tool] = {}
        for member in swarm.agents:
            for tool in member.tools:
                tools.setdefault(tool.name, tool)
        self.tools: tuple[Tool, ...] = tuple(tools.values())

    async def run(
        self,
        prompt: str | Message | None,
        *,
        checkpointer: Any = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """:meth:`Swarm.run` with an agent's result."""
        result = await self.swarm.run(
            prompt, checkpointer=checkpointer, thread_id=thread_id, decisions=decisions
        )
        return swarm_run_result(result)

    def stream(
        self,
        prompt: str | Message | None,
        *,
        checkpointer: Any = None,
        thread_id: str | None = None,
        decisions: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ServedEvent]:
        """:meth:`Swarm.stream` as agent events (the interrupt ends it, not raised)."""
        return swarm_agent_events(
            self.swarm.stream(
                prompt, checkpointer=checkpointer, thread_id=thread_id, decisions=decisions
            )
        )

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Any,
        reissue: bool = False,
    ) -> RunResult:
        """:meth:`Swarm.resume` with an agent's result."""
        result = await self.swarm.resume(
            thread_id, decisions, checkpointer=checkpointer, reissue=reissue
        )
        return swarm_run_result(result)

    def resume_stream(
        self,
        thread_id: str,
        decisions: Mapping[str, Any] | None = None,
        *,
        checkpointer: Any,
        reissue: bool = False,
    ) -> AsyncIterator[ServedEvent]:
        """:meth:`Swarm.resume_stream` as agent events (the interrupt ends it, not raised).

        With ``reissue=False`` (the default) the member runs the stored call the human
        approved, and its events (tokens included) stream as they come.
        """
        return swarm_agent_events(
            self.swarm.resume_stream(
                thread_id, decisions, checkpointer=checkpointer, reissue=reissue
            )
        )

    def __repr__(self) -> str:
        return f"SwarmAgentView({self.swarm!r})"
