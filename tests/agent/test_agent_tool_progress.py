"""A tool reports progress through its ``ToolContext``; ``stream()`` yields it as events."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from async_helper import arun
from framework_agents import Agent, Message, ScriptedModel, ToolCall, ToolContext, tool
from framework_agents.agent.events import ToolProgressEvent, ToolResultEvent
from framework_agents.errors import InvalidArgumentError


def calls(*pairs: tuple[str, str]) -> Message:
    return Message("assistant", "", tool_calls=[ToolCall(i, name, {}) for i, name in pairs])


@tool
async def steps(context: ToolContext) -> str:
    """Reports three steps, then answers."""
    for n in (1, 2, 3):
        context.report_progress(n, 3, f"step {n}")
        await asyncio.sleep(0)
    return "three steps"


def test_progress_comes_between_the_call_and_its_result_in_order() -> None:
    async def main() -> list[Any]:
        agent = Agent(ScriptedModel([calls(("c1", "steps")), "done"]), tools=[steps])
        return [e async for e in agent.stream("go")]

    events = arun(main())
    kinds = [e.type for e in events]
    first_progress = kinds.index("tool_progress")
    assert kinds.index("tool_call") < first_progress
    assert kinds.index("tool_result") > first_progress
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert [(p.call_id, p.tool, p.progress, p.total, p.message) for p in progress] == [
        ("c1", "steps", 1.0, 3.0, "step 1"),
        ("c1", "steps", 2.0, 3.0, "step 2"),
        ("c1", "steps", 3.0, 3.0, "step 3"),
    ]
    assert progress[0].to_dict() == {
        "type": "tool_progress",
        "call_id": "c1",
        "tool": "steps",
        "progress": 1.0,
        "total": 3.0,
        "message": "step 1",
    }


def test_progress_is_never_stored_and_run_ignores_it() -> None:
    async def main() -> list[Message]:
        agent = Agent(ScriptedModel([calls(("c1", "steps")), "done"]), tools=[steps])
        result = await agent.run("go")
        return result.messages

    messages = arun(main())
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].text == "three steps"


def test_concurrent_calls_report_under_their_own_ids_while_another_still_runs() -> None:
    release = asyncio.Event()

    @tool
    async def slow(context: ToolContext) -> str:
        """Reports, waits until the reader has seen the other call's result, reports again."""
        context.report_progress(0)
        await release.wait()
        context.report_progress(1, message="through")
        return "slow done"

    @tool
    async def fast(context: ToolContext) -> str:
        """Reports once and answers."""
        context.report_progress(5, 10)
        return "fast done"

    async def main() -> list[Any]:
        model = ScriptedModel([calls(("a", "slow"), ("b", "fast")), "done"])
        agent = Agent(model, tools=[slow, fast])
        events = []
        async for event in agent.stream("go"):
            events.append(event)
            if isinstance(event, ToolResultEvent) and event.call_id == "b":
                release.set()  # "slow" goes on only once "fast"'s result has been read
        return events

    events = arun(main())
    seen = [
        (e.type, e.call_id, getattr(e, "progress", None))
        for e in events
        if isinstance(e, ToolProgressEvent | ToolResultEvent)
    ]
    assert seen == [
        ("tool_progress", "a", 0.0),
        ("tool_progress", "b", 5.0),
        ("tool_result", "b", None),
        ("tool_progress", "a", 1.0),
        ("tool_result", "a", None),
    ]
    (of_b,) = [e for e in events if isinstance(e, ToolProgressEvent) and e.call_id == "b"]
    assert of_b.total == 10.0 and of_b.message is None


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (("half",), "progress must be a number"),
        ((True,), "progress must be a number"),
        ((math.nan,), "progress must be a finite number"),
        ((1, math.inf), "total must be a finite number"),
        ((1, None, 7), "message must be a string"),
    ],
)
def test_bad_progress_is_invalid_argument_and_the_model_sees_a_tool_error(
    args: tuple[Any, ...], what: str
) -> None:
    @tool
    async def bad(context: ToolContext) -> str:
        """Reports something that is not progress."""
        context.report_progress(*args)
        return "unreachable"

    context = ToolContext(None, ToolCall("x", "bad", {}))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=what):
        context.report_progress(*args)

    async def main() -> list[Message]:
        agent = Agent(ScriptedModel([calls(("c1", "bad")), "done"]), tools=[bad])
        return (await agent.run("go")).messages

    (result,) = [m for m in arun(main()) if m.role == "tool"]
    assert result.kind == "tool_error" and what in result.text


def test_a_message_is_cut_at_a_thousand_characters() -> None:
    got: list[tuple[float, float | None, str | None]] = []
    context = ToolContext(
        None,  # type: ignore[arg-type]
        ToolCall("x", "t", {}),
        on_progress=lambda p, t, m: got.append((p, t, m)),
    )
    context.report_progress(2, message="y" * 5000)
    assert got == [(2.0, None, "y" * 1000)]
