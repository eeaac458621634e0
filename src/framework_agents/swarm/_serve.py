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

from collections.abc import AsyncIterator

from ..agent.events import (
    AgentEvent,
    InterruptEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ..agent.result import RunResult
from ._types import (
    MemberEvent,
    SwarmErrorEvent,
    SwarmEvent,
    SwarmFinishedEvent,
    SwarmInterruptEvent,
    SwarmResult,
    SwarmStartedEvent,
)

__all__ = ["swarm_agent_events", "swarm_run_result"]

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


async def swarm_agent_events(events: AsyncIterator[SwarmEvent]) -> AsyncIterator[AgentEvent]:
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
                if not isinstance(event.event, _BRACKETS):
                    yield event.event
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
