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

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, cast

from ..agent._base import aclose_events
from ..agent.events import (
    AgentEvent,
    InterruptEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ..agent.result import RunResult
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
from .swarm import Swarm

__all__ = ["SwarmAgentView", "swarm_agent_events", "swarm_run_result"]

P = ParamSpec("P")

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
        await aclose_events(events)


def _agent_result(
    method: Callable[Concatenate[Swarm, P], Awaitable[SwarmResult]],
) -> Callable[Concatenate[SwarmAgentView, P], Coroutine[Any, Any, RunResult]]:
    """The view's ``method``: the swarm's, its result as a :class:`RunResult`.

    A coroutine function, as the agent's ``run`` is (``asyncio.run(view.run(...))``).
    """
    name = method.__name__

    async def call(view: SwarmAgentView, /, *args: P.args, **kwargs: P.kwargs) -> RunResult:
        # The swarm's own (a subclass's override), called by name; ``method`` gives the
        # signature and the docs.
        bound: Callable[P, Awaitable[SwarmResult]] = getattr(view.swarm, name)
        return swarm_run_result(await bound(*args, **kwargs))

    _named(call, method, "RunResult", "with an agent's result")
    return call


def _agent_stream(
    method: Callable[Concatenate[Swarm, P], AsyncIterator[SwarmEvent]],
) -> Callable[Concatenate[SwarmAgentView, P], AsyncIterator[ServedEvent]]:
    """The view's ``method``: the swarm's stream as agent events (:func:`swarm_agent_events`)."""
    name = method.__name__

    def call(
        view: SwarmAgentView, /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[ServedEvent]:
        bound: Callable[P, AsyncIterator[SwarmEvent]] = getattr(view.swarm, name)
        return swarm_agent_events(bound(*args, **kwargs))

    _named(call, method, "AsyncIterator[ServedEvent]", "as agent events (the interrupt ends it)")
    return call


def _named(
    call: Callable[..., object], method: Callable[..., object], returns: str, how: str
) -> None:
    """Name and document ``call`` as the view's ``method``, with the swarm method's parameters.

    ``inspect.signature`` reads ``__signature__``: a server that asks whether ``resume``
    takes ``reissue=`` sees the swarm's parameters (not ``*args, **kwargs``), and the
    view's return type.
    """
    call.__name__ = method.__name__
    call.__qualname__ = f"SwarmAgentView.{method.__name__}"
    call.__doc__ = f":meth:`Swarm.{method.__name__}` {how}."
    signature = inspect.signature(method).replace(return_annotation=returns)
    cast(Any, call).__signature__ = signature


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

    # Each method is the swarm's own (its arguments, checks and docs), answered in the
    # agent's shape: one signature to keep, and nothing the swarm takes is lost here.
    run = _agent_result(Swarm.run)
    stream = _agent_stream(Swarm.stream)
    resume = _agent_result(Swarm.resume)
    resume_stream = _agent_stream(Swarm.resume_stream)

    def __repr__(self) -> str:
        return f"SwarmAgentView({self.swarm!r})"
