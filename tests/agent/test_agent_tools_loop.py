"""Tools inside the loop: concurrency, call order, error results, context, ids."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from async_helper import arun
from framework_agents import (
    Agent,
    Message,
    ScriptedModel,
    ToolCall,
    ToolContext,
    ToolRejection,
    is_well_formed,
    tool,
)
from framework_agents.agent import ToolResultEvent


def turn(*calls: ToolCall) -> Message:
    return Message("assistant", "", tool_calls=list(calls))


def test_calls_of_one_turn_run_concurrently_and_are_stored_in_call_order() -> None:
    slow_started = asyncio.Event()
    fast_reported = asyncio.Event()

    @tool
    async def slow() -> str:
        """Finishes only after the fast call's result was streamed: needs concurrency."""
        slow_started.set()
        await fast_reported.wait()
        return "slow"

    @tool
    async def fast() -> str:
        """Waits until slow has started (deadlocks if calls ran one after the other)."""
        await slow_started.wait()
        return "fast"

    model = ScriptedModel([turn(ToolCall("a", "slow"), ToolCall("b", "fast")), "done"])
    agent = Agent(model, tools=[slow, fast])

    async def go() -> tuple[list[str], list[Message]]:
        order: list[str] = []
        result = None
        async for event in agent.stream("go"):
            if isinstance(event, ToolResultEvent):
                order.append(event.call_id)
                fast_reported.set()
            if event.type == "run_finished":
                result = event.result
        assert result is not None
        return order, result.messages

    order, messages = arun(go(), timeout=10)
    assert order == ["b", "a"]  # events in completion order...
    tool_messages = [m for m in messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["a", "b"]  # ...history in call order
    assert [m.text for m in tool_messages] == ["slow", "fast"]
    assert is_well_formed(messages)


def test_sync_tools_run_concurrently_too() -> None:
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def meet(name: str) -> str:
        """Both calls must be inside at once to pass the barrier."""
        barrier.wait()
        return name

    model = ScriptedModel(
        [turn(ToolCall("a", "meet", {"name": "x"}), ToolCall("b", "meet", {"name": "y"})), "ok"]
    )
    messages = arun(Agent(model, tools=[meet]).run("go"), timeout=10).messages
    assert [m.text for m in messages if m.role == "tool"] == ["x", "y"]
    assert all(m.kind is None for m in messages if m.role == "tool")


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


def test_bad_arguments_unknown_tools_and_raising_tools_become_error_results() -> None:
    model = ScriptedModel(
        [
            turn(
                ToolCall("bad", "divide", {"a": "x", "b": 1}),
                ToolCall("ghost", "nope", {}),
                ToolCall("zero", "divide", {"a": 1, "b": 0}),
                ToolCall("good", "divide", {"a": 6, "b": 3}),
            ),
            "recovered",
        ]
    )
    result = arun(Agent(model, tools=[divide]).run("go"), timeout=10)
    assert result.text == "recovered"
    results = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert results["bad"].kind == "tool_error" and "invalid arguments" in results["bad"].text
    assert results["ghost"].kind == "tool_error" and "Unknown tool 'nope'" in results["ghost"].text
    assert "divide" in results["ghost"].text
    assert results["zero"].kind == "tool_error" and "ZeroDivisionError" in results["zero"].text
    assert results["good"].kind is None and results["good"].text == "2.0"
    # The model saw every error result before answering.
    seen = model.calls[1].messages
    assert [m.tool_call_id for m in seen if m.role == "tool"] == ["bad", "ghost", "zero", "good"]


def test_a_tool_may_refuse_with_tool_rejection() -> None:
    @tool
    def guarded(x: int) -> int:
        """Refuses negative numbers."""
        if x < 0:
            raise ToolRejection("negative numbers are not allowed")
        return x

    model = ScriptedModel([turn(ToolCall("c", "guarded", {"x": -1})), "ok"])
    messages = arun(Agent(model, tools=[guarded]).run("go"), timeout=10).messages
    rejected = messages[2]
    assert rejected.kind == "rejected"
    assert rejected.metadata["reason"] == "negative numbers are not allowed"
    assert "negative numbers are not allowed" in rejected.text


def test_non_string_results_are_json_encoded() -> None:
    @tool
    def info() -> dict[str, Any]:
        """Some structured data."""
        return {"n": 1, "tags": ["a", "b"]}

    model = ScriptedModel([turn(ToolCall("c", "info")), "ok"])
    messages = arun(Agent(model, tools=[info]).run("go"), timeout=10).messages
    assert json.loads(messages[2].text) == {"n": 1, "tags": ["a", "b"]}
    assert messages[2].name == "info"


def test_tools_reach_the_agent_through_tool_context() -> None:
    @tool
    def count(ctx: ToolContext) -> int:
        """Count calls in agent state."""
        ctx.agent.state["count"] = ctx.agent.state.get("count", 0) + 1
        assert ctx.call.name == "count"
        return int(ctx.agent.state["count"])

    model = ScriptedModel([turn(ToolCall("a", "count"), ToolCall("b", "count")), "ok"])
    agent = Agent(model, tools=[count])
    arun(agent.run("go"), timeout=10)
    assert agent.state["count"] == 2
    assert "ctx" not in model.calls[0].tools[0].parameters["properties"]


def test_repeated_or_empty_call_ids_are_made_unique() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel(
        [turn(ToolCall("same", "ping"), ToolCall("same", "ping"), ToolCall("", "ping")), "ok"]
    )
    messages = arun(Agent(model, tools=[ping]).run("go"), timeout=10).messages
    ids = [c.id for c in messages[1].tool_calls]
    assert len(set(ids)) == 3 and ids[0] == "same" and all(ids)
    assert [m.tool_call_id for m in messages if m.role == "tool"] == ids
    assert is_well_formed(messages)


def test_a_multi_turn_tool_loop() -> None:
    @tool
    def step(n: int) -> int:
        """Next step."""
        return n + 1

    model = ScriptedModel(
        [
            turn(ToolCall("1", "step", {"n": 0})),
            turn(ToolCall("2", "step", {"n": 1})),
            turn(ToolCall("3", "step", {"n": 2})),
            "three steps",
        ]
    )
    result = arun(Agent(model, tools=[step]).run("go"), timeout=10)
    assert [m.text for m in result.messages if m.role == "tool"] == ["1", "2", "3"]
    assert result.turns == 4
    model.assert_complete()
