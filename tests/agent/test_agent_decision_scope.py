"""Decision scope: a decision answers the approval calls of ONE assistant turn.

A decision given to ``run(..., decisions=)`` or ``resume(thread_id, decisions)`` (by exact
key or by the bare tool name) applies to the next assistant turn that needs it; once that
turn's calls run (or are rejected) the decisions it used are spent, so a later turn that
calls the tool again goes back to the ``decide`` callback or suspends.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
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
    ToolCall,
    hitl_key,
    is_well_formed,
    tool,
)
from framework_agents.checkpoint import InMemoryCheckpointer, ThreadCheckpoint
from framework_agents.hitl import DecisionBook, resolve_decision
from framework_agents.models._base import ToolSpec

Stage = list[tuple[str, dict[str, Any]]]


def interrupt_of(coro: Any) -> HitlInterrupt:
    with pytest.raises(HitlInterrupt) as info:
        arun(coro)
    return info.value


class Crash(BaseException):
    """Stands in for a process dying: nothing in the framework catches it."""


def staged_agent(
    ran: list[str], stages: Sequence[Stage], *, crash_on: set[str] | None = None, **kwargs: Any
) -> Agent:
    """Approval tools ``publish``/``send``/``pay``; the model's k-th tool turn is ``stages[k]``.

    The stage is the number of tool turns already in the history the model is sent, so a
    resumed model re-issues an interrupted turn (with fresh call ids) and goes on after a
    finished one. ``crash_on`` holds texts whose ``publish`` dies after its side effect.
    """
    ids = itertools.count()

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a text."""
        ran.append(f"publish {text}")
        if crash_on and text in crash_on:
            crash_on.discard(text)
            raise Crash
        return f"published {text}"

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
        stage = sum(1 for m in messages if m.role == "assistant" and m.tool_calls)
        if stage < len(stages):
            calls = [ToolCall(f"c{next(ids)}", name, args) for name, args in stages[stage]]
            return Message("assistant", "", tool_calls=calls)
        return "done: " + ", ".join(m.text for m in messages if m.role == "tool")

    return Agent(FunctionModel(model), tools=[publish, send, pay], **kwargs)


TWICE: list[Stage] = [[("publish", {"text": "first"})], [("publish", {"text": "second"})]]


# -- without a checkpointer ----------------------------------------------------------


def test_a_wildcard_approval_does_not_approve_a_later_turn() -> None:
    ran: list[str] = []
    agent = staged_agent(ran, TWICE)
    decisions = {"publish": "approve"}
    interrupt = interrupt_of(agent.run("go", decisions=decisions))
    assert (interrupt.tool, interrupt.arguments) == ("publish", {"text": "second"})
    assert ran == ["publish first"]
    assert decisions == {"publish": "approve"}  # the caller's mapping is left alone
    assert [m.role for m in agent.messages] == ["user", "assistant", "tool"]
    assert is_well_formed(agent.messages)


def test_a_later_turn_goes_back_to_the_decide_callback() -> None:
    ran: list[str] = []
    asked: list[dict[str, Any]] = []

    def decide(name: str, args: dict[str, Any]) -> Any:
        asked.append(args)
        return {"reject": "once is enough"}

    same_twice: list[Stage] = [[("publish", {"text": "x"})], [("publish", {"text": "x"})]]
    exact = {hitl_key("publish", {"text": "x"}): "approve"}
    result = arun(staged_agent(ran, same_twice, decide=decide).run("go", decisions=exact))
    assert ran == ["publish x"]
    assert asked == [{"text": "x"}]  # the second, identical call was asked about
    assert result.text == "done: published x, Rejected: once is enough"


def test_one_wildcard_covers_every_call_of_one_turn_only() -> None:
    ran: list[str] = []
    stages: list[Stage] = [
        [("publish", {"text": "a"}), ("publish", {"text": "b"})],
        [("publish", {"text": "c"})],
    ]
    agent = staged_agent(ran, stages)
    interrupt = interrupt_of(agent.run("go", decisions={"publish": "approve"}))
    assert sorted(ran) == ["publish a", "publish b"]
    assert interrupt.arguments == {"text": "c"}


def test_a_decision_no_turn_needed_yet_waits_for_the_turn_that_needs_it() -> None:
    ran: list[str] = []
    stages: list[Stage] = [[("publish", {"text": "a"})], [("send", {"to": "bob"})]]
    decisions = {"publish": "approve", "send": "approve", hitl_key("pay", {"amount": 1}): "approve"}
    result = arun(staged_agent(ran, stages).run("go", decisions=decisions))
    assert ran == ["publish a", "send bob"]
    assert result.text == "done: published a, sent to bob"


def test_only_the_decisions_a_turn_used_are_spent() -> None:
    ran: list[str] = []
    stages: list[Stage] = [[("publish", {"text": "a"})], [("publish", {"text": "b"})]]
    decisions = {hitl_key("publish", {"text": "a"}): "approve", "publish": {"reject": "no"}}
    result = arun(staged_agent(ran, stages).run("go", decisions=decisions))
    assert ran == ["publish a"]  # the exact key ran "a"; the unused wildcard answered "b"
    assert result.text == "done: published a, Rejected: no"


def test_the_decision_book_spends_keys_and_reports_the_key_it_matched() -> None:
    book = DecisionBook({"publish": "approve", "other": "approve"})
    publish = staged_agent([], [])._tools_by_name["publish"]
    decision = arun(resolve_decision(publish, {"text": "a"}, decisions=book, decide=None))
    assert (decision.kind, decision.source, decision.key) == ("approve", "wildcard", "publish")
    book.consume([some(decision.key)])
    assert dict(book) == {"other": "approve"}
    after = arun(resolve_decision(publish, {"text": "a"}, decisions=book, decide=None))
    assert after.kind == "suspend" and after.key is None


# -- with a checkpointer -------------------------------------------------------------


@pytest.fixture(params=["file", "memory"])
def cp(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "file":
        return FileCheckpointer(tmp_path / "cp")
    return InMemoryCheckpointer()


def test_a_resume_approval_does_not_approve_a_later_turn(cp: Any) -> None:
    ran: list[str] = []
    first = interrupt_of(staged_agent(ran, TWICE).run("go", checkpointer=cp, thread_id="t"))
    assert first.arguments == {"text": "first"}
    second = interrupt_of(
        staged_agent(ran, TWICE).resume("t", {"publish": "approve"}, checkpointer=cp)
    )
    assert (second.arguments, second.thread_id) == ({"text": "second"}, "t")
    assert ran == ["publish first"]
    saved = arun(cp.load("t"))
    assert saved.decisions == {} and saved.pending is not None
    assert saved.pending.args == {"text": "second"}
    result = arun(staged_agent(ran, TWICE).resume("t", {"publish": "approve"}, checkpointer=cp))
    assert ran == ["publish first", "publish second"]
    assert result.text == "done: published first, published second"


def test_a_run_approval_with_a_checkpointer_covers_one_turn(cp: Any) -> None:
    ran: list[str] = []
    agent = staged_agent(ran, TWICE)
    interrupt = interrupt_of(
        agent.run("go", checkpointer=cp, thread_id="t", decisions={"publish": "approve"})
    )
    assert interrupt.arguments == {"text": "second"} and ran == ["publish first"]
    assert some(arun(cp.load("t"))).decisions == {}


def test_calls_of_one_turn_decided_across_resumes_then_a_later_turn_asks_again(cp: Any) -> None:
    ran: list[str] = []
    stages: list[Stage] = [
        [("send", {"to": "bob"}), ("pay", {"amount": 3})],
        [("send", {"to": "bob"})],
    ]
    first = interrupt_of(staged_agent(ran, stages).run("do", checkpointer=cp, thread_id="m"))
    assert first.tool == "send"
    second = interrupt_of(
        staged_agent(ran, stages).resume("m", {"send": "approve"}, checkpointer=cp, reissue=True)
    )
    assert second.tool == "pay" and ran == []
    assert some(arun(cp.load("m"))).decisions == {"send": "approve"}  # carried within the turn
    pay_key = hitl_key("pay", {"amount": 3})
    third = interrupt_of(
        staged_agent(ran, stages).resume("m", {pay_key: "approve"}, checkpointer=cp, reissue=True)
    )
    assert sorted(ran) == ["pay 3", "send bob"]  # the first turn ran, both calls
    assert third.tool == "send" and third.call_id not in (first.call_id, second.call_id)
    assert some(arun(cp.load("m"))).decisions == {}
    result = arun(
        staged_agent(ran, stages).resume(
            "m", {"send": {"reject": "sent already"}}, checkpointer=cp, reissue=True
        )
    )
    assert sorted(ran) == ["pay 3", "send bob"]
    assert result.text == "done: sent to bob, paid 3, Rejected: sent already"


class CrashAfterResult(InMemoryCheckpointer):
    """Dies right after the first checkpoint write that holds a tool result."""

    armed = True

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        await super().save_progress(checkpoint)
        if self.armed and checkpoint.results and not checkpoint.in_flight:
            self.armed = False
            raise Crash


def test_the_checkpoint_written_while_a_turn_runs_no_longer_holds_its_decisions() -> None:
    ran: list[str] = []
    cp = CrashAfterResult()
    with pytest.raises(Crash):
        arun(
            staged_agent(ran, TWICE).run(
                "go", checkpointer=cp, thread_id="t", decisions={"publish": "approve"}
            )
        )
    saved = arun(cp.load("t"))
    assert saved is not None
    assert saved.turn is not None and [r.text for r in saved.results] == ["published first"]
    assert saved is not None
    assert saved.decisions == {}  # spent by the turn now in the checkpoint
    interrupt = interrupt_of(staged_agent(ran, TWICE).resume("t", checkpointer=cp))
    assert interrupt.arguments == {"text": "second"}
    assert ran == ["publish first"]


def test_a_decision_that_settles_an_unknown_outcome_is_spent_by_that_turn(cp: Any) -> None:
    ran: list[str] = []
    with pytest.raises(Crash):
        arun(
            staged_agent(ran, TWICE, crash_on={"first"}).run(
                "go", checkpointer=cp, thread_id="t", decisions={"publish": "approve"}
            )
        )
    unknown = interrupt_of(staged_agent(ran, TWICE).resume("t", checkpointer=cp))
    assert unknown.outcome_unknown and ran == ["publish first"]
    nxt = interrupt_of(
        staged_agent(ran, TWICE).resume("t", {unknown.key: "approve"}, checkpointer=cp)
    )
    assert ran == ["publish first", "publish first"]  # re-run knowingly, once
    assert nxt.arguments == {"text": "second"} and not nxt.outcome_unknown
    assert some(arun(cp.load("t"))).decisions == {}
