"""Durable swarm threads: the active member, handoffs and context survive; approvals inside
a member suspend the whole swarm; real crashes (SIGKILL) never run an approved call twice."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from swarm_scenario import effect_count, refund_swarm, refund_tool

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    InMemoryCheckpointer,
    Message,
    ScriptedModel,
    SlidingWindowConversationManager,
    Swarm,
    ThreadCheckpoint,
    ToolCall,
    ToolContext,
    is_well_formed,
    tool,
)
from framework_agents.errors import AgentError, InvalidArgumentError
from framework_agents.swarm import SWARM_STATE_KEY
from processes import close_process

CHILD = Path(__file__).with_name("swarm_child.py")


CHECKPOINTERS: dict[str, Callable[[Path], Any]] = {
    "memory": lambda _: InMemoryCheckpointer(),
    "file": lambda root: FileCheckpointer(root),
}


@pytest.fixture(params=sorted(CHECKPOINTERS))
def make_cp(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    cp = CHECKPOINTERS[request.param](tmp_path / "cp")
    return lambda: cp if request.param == "memory" else FileCheckpointer(tmp_path / "cp")


def _interrupt(coro: Any) -> HitlInterrupt:
    with pytest.raises(HitlInterrupt) as caught:
        arun(coro)
    return caught.value


def test_an_approval_in_a_member_suspends_the_swarm_and_resume_continues_there(
    tmp_path: Path, make_cp: Callable[[], Any]
) -> None:
    fx = tmp_path / "fx.txt"
    interrupt = _interrupt(refund_swarm(fx).run("refund", checkpointer=make_cp(), thread_id="t1"))
    assert interrupt.agent == "billing"
    assert (interrupt.tool, interrupt.arguments, interrupt.thread_id) == (
        "refund",
        {"order": 42},
        "t1",
    )
    stored = arun(make_cp().load("t1"))
    assert stored.pending is not None and stored.pending.name == "refund"
    assert stored.state[SWARM_STATE_KEY]["active"] == "billing"
    assert is_well_formed(stored.messages)
    assert effect_count(fx) == 0

    result = arun(refund_swarm(fx).resume("t1", {"refund": "approve"}, checkpointer=make_cp()))
    assert (result.status, result.agent) == ("completed", "billing")
    assert result.text == "Refund handled: refunded order 42"
    assert result.handoffs == []  # the handoff belongs to the first run
    assert effect_count(fx) == 1
    assert is_well_formed(result.messages)
    # Resuming again runs nothing twice: the thread ended on billing's answer, so there is
    # nothing to resume (a coded refusal, not another model call).
    with pytest.raises(InvalidArgumentError):
        arun(refund_swarm(fx).resume("t1", checkpointer=make_cp()))
    assert effect_count(fx) == 1


def test_the_next_run_of_a_thread_starts_with_the_member_that_answered_last(
    tmp_path: Path, make_cp: Callable[[], Any]
) -> None:
    fx = tmp_path / "fx.txt"
    _interrupt(refund_swarm(fx).run("refund", checkpointer=make_cp(), thread_id="t1"))
    arun(refund_swarm(fx).resume("t1", {"refund": "approve"}, checkpointer=make_cp()))

    asked: list[str] = []

    def billing(messages: list[Message], tools: Any) -> str:
        asked.append(messages[-1].text)
        return "billing again"

    def triage(messages: list[Message], tools: Any) -> str:
        raise AssertionError("triage must not take the turn")

    swarm = Swarm(
        [
            Agent(FunctionModel(triage), agent_id="triage"),
            Agent(FunctionModel(billing), agent_id="billing"),
        ]
    )
    result = arun(swarm.run("and one more thing", checkpointer=make_cp(), thread_id="t1"))
    assert (result.agent, result.text) == ("billing", "billing again")
    assert asked == ["and one more thing"]
    stored = arun(make_cp().load("t1"))
    record = stored.state[SWARM_STATE_KEY]
    assert record["active"] == "billing"
    assert record["handoffs"] == [
        {"from_agent": "triage", "to_agent": "billing", "message": "Customer says: refund"}
    ]
    assert record["context"] == {"triage": {"order": 42}}


def test_resume_of_an_unknown_thread_is_checkpoint_missing(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as caught:
        arun(refund_swarm(tmp_path / "fx").resume("nope", checkpointer=InMemoryCheckpointer()))
    assert caught.value.code == "CHECKPOINT_MISSING"


@pytest.mark.parametrize(
    "record",
    [{"active": 3}, {"active": "triage", "version": 99}, "billing", {"active": "x", "extra": 1}],
    ids=["wrong-type", "newer-version", "not-an-object", "unknown-key"],
)
def test_a_swarm_record_of_the_wrong_shape_is_corrupt_and_left_untouched(
    tmp_path: Path, record: Any
) -> None:
    cp = InMemoryCheckpointer()
    arun(cp.save(ThreadCheckpoint("t1", None, [], {SWARM_STATE_KEY: record})))
    with pytest.raises(AgentError) as caught:
        arun(refund_swarm(tmp_path / "fx").run("hi", checkpointer=cp, thread_id="t1"))
    assert caught.value.code == "CHECKPOINT_CORRUPT"
    assert some(arun(cp.load("t1"))).state[SWARM_STATE_KEY] == record


def test_a_thread_whose_active_member_left_the_swarm_is_refused(tmp_path: Path) -> None:
    cp = InMemoryCheckpointer()
    arun(cp.save(ThreadCheckpoint("t1", None, [], {SWARM_STATE_KEY: {"active": "gone"}})))
    with pytest.raises(AgentError) as caught:
        arun(refund_swarm(tmp_path / "fx").run("hi", checkpointer=cp, thread_id="t1"))
    assert caught.value.code == "INVALID_ARGUMENT"


def test_members_do_not_see_the_swarm_record_in_their_state(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def solo(messages: list[Message], tools: Any) -> str:
        return "done"

    cp = InMemoryCheckpointer()
    swarm = Swarm([Agent(FunctionModel(solo), agent_id="solo", state={"x": 1})])
    arun(swarm.run("one", checkpointer=cp, thread_id="t1"))
    arun(swarm.run("two", checkpointer=cp, thread_id="t1"))
    seen.append(swarm.member("solo").state.to_dict())
    assert SWARM_STATE_KEY not in seen[0]
    assert SWARM_STATE_KEY in some(arun(cp.load("t1"))).state


def test_threads_of_one_swarm_instance_stay_apart(tmp_path: Path) -> None:
    def echo(messages: list[Message], tools: Any) -> str:
        return f"seen {len(messages)}"

    swarm = Swarm([Agent(FunctionModel(echo), agent_id="a")])
    cp = InMemoryCheckpointer()
    assert arun(swarm.run("x", checkpointer=cp, thread_id="t1")).text == "seen 1"
    assert arun(swarm.run("y", checkpointer=cp, thread_id="t2")).text == "seen 1"
    assert arun(swarm.run("z", checkpointer=cp, thread_id="t1")).text == "seen 3"


def test_a_sigkill_between_the_approval_and_the_result_never_runs_the_call_twice(
    tmp_path: Path,
) -> None:
    root, fx = tmp_path / "cp", tmp_path / "fx.txt"
    _interrupt(refund_swarm(fx).run("refund", checkpointer=FileCheckpointer(root), thread_id="t1"))

    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(root), str(fx), "approve_blocking"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # the tool's side effect happened, its result did not land
        assert line.strip() == "ran", line + (child.stderr.read() if child.stderr else "")
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        close_process(child)
    assert effect_count(fx) == 1
    left = arun(FileCheckpointer(root).load("t1"))
    assert left is not None and is_well_formed(left.messages)
    assert [c.name for c in left.in_flight] == ["refund"]

    # The outcome is unknown: the call is not run again on its own.
    unknown = _interrupt(refund_swarm(fx).resume("t1", checkpointer=FileCheckpointer(root)))
    assert unknown.outcome_unknown and unknown.agent == "billing"
    again = _interrupt(
        refund_swarm(fx).run(None, checkpointer=FileCheckpointer(root), thread_id="t1")
    )
    assert again.outcome_unknown and again.agent == "billing"
    assert effect_count(fx) == 1

    # A human who knows it ran rejects the re-run (naming the open interrupt by its key);
    # the thread goes on in billing.
    result = arun(
        refund_swarm(fx).resume(
            "t1", {again.key: {"reject": "it already ran"}}, checkpointer=FileCheckpointer(root)
        )
    )
    assert (result.status, result.agent) == ("completed", "billing")
    assert "it already ran" in result.text
    assert effect_count(fx) == 1
    assert is_well_formed(result.messages)
    final = arun(FileCheckpointer(root).load("t1"))
    assert final is not None
    assert final.pending is None and final.in_flight == []
    assert final is not None
    assert final.state[SWARM_STATE_KEY]["active"] == "billing"


def test_a_crash_between_members_resumes_at_the_right_member(tmp_path: Path) -> None:
    root, fx = tmp_path / "cp", tmp_path / "fx.txt"
    child = subprocess.run(
        [sys.executable, str(CHILD), str(root), str(fx), "crash_in_billing"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr[-2000:]
    left = arun(FileCheckpointer(root).load("t1"))
    assert left is not None
    assert left.state[SWARM_STATE_KEY]["active"] == "billing"  # triage's commit said so
    assert left is not None
    assert left.messages[-1].metadata.get("kind") == "handoff_message"
    assert left is not None
    assert is_well_formed(left.messages)

    interrupt = _interrupt(refund_swarm(fx).resume("t1", checkpointer=FileCheckpointer(root)))
    assert interrupt.agent == "billing"
    result = arun(
        refund_swarm(fx).resume("t1", {"refund": "approve"}, checkpointer=FileCheckpointer(root))
    )
    assert (result.status, result.agent, effect_count(fx)) == ("completed", "billing", 1)
    prompts = [m.text for m in result.messages if m.role == "user"]
    assert prompts[0] == "refund please" and len(prompts) == 2  # the prompt, the handoff


def test_the_record_keeps_the_newest_handoffs_and_counts_them_all() -> None:
    from framework_agents.swarm._state import MAX_STORED_HANDOFFS

    def ping(to: str) -> FunctionModel:
        def answer(messages: list[Message], tools: Any) -> Message:
            call = ToolCall(
                f"h{len(messages)}", "handoff_to_agent", {"agent_name": to, "message": "m"}
            )
            return Message("assistant", "", tool_calls=[call])

        return FunctionModel(answer)

    cp = InMemoryCheckpointer()
    swarm = Swarm(
        [
            Agent(
                ping("b"), agent_id="a", conversation_manager=SlidingWindowConversationManager(10)
            ),
            Agent(
                ping("a"), agent_id="b", conversation_manager=SlidingWindowConversationManager(10)
            ),
        ],
        max_handoffs=MAX_STORED_HANDOFFS + 20,
        max_iterations=MAX_STORED_HANDOFFS + 10,
        repetition_window=0,
    )
    result = arun(swarm.run("go", checkpointer=cp, thread_id="t"))
    assert (
        result.stop_reason == "max_iterations" and len(result.handoffs) == MAX_STORED_HANDOFFS + 10
    )
    record = some(arun(cp.load("t"))).state[SWARM_STATE_KEY]
    assert len(record["handoffs"]) == MAX_STORED_HANDOFFS
    assert record["handoff_count"] == MAX_STORED_HANDOFFS + 10


def test_no_other_run_of_the_thread_slips_in_between_two_members() -> None:
    async def scenario() -> tuple[str, list[str]]:
        cp = InMemoryCheckpointer(lock_timeout=0.05)
        in_billing, release = asyncio.Event(), asyncio.Event()

        async def billing(messages: list[Message], tools: Any) -> str:
            in_billing.set()
            await release.wait()
            return "billing answers"

        def make() -> Swarm:
            triage = FunctionModel(
                lambda messages, tools: Message(
                    "assistant",
                    "",
                    tool_calls=[
                        ToolCall("h1", "handoff_to_agent", {"agent_name": "b", "message": "go"})
                    ],
                )
            )
            return Swarm(
                [
                    Agent(triage, agent_id="t"),
                    Agent(FunctionModel(billing), agent_id="b"),
                ]
            )

        first = asyncio.create_task(make().run("one", checkpointer=cp, thread_id="th"))
        await in_billing.wait()  # triage has committed its handoff; billing is running
        with pytest.raises(AgentError) as caught:
            await make().run("two", checkpointer=cp, thread_id="th")
        release.set()
        result = await first
        return caught.value.code, [m.text for m in result.messages if m.role == "user"]

    code, prompts = arun(scenario())
    assert code == "THREAD_BUSY"
    assert prompts[0] == "one" and len(prompts) == 2  # "two" never got in


def test_a_turn_with_an_approval_and_a_handoff_runs_both_after_the_resume(
    tmp_path: Path, make_cp: Callable[[], Any]
) -> None:
    """billing refunds and hands to tech in one turn; the refund needs an approval."""
    fx = tmp_path / "fx.txt"

    def billing(messages: list[Message], tools: Any) -> Message | str:
        if messages[-1].role == "user":
            return Message(
                "assistant",
                "",
                tool_calls=[
                    ToolCall("r1", "refund", {"order": 42}),
                    ToolCall("h1", "handoff_to_agent", {"agent_name": "tech", "message": "fix"}),
                ],
            )
        return "billing again"

    def tech(messages: list[Message], tools: Any) -> str:
        refunds = [m.text for m in messages if m.role == "tool" and m.name == "refund"]
        return f"tech sees {refunds}"

    def make() -> Swarm:
        return Swarm(
            [
                Agent(FunctionModel(billing), agent_id="billing", tools=[refund_tool(fx)]),
                Agent(FunctionModel(tech), agent_id="tech"),
            ]
        )

    interrupt = _interrupt(make().run("refund and fix", checkpointer=make_cp(), thread_id="t1"))
    assert interrupt.agent == "billing" and effect_count(fx) == 0
    stored = arun(make_cp().load("t1"))
    assert stored.state[SWARM_STATE_KEY]["active"] == "billing"  # no handoff before the turn ran

    result = arun(make().resume("t1", {"refund": "approve"}, checkpointer=make_cp()))
    assert (result.status, result.agent) == ("completed", "tech")
    assert result.text == "tech sees ['refunded order 42']"
    assert [h.to_agent for h in result.handoffs] == ["tech"] and effect_count(fx) == 1
    assert is_well_formed(result.messages)
    final = arun(make_cp().load("t1"))
    assert final.state[SWARM_STATE_KEY]["active"] == "tech" and final.in_flight == []


def test_members_share_the_thread_state() -> None:
    @tool
    def remember(ctx: ToolContext, value: str) -> str:
        """Remember a value."""
        ctx.agent.state["remembered"] = value
        return "ok"

    @tool
    def recall(ctx: ToolContext) -> str:
        """Recall the value."""
        return str(ctx.agent.state.get("remembered"))

    a = ScriptedModel(
        [
            Message("assistant", "", tool_calls=[ToolCall("c1", "remember", {"value": "blue"})]),
            Message(
                "assistant",
                "",
                tool_calls=[
                    ToolCall("h1", "handoff_to_agent", {"agent_name": "b", "message": "m"})
                ],
            ),
        ]
    )
    b = ScriptedModel(
        [
            Message("assistant", "", tool_calls=[ToolCall("c2", "recall", {})]),
            lambda messages, tools: f"b recalls {messages[-1].text}",
        ]
    )
    cp = InMemoryCheckpointer()
    swarm = Swarm(
        [Agent(a, agent_id="a", tools=[remember]), Agent(b, agent_id="b", tools=[recall])]
    )
    result = arun(swarm.run("go", checkpointer=cp, thread_id="t"))
    assert result.text == "b recalls blue"
    assert some(arun(cp.load("t"))).state["remembered"] == "blue"
