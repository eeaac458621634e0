"""At most once under replays: approvals bound to their interrupt, refused when nothing is
pending, ``reissue=False``, ``run(None)`` on a thread, and the coded errors that replace
silent no-ops. (Real SIGKILLs: ``test_agent_at_most_once_kills.py``.)"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest
from threads_scenario import effects, publishing_agent

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    InMemoryMemory,
    Message,
    ScriptedModel,
    ToolCall,
    tool,
)
from framework_agents.errors import (
    CheckpointMissingError,
    ContextOverflowError,
    HitlDecisionError,
    InvalidArgumentError,
)
from framework_agents.models._base import ToolSpec


class Crash(BaseException):
    """Stands in for a process dying: nothing in the framework catches it."""


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


def crash_after_effect(fx: Path) -> Agent:
    """The publishing agent whose tool does its side effect, then dies before returning."""

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish, then die."""
        with open(fx, "a") as fh:
            fh.write(text + "\n")
        raise Crash

    agent = publishing_agent(fx)
    agent._tools_by_name["publish"] = publish  # same name and schema, a dying body
    return agent


def stored(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- the two scenarios of the issue --------------------------------------------------


def test_a_stale_approval_never_settles_a_call_of_unknown_outcome(
    cp: FileCheckpointer, fx: Path
) -> None:
    first = interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    with pytest.raises(Crash):  # approved, ran, died before its result was saved
        arun(crash_after_effect(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    # The retry with the same approval surfaces the unknown outcome; say its reply is lost.
    unknown = interrupt_of(
        publishing_agent(fx).resume("t1", {"publish": "approve"}, checkpointer=cp)
    )
    assert unknown.outcome_unknown and unknown.key == unknown.interrupt_id
    assert unknown.interrupt_id != first.interrupt_id
    # Replays of the old request, by name, by exact key or by the first interrupt's id:
    # the open interrupt comes back, and nothing runs.
    replays: list[dict[str, Any]] = [
        {"publish": "approve"},
        {first.key: "approve"},
        {first.interrupt_id: "approve"},
    ]
    for replay in replays:
        again = interrupt_of(publishing_agent(fx).resume("t1", replay, checkpointer=cp))
        assert again.outcome_unknown and again.interrupt_id == unknown.interrupt_id
        assert effects(fx) == ["hello"]
    # Only a decision naming the open interrupt settles it.
    result = arun(
        publishing_agent(fx).resume("t1", {unknown.key: {"reject": "may be out"}}, checkpointer=cp)
    )
    assert result.text == "finished: Rejected: may be out"
    assert effects(fx) == ["hello"]


def test_a_double_click_resume_runs_the_call_once_and_the_second_is_refused(
    cp: FileCheckpointer, fx: Path, tmp_path: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    arun(publishing_agent(fx).resume("t1", {"publish": "approve"}, checkpointer=cp))
    before = stored(tmp_path / "cp")
    agent = publishing_agent(fx)
    with pytest.raises(HitlDecisionError, match="no pending approval"):
        arun(agent.resume("t1", {"publish": "approve"}, checkpointer=cp))
    assert effects(fx) == ["hello"]  # run once
    assert stored(tmp_path / "cp") == before  # nothing written
    assert agent.timeline == [] and arun(agent.memory.load()) == []


def test_a_double_click_after_a_reissued_call_resurfaces_instead_of_approving_it(
    cp: FileCheckpointer,
) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay ``amount``."""
        ran.append(amount)
        return f"paid {amount}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message:
        paid = sum(1 for m in messages if m.role == "tool")  # pays again and again
        return Message("assistant", tool_calls=[ToolCall(f"c{paid}", "pay", {"amount": paid})])

    def agent() -> Agent:
        return Agent(FunctionModel(model), tools=[pay])

    first = interrupt_of(agent().run("go", checkpointer=cp, thread_id="t"))
    second = interrupt_of(agent().resume("t", {first.interrupt_id: "approve"}, checkpointer=cp))
    assert ran == [0] and second.interrupt_id != first.interrupt_id
    # The same click again: it named the first interrupt, which is closed.
    replay = interrupt_of(agent().resume("t", {first.interrupt_id: "approve"}, checkpointer=cp))
    assert ran == [0]
    assert replay.interrupt_id == second.interrupt_id and replay.arguments == {"amount": 1}


def test_the_same_request_twice_runs_the_call_at_most_once(cp: FileCheckpointer, fx: Path) -> None:
    first = interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    request = {first.interrupt_id: "approve"}
    assert arun(publishing_agent(fx).resume("t1", request, checkpointer=cp)).text.startswith(
        "finished"
    )
    with pytest.raises(HitlDecisionError):
        arun(publishing_agent(fx).resume("t1", request, checkpointer=cp))
    assert effects(fx) == ["hello"]


def test_the_interrupt_id_is_stored_and_survives_pickling(cp: FileCheckpointer, fx: Path) -> None:
    first = interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    saved = arun(cp.load("t1"))
    assert saved is not None
    assert saved.interrupt_id == first.interrupt_id and saved.pending is not None
    assert saved is not None
    assert saved.pending_turn is not None and saved.pending_turn.tool_calls[0].id == first.call_id
    copy = pickle.loads(pickle.dumps(first))
    assert (copy.interrupt_id, copy.key, copy.call_id) == (
        first.interrupt_id,
        first.key,
        first.call_id,
    )


# -- approve what the human saw ------------------------------------------------------


def transfer_agent(ran: list[dict[str, Any]]) -> Agent:
    """A model that re-issues the transfer with other arguments each time it is asked."""

    @tool(requires_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Transfer ``amount`` to ``to``."""
        ran.append({"to": to, "amount": amount})
        return f"sent {amount} to {to}"

    asked = {"n": 0}

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "tool":
            return f"done: {messages[-1].text}"
        asked["n"] += 1
        amount = 10 if asked["n"] == 1 else 10_000
        call = ToolCall(f"c{asked['n']}", "transfer", {"to": "bob", "amount": amount})
        return Message("assistant", tool_calls=[call])

    return Agent(FunctionModel(model), tools=[transfer])


def test_reissue_false_runs_the_arguments_the_human_saw(cp: FileCheckpointer) -> None:
    ran: list[dict[str, Any]] = []
    agent = transfer_agent(ran)
    shown = interrupt_of(agent.run("pay bob", checkpointer=cp, thread_id="t"))
    assert shown.arguments == {"to": "bob", "amount": 10}
    result = arun(agent.resume("t", {"transfer": "approve"}, checkpointer=cp, reissue=False))
    assert ran == [{"to": "bob", "amount": 10}]
    assert result.text == "done: sent 10 to bob"
    calls = [c for m in result.messages for c in m.tool_calls]
    assert [c.id for c in calls] == [shown.call_id]  # the very call that was shown


def test_reissue_false_with_an_edit_runs_the_edited_arguments(cp: FileCheckpointer) -> None:
    ran: list[dict[str, Any]] = []
    agent = transfer_agent(ran)
    shown = interrupt_of(agent.run("pay bob", checkpointer=cp, thread_id="t"))
    edit = {shown.interrupt_id: {"edit": {"to": "bob", "amount": 5}}}
    result = arun(agent.resume("t", edit, checkpointer=cp, reissue=False))
    assert ran == [{"to": "bob", "amount": 5}]
    answer = next(m for m in result.messages if m.role == "tool")
    assert answer.metadata["edited_args"] == {"to": "bob", "amount": 5}


def test_a_bare_name_approval_in_reissue_mode_records_the_arguments_that_ran(
    cp: FileCheckpointer,
) -> None:
    ran: list[dict[str, Any]] = []
    agent = transfer_agent(ran)
    interrupt_of(agent.run("pay bob", checkpointer=cp, thread_id="t"))
    result = arun(agent.resume("t", {"transfer": "approve"}, checkpointer=cp, reissue=True))
    assert ran == [{"to": "bob", "amount": 10_000}]  # what API.md pins for a bare name
    answer = next(m for m in result.messages if m.role == "tool")
    assert answer.metadata["ran_args"] == {"to": "bob", "amount": 10_000}
    (entry,) = agent.timeline[-1:]
    assert entry.kind == "resume"
    assert [(c.name, c.args) for c in entry.ran] == [("transfer", {"to": "bob", "amount": 10_000})]


def test_an_interrupt_id_approval_in_reissue_mode_covers_only_the_arguments_shown(
    cp: FileCheckpointer,
) -> None:
    ran: list[dict[str, Any]] = []
    agent = transfer_agent(ran)
    shown = interrupt_of(agent.run("pay bob", checkpointer=cp, thread_id="t"))
    again = interrupt_of(
        agent.resume("t", {shown.interrupt_id: "approve"}, checkpointer=cp, reissue=True)
    )
    assert ran == [] and again.arguments == {"to": "bob", "amount": 10_000}


def test_reissue_must_be_a_bool(cp: FileCheckpointer) -> None:
    with pytest.raises(InvalidArgumentError):
        arun(Agent(ScriptedModel([])).resume("t", checkpointer=cp, reissue="no"))  # type: ignore[arg-type]


# -- run(None) on a thread, unknown threads ------------------------------------------


def test_run_none_on_an_interrupted_thread_ends_like_resume(tmp_path: Path) -> None:
    ends = []
    for how in ("run", "resume"):
        fx = tmp_path / f"{how}.txt"
        cp = FileCheckpointer(tmp_path / how)
        interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t"))
        agent = publishing_agent(fx)
        if how == "run":
            result = arun(
                agent.run(None, checkpointer=cp, thread_id="t", decisions={"publish": "approve"})
            )
        else:
            result = arun(agent.resume("t", {"publish": "approve"}, checkpointer=cp))
        saved = some(arun(cp.load("t")))
        ends.append(
            (
                result.text,
                [(m.role, m.text) for m in result.messages],
                [(m.role, m.text) for m in saved.messages],
                saved.pending,
                effects(fx),
                [e.kind for e in agent.timeline],
            )
        )
    assert ends[0] == ends[1]


def test_run_none_carries_the_decisions_saved_with_the_interrupt(cp: FileCheckpointer) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def one() -> str:
        """One."""
        ran.append("one")
        return "1"

    @tool(requires_approval=True)
    def two() -> str:
        """Two."""
        ran.append("two")
        return "2"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if messages[-1].role == "tool":
            return "both done"
        calls = [ToolCall("a", "one", {}), ToolCall("b", "two", {})]
        return Message("assistant", tool_calls=calls)

    def agent() -> Agent:
        return Agent(FunctionModel(model), tools=[one, two])

    interrupt_of(agent().run("go", checkpointer=cp, thread_id="t"))
    second = interrupt_of(agent().resume("t", {"one": "approve"}, checkpointer=cp))
    assert second.tool == "two" and ran == []
    result = arun(agent().run(None, checkpointer=cp, thread_id="t", decisions={"two": "approve"}))
    assert result.text == "both done" and sorted(ran) == ["one", "two"]


def test_an_unknown_thread_is_checkpoint_missing_from_run_none_resume_and_pause(
    cp: FileCheckpointer,
) -> None:
    model = ScriptedModel([])  # never called
    with pytest.raises(CheckpointMissingError):
        arun(Agent(model).run(None, checkpointer=cp, thread_id="nope"))
    with pytest.raises(CheckpointMissingError):
        arun(Agent(model).resume("nope", checkpointer=cp))
    # A pause with nothing to save would store a thread nothing can continue.
    with pytest.raises(CheckpointMissingError):
        arun(Agent(model).pause("nope", checkpointer=cp))
    assert model.calls == [] and arun(cp.load("nope")) is None


# -- no silent no-ops ----------------------------------------------------------------


def test_a_thread_id_without_a_checkpointer_is_invalid_argument() -> None:
    model = ScriptedModel(["never"])
    with pytest.raises(InvalidArgumentError, match="checkpointer"):
        arun(Agent(model).run("hi", thread_id="t"))
    assert model.calls == []


def test_a_decision_for_a_misspelled_or_unguarded_tool_is_hitl_decision(
    cp: FileCheckpointer, fx: Path
) -> None:
    interrupt_of(publishing_agent(fx).run("go", checkpointer=cp, thread_id="t1"))
    for bad in ({"pubilsh": "approve"}, {'pubilsh:{"text": "hello"}': "approve"}):
        with pytest.raises(HitlDecisionError, match="names no tool"):
            arun(publishing_agent(fx).resume("t1", bad, checkpointer=cp))
    assert some(arun(cp.load("t1"))).pending is not None and effects(fx) == []


def test_resuming_a_finished_thread_is_invalid_argument_and_a_paused_one_goes_on(
    cp: FileCheckpointer,
) -> None:
    model = ScriptedModel(["answer", "went on"])
    agent = Agent(model)
    arun(agent.run("hi", checkpointer=cp, thread_id="t"))
    assert some(arun(cp.load("t"))).finished
    attempts: list[Callable[[], Coroutine[Any, Any, object]]] = [
        lambda: Agent(model).resume("t", checkpointer=cp),
        lambda: Agent(model).run(None, checkpointer=cp, thread_id="t"),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidArgumentError, match="finished"):
            arun(attempt())
    assert len(model.calls) == 1
    arun(agent.pause("t", checkpointer=cp))  # a pause makes it resumable again
    assert not some(arun(cp.load("t"))).finished
    assert arun(Agent(model).resume("t", checkpointer=cp)).text == "went on"


def test_run_none_on_an_empty_history_is_invalid_argument() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model)
    with pytest.raises(InvalidArgumentError, match="empty"):
        arun(agent.run(None))
    assert model.calls == [] and not agent.running


def test_a_stream_closed_early_frees_the_agent() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))

    async def main() -> bool:
        stream = agent.stream("hi")
        async for _ in stream:
            break
        busy = agent.running
        await stream.aclose()
        return busy

    assert arun(main()) is True
    assert not agent.running
    assert arun(agent.run("again")).text == "one"


# -- nothing the user said is cut ----------------------------------------------------


def overflowing(limit: int, seen: list[list[str]]) -> FunctionModel:
    """A model whose context holds ``limit`` characters of message text."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        seen.append([m.text for m in messages])
        if sum(len(m.text) for m in messages) > limit:
            raise ContextOverflowError("too long")
        return "ok"

    return FunctionModel(answer)


def test_a_prompt_too_big_for_the_context_fails_and_keeps_the_conversation() -> None:
    seen: list[list[str]] = []
    memory = InMemoryMemory()
    agent = Agent(overflowing(100, seen), memory=memory)
    for i in range(4):
        arun(agent.run(f"short {i}"))
    before = agent.messages
    with pytest.raises(ContextOverflowError) as info:
        arun(agent.run("x" * 500))
    assert info.value.code == "CONTEXT_OVERFLOW"
    assert agent.messages == before and arun(memory.load()) == before  # nothing committed
    assert all(sent for sent in seen)  # never called with no message
    assert all("x" * 500 in sent for sent in seen[-3:])  # the prompt was never cut


def test_an_overflow_reduces_older_turns_but_keeps_the_prompt() -> None:
    seen: list[list[str]] = []
    agent = Agent(overflowing(60, seen))
    for i in range(6):
        arun(agent.run(f"question number {i}"))
    assert seen[-1][-1] == "question number 5"
    assert sum(len(t) for t in seen[-1]) <= 60


def test_two_calls_of_unknown_outcome_are_settled_one_named_interrupt_at_a_time(
    cp: FileCheckpointer,
) -> None:
    ran: list[str] = []
    started = asyncio.Event()

    def agent(*, crash: bool) -> Agent:
        @tool(requires_approval=True)
        async def first() -> str:
            """Runs first, dies once the other call is running too."""
            await started.wait()
            ran.append("first")
            if crash:
                raise Crash
            return "1"

        @tool(requires_approval=True)
        async def second() -> str:
            """Runs second."""
            started.set()
            ran.append("second")
            if crash:
                await asyncio.Event().wait()  # still running when the process dies
            return "2"

        def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
            if messages[-1].role == "tool":
                return "done"
            calls = [ToolCall("a", "first", {}), ToolCall("b", "second", {})]
            return Message("assistant", tool_calls=calls)

        return Agent(FunctionModel(model), tools=[first, second])

    interrupt_of(agent(crash=False).run("go", checkpointer=cp, thread_id="t"))
    with pytest.raises(Crash):
        arun(
            agent(crash=True).resume(
                "t", {"first": "approve", "second": "approve"}, checkpointer=cp
            )
        )
    assert sorted(c.name for c in some(arun(cp.load("t"))).in_flight) == ["first", "second"]
    one = interrupt_of(agent(crash=False).resume("t", checkpointer=cp))
    assert one.outcome_unknown and one.tool == "first"
    two = interrupt_of(
        agent(crash=False).resume("t", {one.key: {"reject": "ran"}}, checkpointer=cp)
    )
    assert two.outcome_unknown and two.tool == "second" and two.interrupt_id != one.interrupt_id
    # A replay of the first answer is stale now: nothing runs, nothing is settled.
    again = interrupt_of(
        agent(crash=False).resume("t", {one.key: {"reject": "ran"}}, checkpointer=cp)
    )
    assert again.interrupt_id == two.interrupt_id
    ran.clear()
    result = arun(agent(crash=False).resume("t", {two.key: {"reject": "ran"}}, checkpointer=cp))
    assert result.text == "done" and ran == []  # both settled by rejection, none re-run
    answers = [m for m in result.messages if m.role == "tool"]
    assert [m.metadata.get("kind") for m in answers] == ["rejected", "rejected"]


def test_an_approval_runs_the_call_the_human_saw_by_default(cp: FileCheckpointer) -> None:
    """The README's pattern: resume(thread, {tool: "approve"}) never runs unseen arguments."""
    ran: list[dict[str, Any]] = []
    agent = transfer_agent(ran)
    shown = interrupt_of(agent.run("pay bob", checkpointer=cp, thread_id="t"))
    result = arun(agent.resume("t", {"transfer": "approve"}, checkpointer=cp))
    assert ran == [shown.arguments] == [{"to": "bob", "amount": 10}]
    assert result.text == "done: sent 10 to bob"
