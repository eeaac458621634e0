"""A swarm resume that runs the call the human saw (``reissue=False``), streamed.

The billing member's model names a different order each time it is asked for a refund
call: asking it again after the approval (``reissue=True``) runs an order the human never
saw; the default, ``reissue=False``, runs the stored call and asks the model only for its
answer. The agent-shaped view (what a server drives) streams that resume.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from swarm_scenario import since_my_turn, triage_model

from framework_agents import (
    Agent,
    FunctionModel,
    InMemoryCheckpointer,
    Message,
    Swarm,
    ToolCall,
    tool,
)
from framework_agents.agent import InterruptEvent, RunFinishedEvent, ToolResultEvent
from framework_agents.swarm import MemberEvent


def _swarm(effects: Path, asked: list[int]) -> Swarm:
    def billing(messages: list[Message], tools: Any) -> Message | str:
        recent = since_my_turn(messages)
        results = [m for m in recent if m.role == "tool" and m.name == "refund"]
        if results:
            return f"Refund handled: {results[-1].text}"
        asked.append(len(asked))
        order = 41 + len(asked)  # 42 the first time, 43 when asked again
        return Message(
            "assistant", "", tool_calls=[ToolCall(f"r{order}", "refund", {"order": order})]
        )

    @tool(requires_approval=True)
    async def refund(order: int) -> str:
        """Refund an order."""
        with effects.open("a") as f:
            f.write(f"refund {order}\n")
        return f"refunded order {order}"

    return Swarm(
        [
            Agent(triage_model(), agent_id="triage"),
            Agent(FunctionModel(billing), agent_id="billing", tools=[refund]),
        ]
    )


async def _collect(events: Any) -> list[Any]:
    return [event async for event in events]


def test_the_view_streams_a_resume_that_runs_the_call_the_human_saw(tmp_path: Path) -> None:
    effects, asked = tmp_path / "fx.txt", list[int]()
    view = _swarm(effects, asked).as_agent()
    cp = InMemoryCheckpointer()

    async def scenario() -> tuple[list[Any], list[Any]]:
        first = await _collect(view.stream("refund please", checkpointer=cp, thread_id="t"))
        interrupt = first[-1].interrupt
        second = await _collect(
            view.resume_stream("t", {interrupt.key: "approve"}, checkpointer=cp, reissue=False)
        )
        return first, second

    first, second = asyncio.run(scenario())
    assert isinstance(first[-1], InterruptEvent)
    assert first[-1].interrupt.arguments == {"order": 42}
    assert effects.read_text() == "refund 42\n"  # the order the human saw, once
    assert asked == [0]  # the model was not asked for the call again
    results = [e for e in second if isinstance(e, ToolResultEvent)]
    assert [(r.call_id, r.message.text) for r in results] == [("r42", "refunded order 42")]
    assert isinstance(second[-1], RunFinishedEvent)
    assert second[-1].result.text == "Refund handled: refunded order 42"
    assert any(isinstance(e, MemberEvent) for e in second)  # the member's run brackets


def test_reissue_true_asks_the_member_again(tmp_path: Path) -> None:
    """The re-issue mode: the model names the call anew."""
    effects, asked = tmp_path / "fx.txt", list[int]()
    swarm = _swarm(effects, asked)
    cp = InMemoryCheckpointer()

    async def scenario() -> str:
        await _collect(swarm.stream("refund please", checkpointer=cp, thread_id="t"))
        result = await swarm.resume("t", {"refund": "approve"}, checkpointer=cp, reissue=True)
        return result.text

    assert asyncio.run(scenario()) == "Refund handled: refunded order 43"
    assert asked == [0, 1]
    assert effects.read_text() == "refund 43\n"


def test_the_default_resume_and_its_old_stream_name_run_the_call_the_human_saw(
    tmp_path: Path,
) -> None:
    effects, asked = tmp_path / "fx.txt", list[int]()
    swarm = _swarm(effects, asked)
    cp = InMemoryCheckpointer()

    async def scenario() -> list[Any]:
        await _collect(swarm.stream("refund please", checkpointer=cp, thread_id="t"))
        with pytest.warns(DeprecationWarning, match="resume_stream"):
            stream = swarm.stream_resume("t", {"refund": "approve"}, checkpointer=cp)
        return await _collect(stream)

    events = asyncio.run(scenario())
    assert effects.read_text() == "refund 42\n"  # the order the human saw
    assert asked == [0]
    assert events[-1].result.text == "Refund handled: refunded order 42"
