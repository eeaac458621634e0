"""Checkpointed threads: the spec example as printed, thread ids on every
entry point, the interrupt checkpoint, pause before a first run, sessions and threads."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    FileMemory,
    FunctionModel,
    HitlInterrupt,
    InMemoryStorage,
    Message,
    ScriptedModel,
    SessionManager,
    Snapshot,
    SnapshotData,
    ToolCall,
    hitl_key,
    is_well_formed,
    tool,
)
from framework_agents.checkpoint import InMemoryCheckpointer, ThreadCheckpoint
from framework_agents.errors import (
    HitlDecisionError,
    SnapshotCorruptError,
    ThreadBusyError,
    ThreadIdInvalidError,
)
from framework_agents.models._base import ToolSpec


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
        resumed = await mk().resume("t1", {tool: "approve"}, checkpointer=cp, reissue=True)
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
        arun(p.mk().resume("t1", {key: "approve"}, checkpointer=cp, reissue=True))
    assert again.value.arguments == {"text": "draft 1"} and p.published == []
    saved = arun(cp.load("t1"))
    assert saved is not None
    assert saved.pending == ToolCall("call-1", "publish", {"text": "draft 1"})
    assert saved is not None
    assert [m.text for m in saved.messages] == ["publish it"]
    # The key of the call the model will re-issue next approves exactly that call.
    nxt = hitl_key("publish", {"text": "draft 2"})
    result = arun(p.mk().resume("t1", {nxt: "approve"}, checkpointer=cp, reissue=True))
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

    attempts: list[Callable[[], Coroutine[Any, Any, object]]] = [
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
    assert [m.text for m in some(arun(cp.load("t"))).messages] == ["a", "one"]


# -- a session and a thread together ------------------------------------------------------


def echo(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    return "seen " + "|".join(m.text for m in messages if m.role == "user")


def test_a_thread_wins_over_the_session_at_start_and_the_session_keeps_its_app_data(
    tmp_path: Path,
) -> None:
    storage = InMemoryStorage()
    cp = FileCheckpointer(tmp_path / "cp")
    session_history = [Message("user", "from session"), Message("assistant", "s")]
    thread_history = [Message("user", "from thread"), Message("assistant", "t")]

    async def main() -> None:
        await SessionManager("s1", storage).save_latest(
            Snapshot(
                SnapshotData(messages=session_history, state={"src": "session"}),
                app_data={"app": 42},
            )
        )
        await cp.save(ThreadCheckpoint("t1", None, thread_history, {"src": "thread"}))
        agent = Agent(
            FunctionModel(echo),
            session_manager=SessionManager("s1", storage),
            initial_messages=[Message("user", "seed")],
        )
        result = await agent.run("next", checkpointer=cp, thread_id="t1")
        # The thread's checkpoint wins: its history and state, not the session's or the seed.
        assert result.text == "seen from thread|next"
        assert agent.state.to_dict() == {"src": "thread"}
        expected = ["from thread", "t", "next", "seen from thread|next"]
        assert [m.text for m in result.messages] == expected
        assert [m.text for m in some(await cp.load("t1")).messages] == expected
        assert [m.text for m in await agent.memory.load()] == expected
        # The session still gets save_latest at the end: nothing duplicated, app data kept.
        latest = await SessionManager("s1", storage).load_latest()
        assert latest is not None
        assert [m.text for m in latest.data.messages or []] == expected
        assert latest.data.state == {"src": "thread"}
        assert latest.app_data == {"app": 42}
        # A later plain run goes on from there (the session is not restored over it).
        again = await agent.run("plain")
        assert again.text == "seen from thread|next|plain"

    arun(main())


def test_a_new_thread_starts_from_the_session_and_both_end_equal(tmp_path: Path) -> None:
    storage = InMemoryStorage()
    cp = FileCheckpointer(tmp_path / "cp")

    async def main() -> None:
        await SessionManager("s1", storage).save_latest(
            Snapshot(
                SnapshotData(messages=[Message("user", "old")], state={"k": 1}),
                app_data="keep me",
            )
        )
        agent = Agent(FunctionModel(echo), session_manager=SessionManager("s1", storage))
        result = await agent.run("new", checkpointer=cp, thread_id="fresh")
        assert [m.text for m in result.messages] == ["old", "new", "seen old|new"]
        saved = await cp.load("fresh")
        latest = await SessionManager("s1", storage).load_latest()
        assert latest is not None
        assert saved is not None
        assert saved.messages == latest.data.messages == result.messages
        assert saved is not None
        assert saved.state == latest.data.state == {"k": 1}
        assert latest.app_data == "keep me"

    arun(main())


def test_a_failed_thread_run_leaves_the_session_to_restore_later(tmp_path: Path) -> None:
    storage = InMemoryStorage()
    cp = FileCheckpointer(tmp_path / "cp")

    def broken(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        raise RuntimeError("model down")

    async def main() -> None:
        session = [Message("user", "from session"), Message("assistant", "s")]
        await SessionManager("s1", storage).save_latest(
            Snapshot(SnapshotData(messages=session, state={"src": "session"}), app_data=7)
        )
        await cp.save(ThreadCheckpoint("t1", None, [Message("user", "thread")], {}))
        calls = iter([broken, echo])

        def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            result: str = next(calls)(messages, tools)
            return result

        agent = Agent(FunctionModel(model), session_manager=SessionManager("s1", storage))
        with pytest.raises(Exception, match="model down"):
            await agent.run("x", checkpointer=cp, thread_id="t1")
        result = await agent.run("plain")  # no thread: the session is restored as usual
        assert result.text == "seen from session|plain"
        assert agent.state.to_dict() == {"src": "session"}
        latest = await SessionManager("s1", storage).load_latest()
        assert latest is not None and latest.app_data == 7

    arun(main())


def test_a_corrupt_session_snapshot_fails_a_thread_run_and_is_kept(tmp_path: Path) -> None:
    storage = InMemoryStorage()
    cp = FileCheckpointer(tmp_path / "cp")
    key = "session/s1/scopes/agent/default/snapshots/snapshot_latest.json"

    async def main() -> None:
        await storage.put(key, b"{torn")
        await cp.save(ThreadCheckpoint("t1", None, [Message("user", "thread")], {}))
        agent = Agent(FunctionModel(echo), session_manager=SessionManager("s1", storage))
        with pytest.raises(SnapshotCorruptError):
            await agent.run("x", checkpointer=cp, thread_id="t1")
        assert await storage.get(key) == b"{torn"
        assert [m.text for m in some(await cp.load("t1")).messages] == ["thread"]

    arun(main())


# -- pause before a first run --------------------------------------------------------------


def test_pause_before_a_first_run_saves_the_stored_memory_not_an_empty_history(
    tmp_path: Path,
) -> None:
    store, cp = tmp_path / "mem", FileCheckpointer(tmp_path / "cp")

    async def main() -> None:
        await Agent(ScriptedModel(["a1"]), memory=FileMemory(store)).run("u1")
        # Another process: a fresh agent over the same memory pauses before any run.
        await Agent(ScriptedModel([]), memory=FileMemory(store)).pause("p", checkpointer=cp)
        assert [m.text for m in some(await cp.load("p")).messages] == ["u1", "a1"]
        resumed = Agent(ScriptedModel(["cont"]), memory=FileMemory(store))
        result = await resumed.resume("p", checkpointer=cp)
        assert [m.text for m in result.messages] == ["u1", "a1", "cont"]
        assert [m.text for m in await FileMemory(store).load()] == ["u1", "a1", "cont"]

    arun(main())


def test_pause_before_a_first_run_saves_the_session_history_and_state(tmp_path: Path) -> None:
    storage, cp = InMemoryStorage(), FileCheckpointer(tmp_path / "cp")

    async def main() -> None:
        first = Agent(
            ScriptedModel(["x1"]), session_manager=SessionManager("s", storage), state={"k": 1}
        )
        await first.run("hello")
        later = Agent(ScriptedModel([]), session_manager=SessionManager("s", storage))
        await later.pause("r", checkpointer=cp)
        saved = await cp.load("r")
        assert saved is not None
        assert [m.text for m in saved.messages] == ["hello", "x1"]
        assert saved is not None
        assert saved.state == {"k": 1}

    arun(main())


def test_pause_before_a_first_run_saves_the_seed_repaired(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path / "cp")
    seed = [
        Message("tool", "orphan", tool_call_id="nobody", name="f"),
        Message("user", "hi"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})]),
    ]
    arun(Agent(ScriptedModel([]), initial_messages=seed).pause("s", checkpointer=cp))
    saved = some(arun(cp.load("s"))).messages
    assert is_well_formed(saved)
    assert [m.text for m in saved][:1] == ["hi"]
    assert saved[-1].role == "tool" and saved[-1].metadata.get("kind") == "interrupted"


# -- the interrupt checkpoint and decisions on resume ---------------------------------------


def _turn(*calls: ToolCall, text: str = "") -> Message:
    return Message("assistant", text, tool_calls=list(calls))


def test_the_interrupt_checkpoint_keeps_earlier_turns_and_excludes_only_the_interrupted_one(
    tmp_path: Path,
) -> None:
    cp = FileCheckpointer(tmp_path)
    ran: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        ran.append(f"lookup {q}")
        return f"found {q}"

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        ran.append(f"publish {text}")
        return f"published {text}"

    approvals = iter(["approve"])  # the callback approves the first publish only

    def decide(name: str, args: dict[str, Any]) -> Any:
        return next(approvals, {"suspend": True})

    same = {"text": "hi"}
    model = ScriptedModel(
        [
            _turn(ToolCall("l1", "lookup", {"q": "x"})),
            _turn(ToolCall("p1", "publish", same), text="first"),
            _turn(ToolCall("l2", "lookup", {"q": "y"}), ToolCall("p2", "publish", same)),
        ]
    )
    with pytest.raises(HitlInterrupt) as info:
        arun(
            Agent(model, tools=[lookup, publish], decide=decide).run(
                "go", checkpointer=cp, thread_id="t1"
            )
        )
    assert (info.value.call_id, info.value.key) == ("p2", hitl_key("publish", same))
    saved = arun(cp.load("t1"))
    # Everything before the interrupted turn, the earlier publish with equal args included.
    assert saved is not None
    assert [(m.role, m.text) for m in saved.messages] == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "found x"),
        ("assistant", "first"),
        ("tool", "published hi"),
    ]
    assert saved is not None
    assert is_well_formed(saved.messages)
    assert saved is not None
    assert saved.pending == ToolCall("p2", "publish", same)
    assert saved is not None
    assert saved.turn is None and saved.in_flight == [] and saved.results == []
    assert ran == ["lookup x", "publish hi"]  # nothing of the interrupted turn ran


@pytest.mark.parametrize(
    ("allowed", "decision"),
    [
        pytest.param(("approve",), {"reject": "no"}, id="reject-not-allowed"),
        pytest.param(("approve",), "reject", id="bare-reject-not-allowed"),
        pytest.param(("approve", "reject"), {"suspend": True}, id="suspend-not-allowed"),
        pytest.param(("reject",), "approve", id="approve-not-allowed"),
        pytest.param(("approve", "edit"), {"edit": "text"}, id="malformed-edit"),
        pytest.param(("edit",), {"edit": {"amount": "lots"}}, id="invalid-edited-args"),
        pytest.param(("edit",), {"edit": {"amount": 1, "to": "x"}}, id="unknown-edited-arg"),
        pytest.param(("approve",), {"approve": True, "reject": "x"}, id="two-keys"),
        pytest.param(("approve",), 5, id="not-a-decision"),
    ],
)
def test_a_disallowed_or_malformed_decision_on_resume_is_hitl_decision_and_changes_nothing(
    tmp_path: Path, allowed: tuple[str, ...], decision: Any
) -> None:
    cp = FileCheckpointer(tmp_path)
    ran: list[int] = []

    @tool(requires_approval=True, allowed_decisions=allowed)  # type: ignore[arg-type]
    def wire(amount: int) -> str:
        """Wire money."""
        ran.append(amount)
        return "sent"

    def mk() -> Agent:
        def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
            if messages[-1].role == "user":
                return _turn(ToolCall("w", "wire", {"amount": 5}))
            return "ok"

        return Agent(FunctionModel(model), tools=[wire])

    with pytest.raises(HitlInterrupt):
        arun(mk().run("pay", checkpointer=cp, thread_id="w"))
    before = arun(cp.load("w"))
    resumed = mk()
    with pytest.raises(HitlDecisionError) as err:
        arun(resumed.resume("w", {"wire": decision}, checkpointer=cp))
    assert err.value.code == "HITL_DECISION"
    assert ran == [] and arun(cp.load("w")) == before
    assert [(e.kind, (e.label or "").split(":")[0]) for e in resumed.timeline] == [
        ("resume", "error")
    ]


def test_a_resume_that_interrupts_again_is_a_resume_entry_and_keeps_the_thread(
    tmp_path: Path,
) -> None:
    cp = FileCheckpointer(tmp_path)
    p = Publisher()
    with pytest.raises(HitlInterrupt):
        arun(p.mk(state={"n": {"deep": [1, 2.5, None]}}).run("go", checkpointer=cp, thread_id="t"))
    again = p.mk()
    with pytest.raises(HitlInterrupt) as info:
        arun(again.resume("t", {"publish": {"suspend": True}}, checkpointer=cp, reissue=True))
    assert info.value.thread_id == "t" and info.value.arguments == {"text": "draft 1"}
    assert [(e.kind, e.label) for e in again.timeline] == [("resume", "interrupted")]
    assert again.state.to_dict() == {"n": {"deep": [1, 2.5, None]}}
    saved = arun(cp.load("t"))
    assert saved is not None
    assert saved.pending == ToolCall("call-1", "publish", {"text": "draft 1"})
    assert saved is not None
    assert [m.text for m in saved.messages] == ["go"] and p.published == []
    final = p.mk()
    result = arun(final.resume("t", {"publish": "approve"}, checkpointer=cp, reissue=True))
    assert p.published == ["draft 2"] and is_well_formed(result.messages)
    assert final.state.to_dict() == {"n": {"deep": [1, 2.5, None]}}
