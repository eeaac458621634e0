"""``agent.stream()``: typed events, live, from the same loop as ``run()``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    FunctionModel,
    Message,
    ModelError,
    ReasoningBlock,
    ScriptedModel,
    TextBlock,
    ToolCall,
    ToolSpec,
    tool,
)
from framework_agents.agent import (
    InterruptEvent,
    MessageCompletedEvent,
    MessageStartedEvent,
    ReasoningDeltaEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.models import ModelDone, ReasoningDelta, TextDelta


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


class GatedStreamingModel:
    """Streams "Hel", waits for ``gate``, then streams "lo" and finishes."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> Message:
        raise AssertionError("a streaming model must be streamed")

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> AsyncIterator[Any]:
        yield ReasoningDelta("thinking")
        yield TextDelta("Hel")
        await self.gate.wait()
        yield TextDelta("lo")
        yield ModelDone(Message("assistant", [ReasoningBlock("thinking"), TextBlock("Hello")]))


def test_deltas_arrive_while_the_model_is_still_answering() -> None:
    model = GatedStreamingModel()
    agent = Agent(model)

    async def go() -> list[Any]:
        seen: list[Any] = []
        async for event in agent.stream("hi"):
            seen.append(event)
            if isinstance(event, TextDeltaEvent) and event.delta == "Hel":
                # The run cannot end before this: the model waits for the gate.
                assert agent.running
                assert not any(isinstance(e, RunFinishedEvent) for e in seen)
                model.gate.set()
        return seen

    events = arun(go(), timeout=10)
    types = [e.type for e in events]
    assert types == [
        "run_started",
        "message_started",
        "reasoning_delta",
        "text_delta",
        "text_delta",
        "message_completed",
        "run_finished",
    ]
    started = events[1]
    assert isinstance(started, MessageStartedEvent)
    completed = events[5]
    assert isinstance(completed, MessageCompletedEvent)
    assert completed.message_id == started.message_id
    assert all(e.message_id == started.message_id for e in events[2:5])
    final = events[-1]
    assert isinstance(final, RunFinishedEvent)
    assert final.result.text == "Hello"
    assert final.result.messages[-1].id == started.message_id


def test_events_arrive_before_a_tool_run_ends() -> None:
    gate = asyncio.Event()

    @tool
    async def wait_for_gate() -> str:
        """Wait until the test opens the gate."""
        await gate.wait()
        return "opened"

    model = ScriptedModel(
        [Message("assistant", "", tool_calls=[ToolCall("c1", "wait_for_gate")]), "ok"]
    )
    agent = Agent(model, tools=[wait_for_gate])

    async def go() -> list[Any]:
        seen: list[Any] = []
        async for event in agent.stream("go"):
            seen.append(event)
            if isinstance(event, ToolCallEvent):
                gate.set()
        return seen

    events = arun(go(), timeout=10)
    assert [e.type for e in events] == [
        "run_started",
        "message_started",
        "message_completed",
        "tool_call",
        "tool_result",
        "message_started",
        "text_delta",
        "message_completed",
        "run_finished",
    ]
    call_event, result_event = events[3], events[4]
    assert isinstance(call_event, ToolCallEvent) and isinstance(result_event, ToolResultEvent)
    assert call_event.call.name == "wait_for_gate"
    assert call_event.message_id == events[1].message_id
    assert result_event.call_id == "c1" and result_event.message.text == "opened"
    assert not result_event.is_error
    stored = events[-1].result.messages
    assert stored[1].id == events[1].message_id
    assert stored[2].id == result_event.message.id


def test_a_non_streaming_model_still_yields_text_and_reasoning_deltas() -> None:
    class CompleteOnly:
        async def complete(
            self, messages: Any, tools: Any, *, system_prompt: Any = None
        ) -> Message:
            return Message("assistant", [ReasoningBlock("why"), TextBlock("because")])

    events = arun(collect(Agent(CompleteOnly()).stream("q")))
    reasoning = [e for e in events if isinstance(e, ReasoningDeltaEvent)]
    text = [e for e in events if isinstance(e, TextDeltaEvent)]
    assert [e.delta for e in reasoning] == ["why"]
    assert [e.delta for e in text] == ["because"]


def test_run_started_carries_ids_and_the_prompt() -> None:
    agent = Agent(ScriptedModel(["x"]), agent_id="bot")
    events = arun(collect(agent.stream("hi", checkpointer=InMemoryCheckpointer(), thread_id="t9")))
    first, last = events[0], events[-1]
    assert isinstance(first, RunStartedEvent)
    assert (first.agent_id, first.thread_id) == ("bot", "t9")
    assert first.prompt is not None and first.prompt.text == "hi"
    assert isinstance(last, RunFinishedEvent) and last.run_id == first.run_id
    assert last.result.run_id == first.run_id


def test_an_error_ends_the_stream_with_run_error_then_raises() -> None:
    agent = Agent(ScriptedModel([ModelError("boom", code="MODEL_RATE_LIMIT")]))
    seen: list[Any] = []

    async def go() -> None:
        async for event in agent.stream("q"):
            seen.append(event)

    with pytest.raises(ModelError):
        arun(go(), timeout=10)
    last = seen[-1]
    assert isinstance(last, RunErrorEvent)
    assert last.code == "MODEL_RATE_LIMIT" and "boom" in last.message
    assert not agent.running


def test_an_interrupt_ends_the_stream_quietly() -> None:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        return "published"

    model = ScriptedModel(
        [Message("assistant", "", tool_calls=[ToolCall("c1", "publish", {"text": "a"})])]
    )
    agent = Agent(model, tools=[publish])
    events = arun(collect(agent.stream("go")), timeout=10)
    last = events[-1]
    assert isinstance(last, InterruptEvent)
    assert last.interrupt.tool == "publish" and last.interrupt.call_id == "c1"
    assert not any(isinstance(e, ToolResultEvent) for e in events)
    assert not agent.running


def test_the_agent_is_free_as_soon_as_the_terminal_event_arrives() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))

    async def go() -> str:
        stream = agent.stream("a")
        async for event in stream:
            if isinstance(event, RunFinishedEvent):
                break  # the generator is not closed yet
        assert not agent.running
        text = (await agent.run("b")).text
        await stream.aclose()
        return text

    assert arun(go(), timeout=10) == "two"


def test_closing_a_stream_early_frees_the_agent_and_commits_nothing() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))

    async def go() -> None:
        async with contextlib.aclosing(agent.stream("a")) as stream:
            async for event in stream:
                if isinstance(event, MessageStartedEvent):
                    break
        assert not agent.running
        assert agent.messages == []

    arun(go(), timeout=10)


def test_run_and_stream_produce_the_same_history() -> None:
    def answer(messages: list[Message], tools: list[ToolSpec]) -> Message:
        if messages[-1].role == "user":
            return Message("assistant", "", tool_calls=[ToolCall("c1", "echo", {"text": "x"})])
        return Message("assistant", "done")

    a = Agent(FunctionModel(answer), tools=[echo])
    b = Agent(FunctionModel(answer), tools=[echo])
    ran = arun(a.run("q"), timeout=10)
    streamed = arun(collect(b.stream("q")), timeout=10)[-1].result

    def strip(ms: list[Message]) -> list[tuple[object, ...]]:
        return [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in ms]

    assert strip(ran.messages) == strip(streamed.messages)
