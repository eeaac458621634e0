"""``Swarm.stream``: every member event names its member, a handoff event sits between two
members' runs, and exactly one terminal event ends the stream."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from pathlib import Path
from typing import Any

import pytest
from swarm_scenario import handoff, refund_swarm

from framework_agents import (
    Agent,
    FunctionModel,
    HitlInterrupt,
    InMemoryCheckpointer,
    RunResult,
    ScriptedModel,
    Swarm,
)
from framework_agents.agent import (
    InterruptEvent,
    MessageCompletedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from framework_agents.server._runner import supports_reissue
from framework_agents.swarm import (
    HandoffEvent,
    MemberEvent,
    SwarmErrorEvent,
    SwarmFinishedEvent,
    SwarmInterruptEvent,
    SwarmStartedEvent,
    swarm_agent_events,
)


async def collect(events: Any) -> list[Any]:
    return [event async for event in events]


def two(a: Any, b: Any) -> Swarm:
    return Swarm([Agent(a, agent_id="a"), Agent(b, agent_id="b")])


def test_events_name_their_member_and_a_handoff_event_separates_the_members() -> None:
    swarm = two(ScriptedModel([handoff("b", "yours")]), ScriptedModel(["b here"]))
    events = asyncio.run(collect(swarm.stream("hi")))
    assert isinstance(events[0], SwarmStartedEvent) and events[0].agent == "a"
    assert isinstance(events[-1], SwarmFinishedEvent)
    assert events[-1].result.text == "b here"
    kinds = [
        (e.agent, e.event.type) if isinstance(e, MemberEvent) else e.type for e in events[1:-1]
    ]
    at = kinds.index("handoff")
    assert all(k[0] == "a" for k in kinds[:at]) and all(k[0] == "b" for k in kinds[at + 1 :])
    assert kinds[0] == ("a", "run_started") and kinds[at - 1] == ("a", "run_finished")
    assert kinds[at + 1] == ("b", "run_started") and kinds[-1] == ("b", "run_finished")
    handoff_event = events[1 + at]
    assert isinstance(handoff_event, HandoffEvent)
    assert (handoff_event.handoff.from_agent, handoff_event.handoff.to_agent) == ("a", "b")
    results = [
        e.event
        for e in events
        if isinstance(e, MemberEvent) and isinstance(e.event, ToolResultEvent)
    ]
    assert [r.tool for r in results] == ["handoff_to_agent"]
    completed = [
        (e.agent, e.event.message.text)
        for e in events
        if isinstance(e, MemberEvent) and isinstance(e.event, MessageCompletedEvent)
    ]
    assert completed[-1] == ("b", "b here")


def test_an_approval_ends_the_stream_with_a_swarm_interrupt_event(tmp_path: Path) -> None:
    cp = InMemoryCheckpointer()
    swarm = refund_swarm(tmp_path / "fx.txt")
    events = asyncio.run(collect(swarm.stream("refund", checkpointer=cp, thread_id="t1")))
    last = events[-1]
    assert isinstance(last, SwarmInterruptEvent)
    assert last.agent == "billing" and last.interrupt.agent == "billing"
    assert last.interrupt.tool == "refund"
    # Resuming as a stream goes on in billing, from its run_started to the final answer.
    resumed = asyncio.run(
        collect(swarm.resume_stream("t1", {"refund": "approve"}, checkpointer=cp))
    )
    members = {e.agent for e in resumed if isinstance(e, MemberEvent)}
    assert members == {"billing"}
    assert isinstance(resumed[-1], SwarmFinishedEvent)
    assert resumed[-1].result.status == "completed"


def test_a_failing_member_yields_a_swarm_error_event_then_raises() -> None:
    def broken(messages: Any, tools: Any) -> str:
        raise RuntimeError("model down")

    swarm = two(ScriptedModel([handoff("b")]), FunctionModel(broken))
    seen: list[Any] = []

    async def scenario() -> None:
        async for event in swarm.stream("hi"):
            seen.append(event)

    with pytest.raises(RuntimeError, match="model down"):
        asyncio.run(scenario())
    last = seen[-1]
    assert isinstance(last, SwarmErrorEvent) and last.agent == "b"
    assert last.code == "INTERNAL"
    assert not swarm.running


def test_closing_a_stream_early_frees_the_swarm_and_its_thread() -> None:
    cp = InMemoryCheckpointer()

    async def scenario() -> str:
        released = asyncio.Event()

        async def slow(messages: Any, tools: Any) -> str:
            await released.wait()
            return "late"

        swarm = two(FunctionModel(slow), ScriptedModel([]))
        events = swarm.stream("hi", checkpointer=cp, thread_id="t")
        async with contextlib.aclosing(events):  # type: ignore[type-var]  # an async generator
            async for event in events:
                if isinstance(event, MemberEvent) and isinstance(event.event, RunStartedEvent):
                    break
        assert not swarm.running and not swarm.member("a").running
        released.set()
        result = await swarm.run("again", checkpointer=cp, thread_id="t")
        return result.text

    assert asyncio.run(scenario()) == "late"


def test_run_finished_of_a_member_carries_its_run_result() -> None:
    swarm = two(ScriptedModel(["a alone"]), ScriptedModel([]))
    events = asyncio.run(collect(swarm.stream("hi")))
    finished = [
        e.event
        for e in events
        if isinstance(e, MemberEvent) and isinstance(e.event, RunFinishedEvent)
    ]
    assert [f.result.text for f in finished] == ["a alone"]


def test_swarm_agent_events_give_a_server_one_agent_shaped_run(tmp_path: Path) -> None:
    cp = InMemoryCheckpointer()
    swarm = refund_swarm(tmp_path / "fx.txt")

    async def scenario() -> tuple[list[Any], list[Any]]:
        first = await collect(
            swarm_agent_events(swarm.stream("refund", checkpointer=cp, thread_id="t"))
        )
        second = await collect(
            swarm_agent_events(swarm.resume_stream("t", {"refund": "approve"}, checkpointer=cp))
        )
        return first, second

    first, second = asyncio.run(scenario())
    for events in (first, second):
        assert isinstance(events[0], RunStartedEvent)
        assert sum(isinstance(e, RunStartedEvent) for e in events) == 1
        assert len({e.run_id for e in events if hasattr(e, "run_id")}) == 1
    assert isinstance(first[-1], InterruptEvent)
    assert first[-1].interrupt.agent == "billing"
    assert [e.call.name for e in first if isinstance(e, ToolCallEvent)] == [
        "handoff_to_agent",
        "refund",
    ]
    last = second[-1]
    assert isinstance(last, RunFinishedEvent) and isinstance(last.result, RunResult)
    assert last.result.text == "Refund handled: refunded order 42"
    assert last.result.stop_reason == "end_turn"


def test_the_agent_view_has_the_agent_surface_a_server_drives(tmp_path: Path) -> None:
    cp = InMemoryCheckpointer()
    view = refund_swarm(tmp_path / "fx.txt").as_agent()
    assert view.agent_id == "default" and [t.name for t in view.tools] == ["refund"]
    assert [a.agent_id for a in view.agents] == ["triage", "billing"]

    async def scenario() -> RunResult:
        events = await collect(view.stream("refund", checkpointer=cp, thread_id="t"))
        assert isinstance(events[-1], InterruptEvent)
        return await view.resume("t", {"refund": "approve"}, checkpointer=cp)

    result = asyncio.run(scenario())
    assert isinstance(result, RunResult)
    assert result.text == "Refund handled: refunded order 42"
    with pytest.raises(HitlInterrupt) as caught:  # billing refunds again: asks again
        asyncio.run(view.run("one more", checkpointer=cp, thread_id="t"))
    assert caught.value.agent == "billing"


def test_the_agent_view_takes_what_the_swarm_takes_and_says_so(tmp_path: Path) -> None:
    view = refund_swarm(tmp_path / "fx.txt").as_agent()
    swarm = view.swarm
    for name in ("run", "stream", "resume", "resume_stream"):
        mine, theirs = (
            inspect.signature(getattr(view, name)),
            inspect.signature(getattr(swarm, name)),
        )
        assert mine.parameters == theirs.parameters, name
        assert getattr(view, name).__qualname__ == f"SwarmAgentView.{name}"
    assert inspect.signature(view.resume).return_annotation == "RunResult"
    assert supports_reissue(view)  # a server runs the stored call on a swarm's resume too


def test_the_agent_view_calls_a_subclass_s_own_methods() -> None:
    called: list[str] = []

    class Logged(Swarm):
        async def run(self, *args: Any, **kwargs: Any) -> Any:
            called.append("run")
            return await super().run(*args, **kwargs)

        def stream(self, *args: Any, **kwargs: Any) -> Any:
            called.append("stream")
            return super().stream(*args, **kwargs)

    view = Logged([Agent(ScriptedModel(["hi", "hi"]), agent_id="a")]).as_agent()
    assert asyncio.run(view.run("x")).text == "hi"
    events = asyncio.run(collect(view.stream("y")))
    assert isinstance(events[-1], RunFinishedEvent)
    assert called == ["run", "stream"]
