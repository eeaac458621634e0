"""Limits stop a swarm with a named reason, status "failed", and a well-formed thread that a
later run continues. Timeouts use models that wait for an event that never fires."""

from __future__ import annotations

import asyncio
from typing import Any

from swarm_scenario import handoff

from async_helper import arun
from framework_agents import (
    Agent,
    FunctionModel,
    InMemoryCheckpointer,
    Message,
    Swarm,
    is_well_formed,
)
from framework_agents.swarm import SWARM_STATE_KEY


def pinging(to: str) -> FunctionModel:
    """Always hands off to ``to``."""
    return FunctionModel(lambda messages, tools: handoff(to, f"to {to}"))


def test_max_handoffs_stops_after_one_handoff_too_many() -> None:
    swarm = Swarm(
        [Agent(pinging("b"), agent_id="a"), Agent(pinging("a"), agent_id="b")],
        max_handoffs=3,
        repetition_window=0,
    )
    cp = InMemoryCheckpointer()
    result = arun(swarm.run("go", checkpointer=cp, thread_id="t"))
    assert (result.status, result.stop_reason, result.text) == ("failed", "max_handoffs", "")
    assert [h.to_agent for h in result.handoffs] == ["b", "a", "b", "a"]
    assert result.iterations == 4 and result.agent == "b"  # b answered last
    stored = arun(cp.load("t"))
    assert stored is not None
    assert stored.messages == result.messages and is_well_formed(stored.messages)
    assert stored is not None
    assert stored.state[SWARM_STATE_KEY]["active"] == "a"  # the handoff stands


def test_max_iterations_counts_member_turns_per_run() -> None:
    swarm = Swarm(
        [Agent(pinging("b"), agent_id="a"), Agent(pinging("a"), agent_id="b")],
        max_iterations=2,
        repetition_window=0,
    )
    result = arun(swarm.run("go"))
    assert (result.status, result.stop_reason, result.iterations) == ("failed", "max_iterations", 2)
    assert len(result.handoffs) == 2 and is_well_formed(result.messages)
    # A new run gets a fresh budget and starts at the member the last handoff named.
    again = arun(swarm.run("again"))
    assert again.stop_reason == "max_iterations" and again.handoffs[0].from_agent == "a"


def test_the_repetition_window_stops_ping_pong_between_two_members() -> None:
    never = FunctionModel(lambda messages, tools: "c never runs")
    swarm = Swarm(
        [
            Agent(pinging("b"), agent_id="a"),
            Agent(pinging("a"), agent_id="b"),
            Agent(never, agent_id="c"),
        ],
        repetition_window=4,
        repetition_min_agents=3,
    )
    result = arun(swarm.run("go"))
    assert (result.status, result.stop_reason, len(result.handoffs)) == ("failed", "repetition", 4)
    assert never.calls == []


def test_handoffs_among_enough_members_are_not_repetition() -> None:
    rounds = {"n": 0}

    def c(messages: list[Message], tools: Any) -> Message | str:
        rounds["n"] += 1
        return handoff("a") if rounds["n"] < 3 else "c done"

    swarm = Swarm(
        [
            Agent(pinging("b"), agent_id="a"),
            Agent(pinging("c"), agent_id="b"),
            Agent(FunctionModel(c), agent_id="c"),
        ],
        repetition_window=4,
        repetition_min_agents=3,
    )
    result = arun(swarm.run("go"))
    assert (result.status, result.agent, len(result.handoffs)) == ("completed", "c", 8)


def _blocking_after(first: str | None) -> FunctionModel:
    """Answers its first call with a handoff to ``first`` (if any), then waits forever."""

    async def answer(messages: list[Message], tools: Any) -> Message | str:
        if first is not None and not any(m.role == "tool" for m in messages):
            return handoff(first)
        await asyncio.Event().wait()  # never set: only a timeout ends this call
        return "unreachable"

    return FunctionModel(answer)


def test_node_timeout_stops_a_member_that_takes_too_long_and_commits_nothing_of_it() -> None:
    cp = InMemoryCheckpointer()
    swarm = Swarm(
        [
            Agent(_blocking_after("b"), agent_id="a"),
            Agent(_blocking_after(None), agent_id="b"),
        ],
        node_timeout=0.05,
    )
    result = arun(swarm.run("go", checkpointer=cp, thread_id="t"))
    assert (result.status, result.stop_reason, result.agent) == ("failed", "node_timeout", "b")
    assert [h.to_agent for h in result.handoffs] == ["b"]
    stored = arun(cp.load("t"))
    assert stored is not None
    assert stored.messages == result.messages and is_well_formed(stored.messages)
    assert stored is not None
    assert stored.state[SWARM_STATE_KEY]["active"] == "b"
    assert not swarm.running and not swarm.member("b").running


def test_execution_timeout_bounds_the_whole_run() -> None:
    swarm = Swarm(
        [
            Agent(_blocking_after("b"), agent_id="a"),
            Agent(_blocking_after(None), agent_id="b"),
        ],
        execution_timeout=0.05,
        node_timeout=None,
    )
    result = arun(swarm.run("go"))
    assert (result.status, result.stop_reason) == ("failed", "execution_timeout")
    assert is_well_formed(result.messages)


def test_a_timed_out_thread_runs_again() -> None:
    gate = {"block": True}

    async def b(messages: list[Message], tools: Any) -> str:
        if gate["block"]:
            await asyncio.Event().wait()
        return "b finally"

    swarm = Swarm(
        [Agent(_blocking_after("b"), agent_id="a"), Agent(FunctionModel(b), agent_id="b")],
        node_timeout=0.05,
    )
    assert arun(swarm.run("go")).stop_reason == "node_timeout"
    gate["block"] = False
    result = arun(swarm.run("retry"))
    assert (result.status, result.agent, result.text) == ("completed", "b", "b finally")
    assert is_well_formed(result.messages)
