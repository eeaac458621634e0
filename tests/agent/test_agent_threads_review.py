"""Review pass over checkpointed threads: the spec example as printed, thread ids on every
entry point, the interrupt checkpoint, pause before a first run, sessions and threads."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    Message,
    ScriptedModel,
    ToolCall,
    hitl_key,
    is_well_formed,
    tool,
)
from framework_agents.checkpoint import InMemoryCheckpointer, ThreadCheckpoint
from framework_agents.errors import ThreadBusyError, ThreadIdInvalidError
from framework_agents.models._base import ToolSpec


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


class Publisher:
    """An approval tool and a model that re-issues its call with regenerated argument text."""

    def __init__(self) -> None:
        self.published: list[str] = []
        self.asked: list[list[tuple[str, str]]] = []
        self.drafts = itertools.count()

    def mk(self, **kwargs: Any) -> Agent:
        published = self.published

        @tool(requires_approval=True)
        def publish(text: str) -> str:
            """Publish ``text``."""
            published.append(text)
            return f"published {text}"

        def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
            self.asked.append([(m.role, m.text) for m in messages])
            if messages[-1].role == "user":
                n = next(self.drafts)
                call = ToolCall(f"call-{n}", "publish", {"text": f"draft {n}"})
                return Message("assistant", f"publishing draft {n}", tool_calls=[call])
            return f"Done: {messages[-1].text}"

        return Agent(FunctionModel(model), tools=[publish], **kwargs)


# -- the spec example, as printed ------------------------------------------------------


@pytest.mark.parametrize("make_cp", [FileCheckpointer, lambda root: InMemoryCheckpointer()])
def test_the_spec_example_with_fresh_agents_and_regenerated_arguments(
    tmp_path: Path, make_cp: Any
) -> None:
    cp = make_cp(tmp_path / "cp")
    p = Publisher()
    mk = p.mk

    async def main() -> Any:
        try:
            await mk().run("...publish it.", checkpointer=cp, thread_id="t1")
        except HitlInterrupt as first:
            tool = first.tool
            seen = (first.tool, first.arguments, first.call_id, first.key, first.thread_id)
        assert seen == (
            "publish",
            {"text": "draft 0"},
            "call-0",
            hitl_key("publish", {"text": "draft 0"}),
            "t1",
        )
        saved = await cp.load("t1")
        assert [(m.role, m.text) for m in saved.messages] == [("user", "...publish it.")]
        assert saved.pending == ToolCall("call-0", "publish", {"text": "draft 0"})
        resumed = await mk().resume("t1", {tool: "approve"}, checkpointer=cp)
        return resumed, await cp.load("t1")

    resumed, final = arun(main())
    # The model re-issued the call with other text; the bare tool name approved it.
    assert p.published == ["draft 1"]
    assert resumed.text == "Done: published draft 1"
    assert p.asked[1] == [("user", "...publish it.")]  # re-asked from before the turn
    assert [(m.role, m.text) for m in resumed.messages] == [
        ("user", "...publish it."),
        ("assistant", "publishing draft 1"),
        ("tool", "published draft 1"),
        ("assistant", "Done: published draft 1"),
    ]
    assert is_well_formed(resumed.messages)
    assert final.messages == resumed.messages and final.pending is None


def test_an_exact_key_does_not_approve_regenerated_arguments(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    p = Publisher()
    with pytest.raises(HitlInterrupt) as first:
        arun(p.mk().run("publish it", checkpointer=cp, thread_id="t1"))
    key = first.value.key
    with pytest.raises(HitlInterrupt) as again:  # draft 1 is not draft 0
        arun(p.mk().resume("t1", {key: "approve"}, checkpointer=cp))
    assert again.value.arguments == {"text": "draft 1"} and p.published == []
    saved = arun(cp.load("t1"))
    assert saved.pending == ToolCall("call-1", "publish", {"text": "draft 1"})
    assert [m.text for m in saved.messages] == ["publish it"]
    # The key of the call the model will re-issue next approves exactly that call.
    nxt = hitl_key("publish", {"text": "draft 2"})
    result = arun(p.mk().resume("t1", {nxt: "approve"}, checkpointer=cp))
    assert p.published == ["draft 2"] and result.text == "Done: published draft 2"


def test_an_exact_key_approves_a_call_reissued_with_json_equal_arguments(
    tmp_path: Path,
) -> None:
    cp = FileCheckpointer(tmp_path)
    ran: list[dict[str, Any]] = []
    orders = itertools.cycle([{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}])

    @tool(requires_approval=True)
    def send(a: int, b: list[int]) -> str:
        """Send."""
        ran.append({"a": a, "b": b})
        return "sent"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "user":
            return Message("assistant", "", tool_calls=[ToolCall("x", "send", next(orders))])
        return "ok"

    def mk() -> Agent:
        return Agent(FunctionModel(model), tools=[send])

    with pytest.raises(HitlInterrupt) as first:
        arun(mk().run("go", checkpointer=cp, thread_id="t1"))
    assert first.value.key == 'send:{"a": 1, "b": [1, 2]}'
    result = arun(mk().resume("t1", {first.value.key: "approve"}, checkpointer=cp))
    assert result.text == "ok" and ran == [{"a": 1, "b": [1, 2]}]


# -- thread ids on every entry point ---------------------------------------------------

BAD_IDS = [".", "..", "a/b", "", "a" * 129, "é", "a\x00", "-a", ".a", "a\n", 5]


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
@pytest.mark.parametrize("make_cp", [FileCheckpointer, lambda root: InMemoryCheckpointer()])
def test_a_bad_thread_id_is_thread_id_invalid_everywhere(
    tmp_path: Path, bad: Any, make_cp: Any
) -> None:
    cp = make_cp(tmp_path / "cp")
    model = ScriptedModel([])  # never called

    async def stream() -> None:
        async for _ in Agent(model).stream("q", checkpointer=cp, thread_id=bad):
            pass

    attempts = [
        lambda: Agent(model).run("q", checkpointer=cp, thread_id=bad),
        stream,
        lambda: Agent(model).pause(bad, checkpointer=cp),
        lambda: Agent(model).resume(bad, {"publish": "approve"}, checkpointer=cp),
        lambda: cp.save(ThreadCheckpoint("ok").model_copy(update={"thread_id": bad})),
        lambda: cp.load(bad),
        lambda: cp.delete(bad),
    ]
    for attempt in attempts:
        with pytest.raises(ThreadIdInvalidError) as err:
            arun(attempt())
        assert err.value.code == "THREAD_ID_INVALID"
    assert not (tmp_path / "cp").exists() or not any((tmp_path / "cp").rglob("*.json"))


# -- one thread, two runs ---------------------------------------------------------------


def test_a_second_run_of_a_busy_thread_waits_then_is_thread_busy(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path / "cp", lock_timeout=0.3)
    second_model_calls: list[int] = []

    async def main() -> float:
        gate, inside = asyncio.Event(), asyncio.Event()

        async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            inside.set()
            await gate.wait()
            return "one"

        def fast(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            second_model_calls.append(1)
            return "two"

        first = asyncio.create_task(
            Agent(FunctionModel(slow)).run("a", checkpointer=cp, thread_id="t")
        )
        await inside.wait()
        start = time.monotonic()
        with pytest.raises(ThreadBusyError) as err:
            await Agent(FunctionModel(fast)).run("b", checkpointer=cp, thread_id="t")
        waited = time.monotonic() - start
        assert err.value.code == "THREAD_BUSY"
        gate.set()
        await first
        return waited

    waited = arun(main())
    assert waited >= 0.3  # it waited for the lock before giving up
    assert second_model_calls == []
    assert [m.text for m in arun(cp.load("t")).messages] == ["a", "one"]
