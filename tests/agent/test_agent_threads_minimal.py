"""A custom checkpointer with only the four methods API.md names (save, load, delete,
list_threads) runs threads: run, interrupt, resume, pause, the at-most-once protocol (its
in-flight record is a full save) and one run of a thread at a time (an in-process lock)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from threads_scenario import effects, publishing_agent

from async_helper import arun, some
from framework_agents import (
    Agent,
    FunctionModel,
    HitlInterrupt,
    Message,
    ScriptedModel,
    ToolCall,
    is_well_formed,
    tool,
)
from framework_agents.checkpoint import Checkpointer, ThreadCheckpoint
from framework_agents.errors import InvalidArgumentError, ThreadBusyError
from framework_agents.models._base import ToolSpec


def interrupt_of(coro: Any) -> HitlInterrupt:
    with pytest.raises(HitlInterrupt) as info:
        arun(coro)
    return info.value


class Crash(BaseException):
    """Stands in for a process dying: nothing in the framework catches it."""


class DictCheckpointer:
    """The smallest checkpointer: a dict of JSON documents, four methods, nothing else."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.saved: list[ThreadCheckpoint] = []

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        self.saved.append(checkpoint)
        self.data[checkpoint.thread_id] = checkpoint.model_dump_json()

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        raw = self.data.get(thread_id)
        return None if raw is None else ThreadCheckpoint.model_validate_json(raw)

    async def delete(self, thread_id: str) -> None:
        self.data.pop(thread_id, None)

    async def list_threads(self) -> list[str]:
        return sorted(self.data)


@pytest.fixture
def fx(tmp_path: Path) -> Path:
    return tmp_path / "effects.txt"


def test_four_methods_make_a_checkpointer() -> None:
    cp = DictCheckpointer()
    assert isinstance(cp, Checkpointer)
    assert not hasattr(cp, "save_progress") and not hasattr(cp, "thread_lock")


def test_a_run_saves_the_thread_and_the_next_run_continues_it() -> None:
    cp = DictCheckpointer()
    arun(Agent(ScriptedModel(["one"]), state={"n": 1}).run("hi", checkpointer=cp, thread_id="t"))
    saved = arun(cp.load("t"))
    assert saved is not None
    assert [m.text for m in saved.messages] == ["hi", "one"] and saved.state == {"n": 1}
    fresh = Agent(ScriptedModel(["two"]))
    result = arun(fresh.run("again", checkpointer=cp, thread_id="t"))
    assert [m.text for m in result.messages] == ["hi", "one", "again", "two"]
    assert dict(fresh.state) == {"n": 1}
    assert arun(cp.list_threads()) == ["t"]


def test_interrupt_then_resume(fx: Path) -> None:
    cp = DictCheckpointer()
    interrupt = interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t"))
    assert interrupt.thread_id == "t"
    saved = arun(cp.load("t"))
    assert saved is not None
    assert saved.pending is not None and [m.text for m in saved.messages] == ["go"]
    result = arun(publishing_agent(fx).resume("t", {"publish": "approve"}, checkpointer=cp))
    assert result.text == "finished: published hello" and effects(fx) == ["hello"]
    final = arun(cp.load("t"))
    assert final is not None
    assert final.pending is None and final.turn is None and is_well_formed(final.messages)


def test_pause_then_resume() -> None:
    cp = DictCheckpointer()
    agent = Agent(ScriptedModel(["one"]), state={"k": "v"})
    arun(agent.run("hi"))
    arun(agent.pause("p", checkpointer=cp))
    saved = arun(cp.load("p"))
    assert saved is not None
    assert [m.text for m in saved.messages] == ["hi", "one"] and saved.pending is None
    resumed = Agent(ScriptedModel(["went on"]))
    result = arun(resumed.resume("p", checkpointer=cp))
    assert result.text == "went on" and dict(resumed.state) == {"k": "v"}


def test_the_in_flight_record_is_a_full_save_and_an_unknown_outcome_is_not_rerun(
    fx: Path,
) -> None:
    cp = DictCheckpointer()
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t"))
    observed: dict[str, ThreadCheckpoint | None] = {}

    crashing = publishing_agent(fx)

    @tool(requires_approval=True)
    async def publish(text: str) -> str:
        """Publish, then die before returning."""
        observed["during"] = await cp.load("t")  # what a crash leaves behind
        await asyncio.to_thread(fx.write_text, text + "\n")  # its side effect
        raise Crash

    crashing._tools_by_name["publish"] = publish
    with pytest.raises(Crash):
        arun(crashing.resume("t", {"publish": "approve"}, checkpointer=cp))
    during = observed["during"]
    assert during is not None and [c.name for c in during.in_flight] == ["publish"]
    assert during.turn is not None and [m.text for m in during.messages] == ["go"]
    assert cp.saved[-1].in_flight  # written by save(): there is no save_progress

    unknown = interrupt_of(
        publishing_agent(fx).resume("t", {"publish": "approve"}, checkpointer=cp)
    )
    assert unknown.outcome_unknown and effects(fx) == ["hello"]  # not run again
    result = arun(
        publishing_agent(fx).resume("t", {unknown.key: {"reject": "may be out"}}, checkpointer=cp)
    )
    assert result.text == "finished: Rejected: may be out" and effects(fx) == ["hello"]
    assert is_well_formed(some(arun(cp.load("t"))).messages)


def held_run(cp: Any, entered: asyncio.Event, gate: asyncio.Event) -> Agent:
    """An agent whose tool holds its run (and so the thread) until ``gate`` opens."""

    @tool
    async def hold() -> str:
        """Hold the run."""
        entered.set()
        await gate.wait()
        return "held"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "user":
            return Message("assistant", "", tool_calls=[ToolCall("h", "hold", {})])
        return "first done"

    return Agent(FunctionModel(model), tools=[hold])


async def until_entered(first: asyncio.Task[Any], entered: asyncio.Event) -> None:
    """Wait until ``first`` holds the thread in its tool; raise its error if it failed."""
    waiter = asyncio.ensure_future(entered.wait())
    await asyncio.wait({first, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not entered.is_set():
        waiter.cancel()
        first.result()
        raise AssertionError("the first run ended without holding the thread")


def test_runs_of_one_thread_take_turns_in_process() -> None:
    cp = DictCheckpointer()

    async def body() -> list[str]:
        entered, gate = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(
            held_run(cp, entered, gate).run("one", checkpointer=cp, thread_id="t")
        )
        await until_entered(first, entered)  # the first run holds the thread
        second = asyncio.create_task(
            Agent(ScriptedModel(["second done"])).run("two", checkpointer=cp, thread_id="t")
        )
        done, _ = await asyncio.wait({second}, timeout=0.2)
        assert not done  # it waits for the thread instead of running alongside
        gate.set()
        await first
        result = await second
        return [m.text for m in result.messages]

    # The second run started from the first one's checkpoint: they did not interleave.
    assert arun(body()) == ["one", "", "held", "first done", "two", "second done"]


def test_a_run_waiting_past_lock_timeout_is_thread_busy() -> None:
    cp = DictCheckpointer()
    cp.lock_timeout = 0.05  # type: ignore[attr-defined]

    async def body() -> None:
        entered, gate = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(
            held_run(cp, entered, gate).run("one", checkpointer=cp, thread_id="t")
        )
        await until_entered(first, entered)
        with pytest.raises(ThreadBusyError) as err:
            await Agent(ScriptedModel(["x"])).run("two", checkpointer=cp, thread_id="t")
        assert err.value.code == "THREAD_BUSY"
        gate.set()
        await first

    arun(body())
    assert [m.text for m in some(arun(cp.load("t"))).messages][-1] == "first done"


def test_other_threads_and_other_checkpointers_do_not_wait() -> None:
    cp, other = DictCheckpointer(), DictCheckpointer()

    async def body() -> None:
        entered, gate = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(
            held_run(cp, entered, gate).run("one", checkpointer=cp, thread_id="t")
        )
        await until_entered(first, entered)
        await Agent(ScriptedModel(["a"])).run("x", checkpointer=cp, thread_id="u")
        await Agent(ScriptedModel(["b"])).run("y", checkpointer=other, thread_id="t")
        gate.set()
        await first

    arun(body())
    assert arun(cp.list_threads()) == ["t", "u"] and arun(other.list_threads()) == ["t"]


def test_a_bad_lock_timeout_attribute_is_invalid_argument() -> None:
    cp = DictCheckpointer()
    cp.lock_timeout = "soon"  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgumentError, match="lock_timeout"):
        arun(Agent(ScriptedModel(["x"])).run("q", checkpointer=cp, thread_id="t"))
