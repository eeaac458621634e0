"""Checkpointed threads: continue, lock, pause/resume, checkpointed interrupts, decisions,
the at-most-once protocol (in process; real crashes are in test_agent_threads_crash.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from threads_scenario import CrashingCheckpointer, effects, publishing_agent

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    InMemoryMemory,
    Message,
    NullConversationManager,
    ScriptedModel,
    ToolCall,
    hitl_key,
    is_well_formed,
    tool,
)
from framework_agents.agent import ToolContext
from framework_agents.checkpoint import InMemoryCheckpointer, ThreadCheckpoint
from framework_agents.errors import (
    AgentBusyError,
    CheckpointCorruptError,
    CheckpointMissingError,
    HitlDecisionError,
    InvalidArgumentError,
    ModelError,
    ThreadBusyError,
    ThreadIdInvalidError,
)
from framework_agents.models._base import ToolSpec


def interrupt_of(coro: Any) -> HitlInterrupt:
    with pytest.raises(HitlInterrupt) as info:
        arun(coro)
    return info.value


@pytest.fixture
def cp(tmp_path: Path) -> FileCheckpointer:
    return FileCheckpointer(tmp_path / "cp")


@pytest.fixture
def fx(tmp_path: Path) -> Path:
    return tmp_path / "effects.txt"


def reply_with_history(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    return f"seen {len(messages)}: " + "|".join(m.text for m in messages if m.role == "user")


# -- threads -------------------------------------------------------------------------


def test_a_run_saves_the_thread_and_the_next_run_continues_it(cp: FileCheckpointer) -> None:
    first = Agent(FunctionModel(reply_with_history), state={"visits": 1})
    arun(first.run("hello", checkpointer=cp, thread_id="t1"))
    saved = arun(cp.load("t1"))
    assert saved is not None and saved.pending is None
    assert [m.text for m in saved.messages] == ["hello", "seen 1: hello"]
    assert saved.state == {"visits": 1}

    second = Agent(FunctionModel(reply_with_history))  # another process, a fresh agent
    result = arun(second.run("again", checkpointer=cp, thread_id="t1"))
    assert result.text == "seen 3: hello|again"
    assert second.state.to_dict() == {"visits": 1}
    assert [m.text for m in arun(second.memory.load())] == [m.text for m in result.messages]
    assert result is not None
    assert [m.text for m in some(arun(cp.load("t1"))).messages] == [m.text for m in result.messages]
    assert [e.kind for e in second.timeline] == ["run"]


def test_a_run_takes_its_thread_in_one_hand_off_and_lets_it_go_with_its_last_save(
    cp: FileCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run lock and the load are one worker call; the last save is the other (its
    # write lock, the write, and letting the thread go).
    from framework_agents._persist import _io
    from framework_agents.checkpoint import file, lock

    agent = Agent(FunctionModel(reply_with_history), conversation_manager=NullConversationManager())
    arun(agent.run("one", checkpointer=cp, thread_id="t1"))
    calls: list[str] = []
    real = _io.run_blocking

    async def counted(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kw)

    for module in (lock, file):
        monkeypatch.setattr(module, "run_blocking", counted)
    result = arun(agent.run("two", checkpointer=cp, thread_id="t1"))
    assert result.text == "seen 3: one|two"  # it started from the stored thread
    assert calls == ["_acquire_then", "_call_if_free"]
    assert not (cp.thread_dir("t1") / "run.lock").exists()
    stored = arun(cp.load("t1"))
    assert stored is not None and [m.text for m in stored.messages][-1] == "seen 3: one|two"


def test_a_pause_after_the_last_save_let_the_thread_go_takes_the_lock(
    cp: FileCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The finished run's last save released run.lock; a stream consumer pausing on the
    # terminal event must then take the lock like anyone else (another process may
    # already run the thread), not save as if its run still held it.
    agent = Agent(FunctionModel(reply_with_history), conversation_manager=NullConversationManager())
    held_while_saving: list[bool] = []
    real = FileCheckpointer.save

    async def save(self: FileCheckpointer, checkpoint: ThreadCheckpoint) -> None:
        held_while_saving.append((self.thread_dir(checkpoint.thread_id) / "run.lock").exists())
        await real(self, checkpoint)

    async def main() -> None:
        async with contextlib.aclosing(agent.stream("q", checkpointer=cp, thread_id="t")) as s:
            async for event in s:
                if event.type == "run_finished":
                    monkeypatch.setattr(FileCheckpointer, "save", save)
                    await asyncio.wait_for(agent.pause("t", checkpointer=cp), 5)

    arun(main())
    assert held_while_saving == [True]
    assert not (cp.thread_dir("t") / "run.lock").exists()


def test_a_wrapper_forwarding_to_a_file_checkpointer_keeps_its_own_steps(tmp_path: Path) -> None:
    class Counting:
        def __init__(self, inner: FileCheckpointer) -> None:
            self.inner = inner
            self.saves = 0

        async def save(self, checkpoint: ThreadCheckpoint) -> None:
            self.saves += 1
            await self.inner.save(checkpoint)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    wrapper = Counting(FileCheckpointer(tmp_path / "cp"))
    agent = Agent(FunctionModel(reply_with_history), conversation_manager=NullConversationManager())
    arun(agent.run("one", checkpointer=wrapper, thread_id="t"))
    arun(agent.run("two", checkpointer=wrapper, thread_id="t"))
    assert wrapper.saves == 2  # the last save of each run went through the wrapper

    patched = FileCheckpointer(tmp_path / "cp2")
    seen: list[str] = []
    real_save = patched.save

    async def counted(checkpoint: ThreadCheckpoint) -> None:
        seen.append(checkpoint.thread_id)
        await real_save(checkpoint)

    patched.save = counted  # type: ignore[method-assign]
    arun(agent.run("three", checkpointer=patched, thread_id="u"))
    assert seen == ["u"]


def test_a_corrupt_checkpoint_fails_the_run_and_frees_the_thread(cp: FileCheckpointer) -> None:
    agent = Agent(FunctionModel(reply_with_history), conversation_manager=NullConversationManager())
    arun(agent.run("one", checkpointer=cp, thread_id="t1"))
    path = cp.path("t1")
    path.write_bytes(b"{not json")
    for _ in range(2):  # the lock taken with the failed load was given back
        with pytest.raises(CheckpointCorruptError):
            arun(agent.run("two", checkpointer=cp, thread_id="t1"))
    assert path.read_bytes() == b"{not json"
    assert not (path.parent / "run.lock").exists()


def test_a_thread_wins_over_memory_and_a_new_thread_starts_from_memory(
    cp: FileCheckpointer,
) -> None:
    agent = Agent(FunctionModel(reply_with_history))
    arun(agent.run("plain", checkpointer=None))
    arun(agent.run("threaded", checkpointer=cp, thread_id="fresh"))
    assert some(arun(cp.load("fresh"))).messages[0].text == "plain"  # started from memory
    other = Agent(FunctionModel(reply_with_history), memory=InMemoryMemory())
    arun(other.run("x", checkpointer=cp, thread_id="fresh"))
    assert [m.text for m in some(arun(cp.load("fresh"))).messages][:2] == ["plain", "seen 1: plain"]


def test_two_runs_of_one_thread_never_interleave(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path / "cp")
    events: list[str] = []

    async def main() -> None:
        gate, inside = asyncio.Event(), asyncio.Event()

        async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            events.append("first in")
            inside.set()
            await gate.wait()
            events.append("first out")
            return "one"

        def fast(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            events.append("second in")
            return "two"

        one = asyncio.create_task(
            Agent(FunctionModel(slow)).run("a", checkpointer=cp, thread_id="t")
        )
        await inside.wait()
        two = asyncio.create_task(
            Agent(FunctionModel(fast)).run("b", checkpointer=cp, thread_id="t")
        )
        for _ in range(20):
            await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(one, two)

    arun(main())
    assert events == ["first in", "first out", "second in"]
    texts = [m.text for m in some(arun(cp.load("t"))).messages]
    assert texts == ["a", "one", "b", "two"]


def test_a_second_run_gives_up_with_thread_busy(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path / "cp", lock_timeout=0.2)

    async def main() -> None:
        gate, inside = asyncio.Event(), asyncio.Event()

        async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            inside.set()
            await gate.wait()
            return "one"

        first = asyncio.create_task(
            Agent(FunctionModel(slow)).run("a", checkpointer=cp, thread_id="t")
        )
        await inside.wait()
        with pytest.raises(ThreadBusyError) as err:
            await Agent(ScriptedModel(["x"])).run("b", checkpointer=cp, thread_id="t")
        assert err.value.code == "THREAD_BUSY"
        gate.set()
        await first

    arun(main())


def test_a_busy_agent_is_refused_at_once(cp: FileCheckpointer) -> None:
    async def main() -> None:
        gate, started = asyncio.Event(), asyncio.Event()

        async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            started.set()
            await gate.wait()
            return "one"

        agent = Agent(FunctionModel(slow))
        task = asyncio.create_task(agent.run("a", checkpointer=cp, thread_id="t"))
        await started.wait()
        with pytest.raises(AgentBusyError):
            await agent.run("b", checkpointer=cp, thread_id="other")
        gate.set()
        await task

    arun(main())


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        pytest.param({"thread_id": "../x"}, ThreadIdInvalidError, id="unsafe-id"),
        pytest.param({"thread_id": None}, InvalidArgumentError, id="no-id"),
    ],
)
def test_bad_thread_arguments(cp: FileCheckpointer, kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        arun(Agent(ScriptedModel(["x"])).run("q", checkpointer=cp, **kwargs))
    with pytest.raises(error):
        arun(Agent(ScriptedModel(["x"])).resume(kwargs["thread_id"], checkpointer=cp))


def test_stream_with_a_thread(cp: FileCheckpointer) -> None:
    async def main() -> list[str]:
        agent = Agent(ScriptedModel(["streamed"]))
        return [e.type async for e in agent.stream("q", checkpointer=cp, thread_id="s")]

    kinds = arun(main())
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert some(arun(cp.load("s"))).messages[-1].text == "streamed"


def test_a_stream_closed_early_frees_the_thread_and_the_agent(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path / "cp", lock_timeout=0)

    async def main() -> str:
        agent = Agent(ScriptedModel(["one"]))
        async with contextlib.aclosing(agent.stream("q", checkpointer=cp, thread_id="t")) as s:
            async for _ in s:
                break
        assert not agent.running
        return (
            await Agent(ScriptedModel(["two"])).run("again", checkpointer=cp, thread_id="t")
        ).text

    assert arun(main()) == "two"


# -- pause / resume ------------------------------------------------------------------


def test_pause_then_resume_in_another_agent(cp: FileCheckpointer) -> None:
    agent = Agent(ScriptedModel(["first answer"]), state={"step": 1})
    arun(agent.run("start"))
    agent.state["step"] = 2
    arun(agent.pause("p1", checkpointer=cp))
    saved = arun(cp.load("p1"))
    assert saved is not None
    assert saved.pending is None and saved.state == {"step": 2}
    assert saved is not None
    assert [m.text for m in saved.messages] == ["start", "first answer"]

    seen: list[list[str]] = []

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        seen.append([m.text for m in messages])
        return "continued"

    resumed = Agent(FunctionModel(model))
    result = arun(resumed.resume("p1", checkpointer=cp))
    assert seen == [["start", "first answer"]]  # no new user message
    assert result.text == "continued"
    assert resumed.state.to_dict() == {"step": 2}
    assert [m.text for m in arun(resumed.memory.load())] == ["start", "first answer", "continued"]
    assert [(e.kind, e.label) for e in resumed.timeline] == [("resume", None)]
    assert some(arun(cp.load("p1"))).messages[-1].text == "continued"


@pytest.mark.parametrize("make", [FileCheckpointer, lambda root: InMemoryCheckpointer()])
def test_resume_of_an_unknown_thread_is_checkpoint_missing(
    tmp_path: Path, make: Callable[[Path], Any]
) -> None:
    with pytest.raises(CheckpointMissingError) as err:
        arun(Agent(ScriptedModel(["x"])).resume("nope", checkpointer=make(tmp_path)))
    assert err.value.code == "CHECKPOINT_MISSING"


def test_pause_from_inside_the_threads_own_run_does_not_deadlock(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path / "cp", lock_timeout=0.5)

    @tool
    async def checkpoint_now(ctx: ToolContext) -> str:
        """Pause the thread from inside the run."""
        await ctx.agent.pause("own", checkpointer=cp)
        return "paused"

    model = ScriptedModel(
        [Message("assistant", "", tool_calls=[ToolCall("c1", "checkpoint_now", {})]), "done"]
    )
    agent = Agent(model, tools=[checkpoint_now], state={"k": 1})
    result = arun(agent.run("go", checkpointer=cp, thread_id="own"))
    assert [m.text for m in result.messages if m.role == "tool"] == ["paused"]
    assert result.text == "done"
    # A pause of the same thread from elsewhere during a run waits like a run would.
    other = FileCheckpointer(tmp_path / "cp", lock_timeout=0.2)

    async def contended() -> None:
        gate, inside = asyncio.Event(), asyncio.Event()

        async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            inside.set()
            await gate.wait()
            return "x"

        task = asyncio.create_task(
            Agent(FunctionModel(slow)).run("a", checkpointer=cp, thread_id="own")
        )
        await inside.wait()
        with pytest.raises(ThreadBusyError):
            await Agent(ScriptedModel([])).pause("own", checkpointer=other)
        gate.set()
        await task

    arun(contended())


# -- checkpointed interrupts and decisions ----------------------------------------


def test_the_interrupt_saves_history_before_the_turn_and_the_pending_call(
    cp: FileCheckpointer, fx: Path
) -> None:
    agent = publishing_agent(fx)
    interrupt = interrupt_of(agent.run("publish it", checkpointer=cp, thread_id="t1"))
    assert (interrupt.tool, interrupt.arguments, interrupt.thread_id) == (
        "publish",
        {"text": "hello"},
        "t1",
    )
    assert interrupt.key == hitl_key("publish", {"text": "hello"})
    assert interrupt.outcome_unknown is False
    saved = arun(cp.load("t1"))
    assert saved is not None
    assert [m.text for m in saved.messages] == ["publish it"]  # the calling turn is excluded
    assert saved is not None
    assert saved.pending == ToolCall(interrupt.call_id, "publish", {"text": "hello"})
    assert saved is not None
    assert saved.turn is None and saved.in_flight == []
    assert [m.text for m in agent.messages] == ["publish it"]
    assert effects(fx) == []


@pytest.mark.parametrize(
    ("decision", "expected_effects", "expected_text"),
    [
        pytest.param("approve", ["hello"], "finished: published hello", id="approve-wildcard"),
        pytest.param({"edit": {"text": "bye"}}, ["bye"], "finished: published bye", id="edit"),
        pytest.param({"reject": "not today"}, [], "finished: Rejected: not today", id="reject"),
    ],
)
def test_resume_applies_the_decision_to_the_reissued_call(
    cp: FileCheckpointer, fx: Path, decision: Any, expected_effects: list[str], expected_text: str
) -> None:
    interrupt_of(publishing_agent(fx).run("publish it", checkpointer=cp, thread_id="t1"))
    resumed = publishing_agent(fx)
    result = arun(resumed.resume("t1", {"publish": decision}, checkpointer=cp))
    assert result.text == expected_text
    assert effects(fx) == expected_effects
    saved = arun(cp.load("t1"))
    assert saved is not None
    assert saved.pending is None and saved.turn is None and saved.decisions == {}
    assert saved is not None
    assert is_well_formed(saved.messages)
    assert [(e.kind, e.label) for e in resumed.timeline] == [("resume", None)]


def test_the_whole_flow_with_an_in_memory_checkpointer(fx: Path) -> None:
    cp = InMemoryCheckpointer()
    interrupt = interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="m"))
    assert some(arun(cp.load("m"))).pending is not None and interrupt.thread_id == "m"
    result = arun(publishing_agent(fx).resume("m", {"publish": "approve"}, checkpointer=cp))
    assert result.text == "finished: published hello" and effects(fx) == ["hello"]
    assert arun(cp.list_threads()) == ["m"]


def test_resume_with_the_exact_key(cp: FileCheckpointer, fx: Path) -> None:
    interrupt = interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    result = arun(publishing_agent(fx).resume("t1", {interrupt.key: "approve"}, checkpointer=cp))
    assert result.text == "finished: published hello" and effects(fx) == ["hello"]


def test_resume_without_a_decision_interrupts_again(cp: FileCheckpointer, fx: Path) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    again = interrupt_of(publishing_agent(fx).resume("t1", checkpointer=cp))
    assert again.tool == "publish" and again.thread_id == "t1"
    assert some(arun(cp.load("t1"))).pending is not None
    assert effects(fx) == []


def test_a_decision_the_tool_does_not_allow_is_hitl_decision(cp: FileCheckpointer) -> None:
    @tool(requires_approval=True, allowed_decisions=("approve", "reject"))
    def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "user":
            return Message("assistant", "", tool_calls=[ToolCall("w", "wire", {"amount": 5})])
        return "ok"

    interrupt_of(
        Agent(FunctionModel(model), tools=[wire]).run("pay", checkpointer=cp, thread_id="w")
    )
    with pytest.raises(HitlDecisionError) as err:
        arun(
            Agent(FunctionModel(model), tools=[wire]).resume(
                "w", {"wire": {"edit": {"amount": 500}}}, checkpointer=cp
            )
        )
    assert err.value.code == "HITL_DECISION"


def two_approval_agent(ran: list[str], **kwargs: Any) -> Agent:
    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send mail."""
        ran.append(f"send {to}")
        return f"sent to {to}"

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "user":
            calls = [
                ToolCall(f"s{len(ran)}", "send", {"to": "bob"}),
                ToolCall(f"p{len(ran)}", "pay", {"amount": 3}),
            ]
            return Message("assistant", "", tool_calls=calls)
        return "both done: " + ", ".join(m.text for m in messages if m.role == "tool")

    return Agent(FunctionModel(model), tools=[send, pay], **kwargs)


def test_several_approval_calls_are_decided_one_by_one(cp: FileCheckpointer) -> None:
    ran: list[str] = []
    first = interrupt_of(two_approval_agent(ran).run("do both", checkpointer=cp, thread_id="m"))
    assert first.tool == "send"
    second = interrupt_of(two_approval_agent(ran).resume("m", {"send": "approve"}, checkpointer=cp))
    assert second.tool == "pay" and ran == []  # nothing of the turn ran yet
    assert some(arun(cp.load("m"))).decisions == {"send": "approve"}  # carried to the next resume
    result = arun(two_approval_agent(ran).resume("m", {"pay": "approve"}, checkpointer=cp))
    assert sorted(ran) == ["pay 3", "send bob"]
    assert result.text == "both done: sent to bob, paid 3"
    assert some(arun(cp.load("m"))).decisions == {}


def test_decisions_for_all_calls_in_one_resume(cp: FileCheckpointer) -> None:
    ran: list[str] = []
    interrupt_of(two_approval_agent(ran).run("do both", checkpointer=cp, thread_id="m"))
    decisions = {"send": "approve", hitl_key("pay", {"amount": 3}): {"reject": "too much"}}
    result = arun(two_approval_agent(ran).resume("m", decisions, checkpointer=cp))
    assert ran == ["send bob"]
    assert result.text == "both done: sent to bob, Rejected: too much"


# -- at most once (in process) ------------------------------------------------------


class Crash(BaseException):
    """Stands in for a process dying: nothing in the framework catches it."""


def test_the_in_flight_record_is_saved_before_the_tool_and_the_result_before_going_on(
    tmp_path: Path,
) -> None:
    root = tmp_path / "cp"
    observed: dict[str, ThreadCheckpoint | None] = {}

    @tool(requires_approval=True)
    async def publish(text: str) -> str:
        """Publish."""
        observed["during"] = await FileCheckpointer(root).load("t1")  # what a crash would leave
        return "published"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "user":
            return Message("assistant", "", tool_calls=[ToolCall("c9", "publish", {"text": "x"})])
        return "done"

    async def after_model_sees_result(
        messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Message | str:
        if messages[-1].role == "tool":
            observed["next_turn"] = await FileCheckpointer(root).load("t1")
        return model(messages, tools)

    cp = CrashingCheckpointer(root)
    agent = Agent(
        FunctionModel(after_model_sees_result), tools=[publish], decide=lambda n, a: "approve"
    )
    arun(agent.run("go", checkpointer=cp, thread_id="t1"))
    during, after = some(observed["during"]), some(observed["next_turn"])
    assert [c.id for c in during.in_flight] == ["c9"] and during.results == []
    assert [m.text for m in during.messages] == ["go"] and during.turn is not None
    assert after.in_flight == [] and [r.text for r in after.results] == ["published"]
    # Both were deltas: the history before the turn went to disk once.
    assert cp.delta_saves >= 2


def test_a_result_saved_is_never_run_again_after_a_later_failure(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))

    failing = publishing_agent(fx)
    calls = {"n": 0}
    real = failing.model.fn  # type: ignore[attr-defined]

    def flaky(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        calls["n"] += 1
        if messages[-1].role == "tool":
            raise ModelError("the provider fell over")
        answer: Message | str = real(messages, tools)
        return answer

    failing.model.fn = flaky  # type: ignore[attr-defined]
    with pytest.raises(ModelError):
        arun(failing.resume("t1", {"publish": "approve"}, checkpointer=cp))
    assert effects(fx) == ["hello"]
    saved = arun(cp.load("t1"))
    assert saved is not None
    assert saved.in_flight == [] and [r.text for r in saved.results] == ["published hello"]
    result = arun(publishing_agent(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    assert result.text == "finished: published hello"
    assert effects(fx) == ["hello"]  # not run again
    assert is_well_formed(result.messages)


def crash_in_tool(fx: Path) -> Agent:
    agent = publishing_agent(fx)

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish, then die before returning."""
        with open(fx, "a") as fh:
            fh.write(text + "\n")
        raise Crash

    agent._tools_by_name["publish"] = publish
    return agent


def test_an_unknown_outcome_is_surfaced_not_rerun_then_rejected(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(Crash):
        arun(crash_in_tool(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    assert effects(fx) == ["hello"]
    assert [c.name for c in some(arun(cp.load("t1"))).in_flight] == ["publish"]

    # The same decisions again (a retry): surfaced, not re-run; nor by the decide callback.
    retry = publishing_agent(fx, decide=lambda name, args: "approve")
    unknown = interrupt_of(retry.resume("t1", {"publish": "approve"}, checkpointer=cp))
    assert unknown.outcome_unknown is True and unknown.tool == "publish"
    assert "unknown" in str(unknown) and unknown.thread_id == "t1"
    assert effects(fx) == ["hello"]
    marked = arun(cp.load("t1"))
    assert marked is not None
    assert marked.outcome_unknown and marked.pending is not None and marked.decisions == {}
    assert [(e.kind, e.label) for e in retry.timeline] == [("resume", "outcome_unknown")]
    assert [m.text for m in retry.messages] == ["go"]
    again = interrupt_of(
        publishing_agent(fx, decide=lambda n, a: "approve").resume("t1", checkpointer=cp)
    )
    assert again.outcome_unknown  # the decide callback never settles an unknown outcome

    # Only a decision naming the open interrupt's id settles an unknown outcome.
    assert again.key == again.interrupt_id == unknown.interrupt_id
    result = arun(
        publishing_agent(fx).resume(
            "t1", {again.key: {"reject": "it may have gone out"}}, checkpointer=cp
        )
    )
    assert effects(fx) == ["hello"]
    assert result.text == "finished: Rejected: it may have gone out"
    final = arun(cp.load("t1"))
    assert final is not None
    assert final.in_flight == [] and not final.outcome_unknown and is_well_formed(final.messages)
    assert final is not None
    tool_results = [m for m in final.messages if m.role == "tool"]
    assert len(tool_results) == 1


def test_an_unknown_outcome_may_be_rerun_on_explicit_approval(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(Crash):
        arun(crash_in_tool(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    unknown = interrupt_of(publishing_agent(fx).resume("t1", checkpointer=cp))
    result = arun(publishing_agent(fx).resume("t1", {unknown.key: "approve"}, checkpointer=cp))
    assert effects(fx) == ["hello", "hello"]  # the human asked for it twice, knowingly
    assert result.text == "finished: published hello"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


def test_a_new_prompt_on_a_thread_with_an_unknown_outcome_surfaces_it(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(Crash):
        arun(crash_in_tool(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    agent = publishing_agent(fx)
    unknown = interrupt_of(agent.run("something else", checkpointer=cp, thread_id="t1"))
    assert unknown.outcome_unknown
    assert [(e.kind, e.label) for e in agent.timeline] == [("run", "outcome_unknown")]
    assert effects(fx) == ["hello"]


def test_a_stream_ends_on_the_interrupt_of_an_unknown_outcome(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(Crash):
        arun(crash_in_tool(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))

    async def main() -> list[Any]:
        agent = publishing_agent(fx)
        return [e async for e in agent.stream(None, checkpointer=cp, thread_id="t1")]

    events = arun(main())
    assert [e.type for e in events] == ["run_started", "interrupt"]
    assert events[1].interrupt.outcome_unknown and events[0].thread_id == "t1"


def test_a_pause_keeps_an_unknown_outcome(cp: FileCheckpointer, fx: Path) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(Crash):
        arun(crash_in_tool(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    arun(Agent(ScriptedModel([])).pause("t1", checkpointer=cp))
    assert [c.name for c in some(arun(cp.load("t1"))).in_flight] == ["publish"]
    assert interrupt_of(
        publishing_agent(fx).resume("t1", {"publish": "approve"}, checkpointer=cp)
    ).outcome_unknown


def test_an_abandoned_pending_call_is_dropped_by_a_new_prompt(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    plain = Agent(FunctionModel(reply_with_history), conversation_manager=NullConversationManager())
    result = arun(plain.run("never mind", checkpointer=cp, thread_id="t1"))
    assert result.text == "seen 2: go|never mind"
    assert some(arun(cp.load("t1"))).pending is None


def test_a_pause_from_another_task_goes_through_the_agents_own_run() -> None:
    """``agent.pause`` of the thread its own run holds saves that run's progress at once.

    It neither waits for the lock its own run holds (a tool calling it would wait for
    itself) nor saves the history from before the run (an earlier bug found by a review):
    it saves what ``ctx.pause()`` would, the run's history so far.
    """
    cp = InMemoryCheckpointer(lock_timeout=0.2)
    inside, gate = asyncio.Event(), asyncio.Event()

    async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if messages[-1].text == "second":
            inside.set()
            await gate.wait()
        return f"re: {messages[-1].text}"

    agent = Agent(FunctionModel(slow))

    async def scenario() -> None:
        await agent.run("first", checkpointer=cp, thread_id="t")
        run = asyncio.create_task(agent.run("second", checkpointer=cp, thread_id="t"))
        await inside.wait()
        await agent.pause("t", checkpointer=cp)
        paused = some(await cp.load("t"))
        assert [m.text for m in paused.messages] == ["first", "re: first", "second"]
        assert paused.pending is None and not paused.finished
        gate.set()
        await run

    arun(scenario())
    assert [m.text for m in some(arun(cp.load("t"))).messages][-1] == "re: second"


def test_a_losing_second_run_leaves_the_first_runs_own_pause_alone() -> None:
    """Two runs of one agent started together: the one refused AGENT_BUSY must not make the
    other's tool wait for the lock its own run holds (found by a review)."""
    loads = asyncio.Event()

    class GatedLoads(InMemoryCheckpointer):
        async def load(self, thread_id: str) -> ThreadCheckpoint | None:
            await loads.wait()
            return await super().load(thread_id)

    cp = GatedLoads(lock_timeout=0.5)
    paused: list[str] = []

    @tool
    async def checkpoint_now(ctx: ToolContext) -> str:
        """Pause the thread from inside the run."""
        await ctx.agent.pause("t1", checkpointer=cp)
        paused.append("ok")
        return "saved"

    model = ScriptedModel(
        [Message("assistant", "", tool_calls=[ToolCall("c1", "checkpoint_now", {})]), "done"]
    )
    agent = Agent(model, tools=[checkpoint_now])

    async def scenario() -> list[BaseException | Any]:
        runs = [
            asyncio.create_task(agent.run("go", checkpointer=cp, thread_id=t)) for t in ("t1", "t2")
        ]
        for _ in range(5):
            await asyncio.sleep(0)  # both runs reach their thread's load
        loads.set()
        return await asyncio.gather(*runs, return_exceptions=True)

    outcomes = arun(scenario())
    assert sum(isinstance(o, AgentBusyError) for o in outcomes) == 1
    assert [o.text for o in outcomes if not isinstance(o, BaseException)] == ["done"]
    assert paused == ["ok"]
