"""``agent.resume_stream()``: a resumed run's events as they happen, ending like ``stream()``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework_agents import (
    Agent,
    HitlInterrupt,
    InMemoryCheckpointer,
    Message,
    ScriptedModel,
    ToolCall,
    tool,
)
from framework_agents.agent.events import (
    InterruptEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
)
from framework_agents.errors import CheckpointMissingError, HitlDecisionError

RAN: list[str] = []


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish text."""
    RAN.append(text)
    return f"published {text}"


CALL = Message("assistant", tool_calls=[ToolCall("c1", "publish", {"text": "hi"})])


async def _collect(events: Any) -> list[Any]:
    return [event async for event in events]


def test_a_resumed_run_streams_its_events_and_runs_the_call_once() -> None:
    RAN.clear()

    async def body() -> None:
        cp = InMemoryCheckpointer()
        with pytest.raises(HitlInterrupt):
            await Agent(ScriptedModel([CALL]), tools=[publish]).run(
                "go", checkpointer=cp, thread_id="t"
            )
        agent = Agent(ScriptedModel(["done"]), tools=[publish])
        events = await _collect(
            agent.resume_stream("t", {"publish": "approve"}, checkpointer=cp, reissue=False)
        )
        assert isinstance(events[0], RunStartedEvent)
        results = [e for e in events if isinstance(e, ToolResultEvent)]
        assert [r.message.tool_call_id for r in results] == ["c1"]  # the call the human saw
        assert isinstance(events[-1], RunFinishedEvent) and events[-1].result.text == "done"
        assert RAN == ["hi"]
        with pytest.raises(HitlDecisionError):  # a replay answers nothing and runs nothing
            await _collect(agent.resume_stream("t", {"publish": "approve"}, checkpointer=cp))
        assert RAN == ["hi"]

    asyncio.run(body())


def test_a_resumed_run_that_interrupts_ends_with_the_interrupt_event() -> None:
    async def body() -> None:
        cp = InMemoryCheckpointer()
        with pytest.raises(HitlInterrupt):
            await Agent(ScriptedModel([CALL]), tools=[publish]).run(
                "go", checkpointer=cp, thread_id="t"
            )
        agent = Agent(ScriptedModel([CALL]), tools=[publish])  # re-issues; nothing decided
        events = await _collect(agent.resume_stream("t", checkpointer=cp))
        assert isinstance(events[-1], InterruptEvent)
        assert events[-1].interrupt.tool == "publish"
        assert not agent.running  # the agent is free once the stream ends

    asyncio.run(body())


def test_an_unknown_thread_is_checkpoint_missing() -> None:
    async def body() -> None:
        agent = Agent(ScriptedModel(["x"]))
        with pytest.raises(CheckpointMissingError):
            await _collect(agent.resume_stream("nope", checkpointer=InMemoryCheckpointer()))

    asyncio.run(body())
