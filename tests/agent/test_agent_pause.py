"""Pausing a thread: ``ctx.pause()`` from tools and middleware (through the run that holds
the thread, never its lock), ``agent.pause`` during and after the agent's own run, and when
pausing a thread that has no checkpoint is ``CHECKPOINT_MISSING``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    Message,
    ScriptedModel,
    ToolCall,
    tool,
)
from framework_agents.agent import ModelCallContext, ToolCallContext, ToolContext
from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.errors import CheckpointMissingError, InvalidArgumentError, ModelError
from framework_agents.hitl import new_interrupt_id
from framework_agents.models._base import ToolSpec


def calls(*names: str) -> Message:
    return Message(
        "assistant", "", tool_calls=[ToolCall(f"c{i}", n, {}) for i, n in enumerate(names)]
    )


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


@pytest.fixture
def cp(tmp_path: Path) -> FileCheckpointer:
    # lock_timeout=0: a pause that waited for the lock its own run holds fails at once.
    return FileCheckpointer(tmp_path / "cp", lock_timeout=0)


# -- ctx.pause() from a tool ----------------------------------------------------------------


def test_a_tools_pause_saves_the_runs_history_so_far_and_the_state(cp: FileCheckpointer) -> None:
    seen: list[list[str]] = []

    @tool
    async def save_point(ctx: ToolContext) -> str:
        """Checkpoint the thread now."""
        ctx.agent.state["step"] = "paused"
        await ctx.pause()
        stored = some(await cp.load("t"))
        seen.append(texts(stored.messages))
        assert stored.state == {"step": "paused"} and stored.pending is None
        return "saved"

    agent = Agent(ScriptedModel([calls("save_point"), "done"]), tools=[save_point])
    arun(agent.run("first", checkpointer=cp, thread_id="t"))  # a thread with a history
    agent.model = ScriptedModel([calls("save_point"), "done again"])
    result = arun(agent.run("second", checkpointer=cp, thread_id="t"))
    # The history so far: the prompt, not the turn whose call is running.
    assert seen == [["first"], ["first", "", "saved", "done", "second"]]
    assert result.text == "done again"
    final = some(arun(cp.load("t")))
    assert final.finished and texts(final.messages)[-1] == "done again"


def test_a_run_that_fails_after_a_pause_leaves_the_paused_thread_to_resume(
    cp: FileCheckpointer,
) -> None:
    @tool
    async def save_point(ctx: ToolContext) -> str:
        """Checkpoint the thread now."""
        await ctx.pause()
        return "saved"

    def fail(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        if messages[-1].role == "tool":
            raise ModelError("the provider went away")
        return calls("save_point")

    with pytest.raises(ModelError):
        arun(
            Agent(FunctionModel(fail), tools=[save_point], state={"k": 1}).run(
                "go", checkpointer=cp, thread_id="t"
            )
        )
    stored = some(arun(cp.load("t")))
    assert texts(stored.messages) == ["go"] and stored.state == {"k": 1}
    resumed = arun(Agent(ScriptedModel(["answered"])).resume("t", checkpointer=cp))
    assert texts(resumed.messages) == ["go", "answered"]


def test_a_pause_while_an_approved_call_runs_keeps_its_in_flight_record(
    cp: FileCheckpointer,
) -> None:
    seen: list[Any] = []

    @tool(requires_approval=True)
    async def publish(ctx: ToolContext) -> str:
        """Publish (needs approval); checkpoints the thread while it runs."""
        await ctx.pause()
        stored = some(await cp.load("t"))
        seen.append(([c.name for c in stored.in_flight], stored.turn is not None))
        return "published"

    agent = Agent(ScriptedModel([calls("publish"), "done"]), tools=[publish])
    result = arun(agent.run("go", checkpointer=cp, thread_id="t", decisions={"publish": "approve"}))
    assert result.text == "done"
    # The at-most-once record of the approved call survives the pause.
    assert seen == [(["publish"], True)]


def test_a_context_kept_past_its_run_cannot_pause(cp: FileCheckpointer) -> None:
    kept: list[ToolContext] = []

    @tool
    def keep(ctx: ToolContext) -> str:
        """Keep the context."""
        kept.append(ctx)
        return "kept"

    arun(
        Agent(ScriptedModel([calls("keep"), "done"]), tools=[keep]).run(
            "go", checkpointer=cp, thread_id="t"
        )
    )
    with pytest.raises(InvalidArgumentError, match="is over"):
        arun(_awaited(kept[0].pause()))


async def _awaited(pause: Awaitable[None]) -> None:
    await pause


def test_a_pause_in_a_run_without_a_thread_is_invalid_argument() -> None:
    @tool
    async def save_point(ctx: ToolContext) -> str:
        """Checkpoint the thread now."""
        await ctx.pause()
        return "saved"

    result = arun(Agent(ScriptedModel([calls("save_point"), "done"]), tools=[save_point]).run("go"))
    tool_result = next(m for m in result.messages if m.role == "tool")
    assert "InvalidArgumentError" in tool_result.text and "no thread" in tool_result.text
    with pytest.raises(InvalidArgumentError, match="no thread"):
        arun(_awaited(ToolContext(Agent(ScriptedModel([])), ToolCall("c", "f", {})).pause()))


# -- ctx.pause() from middleware ------------------------------------------------------------


def test_middleware_pauses_through_its_context(cp: FileCheckpointer) -> None:
    saved: list[tuple[str, list[str]]] = []

    class SavePoints:
        async def before_model(self, ctx: ModelCallContext) -> None:
            await ctx.pause()
            saved.append(("before_model", texts(some(await cp.load("t")).messages)))

        async def after_tool(self, ctx: ToolCallContext) -> None:
            await ctx.pause()
            saved.append(("after_tool", texts(some(await cp.load("t")).messages)))

    @tool
    def look() -> str:
        """Look."""
        return "seen"

    agent = Agent(ScriptedModel([calls("look"), "done"]), tools=[look], middleware=[SavePoints()])
    assert arun(agent.run("go", checkpointer=cp, thread_id="t")).text == "done"
    assert saved == [
        ("before_model", ["go"]),
        ("after_tool", ["go"]),  # the turn is still running: not saved half done
        ("before_model", ["go", "", "seen"]),
    ]


def test_middleware_pausing_a_run_without_a_thread_fails_the_run() -> None:
    class SavePoint:
        async def before_model(self, ctx: ModelCallContext) -> None:
            await ctx.pause()

    with pytest.raises(InvalidArgumentError, match="no thread"):
        arun(Agent(ScriptedModel(["x"]), middleware=[SavePoint()]).run("go"))


# -- concurrent runs: each pause goes through its own run ----------------------------------


def test_concurrent_runs_on_two_threads_each_pause_their_own() -> None:
    cp = InMemoryCheckpointer(lock_timeout=0)
    both = asyncio.Event()
    arrived: list[str] = []

    @tool
    async def save_point(ctx: ToolContext) -> str:
        """Checkpoint the thread now, once both runs are inside a tool."""
        arrived.append(ctx.agent.agent_id)
        if len(arrived) == 2:
            both.set()
        await both.wait()
        ctx.agent.state["who"] = ctx.agent.agent_id
        await ctx.pause()
        return "saved"

    def agent(name: str) -> Agent:
        return Agent(
            ScriptedModel([calls("save_point"), f"done {name}"]), tools=[save_point], agent_id=name
        )

    one, two = agent("one"), agent("two")

    async def scenario() -> None:
        runs = [
            asyncio.create_task(a.run(f"to {a.agent_id}", checkpointer=cp, thread_id=a.agent_id))
            for a in (one, two)
        ]
        results = await asyncio.gather(*runs)
        assert [r.text for r in results] == ["done one", "done two"]

    arun(scenario())
    for name in ("one", "two"):
        stored = some(arun(cp.load(name)))
        assert texts(stored.messages) == [f"to {name}", "", "saved", f"done {name}"]
        assert stored.state == {"who": name}


def test_one_agent_two_threads_the_winner_pauses_its_own_thread() -> None:
    """Two runs of one agent started together: one is AGENT_BUSY; the other's tool pauses
    its own thread (the loser, which held its thread a moment, changes nothing)."""
    cp = InMemoryCheckpointer(lock_timeout=0.5)

    @tool
    async def save_point(ctx: ToolContext) -> str:
        """Checkpoint the thread now, through the context and through the agent."""
        await ctx.pause()
        thread = "t1" if await cp.load("t1") is not None else "t2"
        await ctx.agent.pause(thread, checkpointer=cp)  # the same, through the agent
        return thread

    agent = Agent(ScriptedModel([calls("save_point"), "done"]), tools=[save_point])

    async def scenario() -> list[Any]:
        runs = [
            asyncio.create_task(agent.run("go", checkpointer=cp, thread_id=t)) for t in ("t1", "t2")
        ]
        return await asyncio.gather(*runs, return_exceptions=True)

    outcomes = arun(scenario())
    finished = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(finished) == 1 and finished[0].text == "done"
    paused = next(m.text for m in finished[0].messages if m.role == "tool")
    assert arun(cp.list_threads()) == [paused]


# -- agent.pause on a stream's terminal event -------------------------------------------


@pytest.mark.parametrize("terminal", ["run_finished", "interrupt"])
def test_a_stream_consumer_pauses_on_the_terminal_event_without_waiting(terminal: str) -> None:
    # lock_timeout=0: the thread is let go before the terminal event is yielded.
    cp = InMemoryCheckpointer(lock_timeout=0)

    @tool(requires_approval=True)
    def publish() -> str:
        """Publish (needs approval)."""
        return "published"

    replies: list[Any] = [calls("publish")] if terminal == "interrupt" else ["answer"]
    agent = Agent(ScriptedModel(replies), tools=[publish], state={"k": 1})

    async def main() -> list[str]:
        types: list[str] = []
        stream = agent.stream("go", checkpointer=cp, thread_id="t")
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                types.append(event.type)
                if event.type == terminal:
                    agent.state["k"] = 2
                    await agent.pause("t", checkpointer=cp)
        return types

    assert arun(main())[-1] == terminal
    stored = some(arun(cp.load("t")))
    assert stored.state == {"k": 2} and stored.pending is None


def test_run_raises_the_interrupt_after_letting_the_thread_go() -> None:
    cp = InMemoryCheckpointer(lock_timeout=0)

    @tool(requires_approval=True)
    def publish() -> str:
        """Publish (needs approval)."""
        return "published"

    agent = Agent(ScriptedModel([calls("publish")]), tools=[publish])

    async def main() -> None:
        with pytest.raises(HitlInterrupt):
            await agent.run("go", checkpointer=cp, thread_id="t")
        await agent.pause("t", checkpointer=cp)  # the lock is free: no THREAD_BUSY

    arun(main())


# -- pausing a thread with no checkpoint --------------------------------------------------


def test_a_pause_never_copies_another_threads_history(cp: FileCheckpointer) -> None:
    agent = Agent(ScriptedModel(["a1"]))
    arun(agent.run("u1", checkpointer=cp, thread_id="t1"))
    with pytest.raises(CheckpointMissingError) as err:
        arun(agent.pause("t2", checkpointer=cp))
    assert err.value.code == "CHECKPOINT_MISSING" and "'t1'" in str(err.value)
    assert arun(cp.load("t2")) is None
    arun(agent.pause("t1", checkpointer=cp))  # its own thread pauses as always
    assert texts(some(arun(cp.load("t1"))).messages) == ["u1", "a1"]


def test_an_interrupted_threads_history_is_not_copied_either(cp: FileCheckpointer) -> None:
    @tool(requires_approval=True)
    def publish() -> str:
        """Publish (needs approval)."""
        return "published"

    agent = Agent(ScriptedModel([calls("publish")]), tools=[publish])
    with pytest.raises(HitlInterrupt):
        arun(agent.run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(CheckpointMissingError):
        arun(agent.pause("t2", checkpointer=cp))
    # A resume that surfaces the interrupt again leaves the history the thread's too.
    with pytest.raises(HitlInterrupt):
        arun(agent.resume("t1", {new_interrupt_id(): "approve"}, checkpointer=cp))
    with pytest.raises(CheckpointMissingError):
        arun(agent.pause("t2", checkpointer=cp))
    assert arun(cp.list_threads()) == ["t1"]


def test_the_agents_own_history_is_parked_under_a_new_thread(cp: FileCheckpointer) -> None:
    agent = Agent(ScriptedModel(["a1", "a2"]))
    arun(agent.run("u1", checkpointer=cp, thread_id="t1"))
    arun(agent.run("u2"))  # no thread: the history is the agent's own from here
    arun(agent.pause("parked", checkpointer=cp))
    assert texts(some(arun(cp.load("parked"))).messages) == ["u1", "a1", "u2", "a2"]


def test_a_thread_whose_checkpoint_was_deleted_is_paused_again(cp: FileCheckpointer) -> None:
    agent = Agent(ScriptedModel(["a1"]))
    arun(agent.run("u1", checkpointer=cp, thread_id="t1"))
    arun(cp.delete("t1"))
    arun(agent.pause("t1", checkpointer=cp))
    assert texts(some(arun(cp.load("t1"))).messages) == ["u1", "a1"]


def test_a_pause_with_nothing_to_save_is_checkpoint_missing(cp: FileCheckpointer) -> None:
    with pytest.raises(CheckpointMissingError):
        arun(Agent(ScriptedModel([])).pause("nope", checkpointer=cp))
    assert arun(cp.list_threads()) == []


def test_an_edit_makes_the_history_the_agents_own(cp: FileCheckpointer) -> None:
    agent = Agent(ScriptedModel(["a1"]))
    arun(agent.run("u1", checkpointer=cp, thread_id="t1"))
    arun(agent.edit_message(0, "u1, edited"))
    arun(agent.pause("t2", checkpointer=cp))
    assert texts(some(arun(cp.load("t2"))).messages) == ["u1, edited", "a1"]
