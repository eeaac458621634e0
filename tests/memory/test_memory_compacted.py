"""CompactedMemory: boundary messages, rolling summaries, group-safe cuts, no loss."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from framework_agents import (
    CompactedMemory,
    FileMemory,
    InMemoryMemory,
    InvalidArgumentError,
    Memory,
    Message,
    ToolCall,
    is_well_formed,
)
from framework_agents.memory import COMPACTION_PREFIX


def _turn(i: int) -> list[Message]:
    return [
        Message("user", f"Question {i}.", id=f"u{i}"),
        Message("assistant", f"Answer {i}.", id=f"a{i}"),
    ]


class Recorder:
    """A summariser that records what it was given."""

    def __init__(self) -> None:
        self.calls: list[list[Message]] = []

    def __call__(self, messages: list[Message]) -> str:
        self.calls.append(list(messages))
        return f"summary #{len(self.calls)} of {len(messages)}"


class AppendOnlyMemory:
    """A minimal Memory with no ``replace()``: CompactedMemory falls back to clear + save."""

    def __init__(self) -> None:
        self.stored: list[Message] = []
        self.ops: list[str] = []

    async def load(self) -> list[Message]:
        return list(self.stored)

    async def save(self, messages: Sequence[Message]) -> None:
        self.ops.append("save")
        self.stored.extend(messages)

    async def clear(self) -> None:
        self.ops.append("clear")
        self.stored = []


def test_is_a_memory_with_default_window() -> None:
    memory = CompactedMemory(InMemoryMemory())
    assert isinstance(memory, Memory)
    assert memory.max_messages == 40


def test_below_the_bound_it_is_a_plain_append() -> None:
    async def main() -> None:
        summarise = Recorder()
        inner = AppendOnlyMemory()
        memory = CompactedMemory(inner, max_messages=6, summarize=summarise)
        for i in range(3):
            await memory.save(_turn(i))
        assert [m.id for m in await memory.load()] == ["u0", "a0", "u1", "a1", "u2", "a2"]
        assert inner.ops == ["save", "save", "save"]
        assert summarise.calls == []

    asyncio.run(main())


def test_overflow_head_becomes_one_user_boundary() -> None:
    async def main() -> None:
        memory = CompactedMemory(InMemoryMemory(100), max_messages=5)
        for i in range(4):
            await memory.save(_turn(i))
        loaded = await memory.load()
        assert len(loaded) <= 5
        boundary = loaded[0]
        assert boundary.role == "user"
        assert boundary.kind == "compaction"
        assert boundary.metadata["covers"] == 4
        assert boundary.text.startswith(COMPACTION_PREFIX)
        # The default summariser is extractive: the summarised turns are still readable.
        assert "- user: Question 0." in boundary.text
        assert "- assistant: Answer 1." in boundary.text
        assert [m.id for m in loaded[1:]] == ["u2", "a2", "u3", "a3"]

    asyncio.run(main())


def test_summaries_roll_up_and_the_prefix_does_not_nest() -> None:
    async def main() -> None:
        summarise = Recorder()
        memory = CompactedMemory(InMemoryMemory(100), max_messages=4, summarize=summarise)
        for i in range(6):
            await memory.save(_turn(i))
        assert len(summarise.calls) >= 2
        second = summarise.calls[1]
        assert second[0].kind == "compaction"  # the earlier boundary is part of the next head
        assert second[0].text == "summary #1 of " + str(len(summarise.calls[0]))
        loaded = await memory.load()
        assert sum(m.kind == "compaction" for m in loaded) == 1
        assert loaded[0].text.count(COMPACTION_PREFIX) == 1
        covered = loaded[0].metadata["covers"]
        assert covered + len(loaded) - 1 == 12  # every message is summarised or kept

    asyncio.run(main())


def test_async_summarizer() -> None:
    async def summarise(messages: list[Message]) -> str:
        await asyncio.sleep(0)
        return "async " + ",".join(m.id for m in messages)

    async def main() -> None:
        memory = CompactedMemory(InMemoryMemory(100), max_messages=3, summarize=summarise)
        await memory.save([*_turn(0), *_turn(1)])
        loaded = await memory.load()
        assert loaded[0].text == COMPACTION_PREFIX + "async u0,a0"
        assert [m.id for m in loaded[1:]] == ["u1", "a1"]

    asyncio.run(main())


def test_the_cut_keeps_tool_results_with_their_call() -> None:
    async def main() -> None:
        summarise = Recorder()
        memory = CompactedMemory(InMemoryMemory(100), max_messages=4, summarize=summarise)
        calls = [ToolCall("c1", "f", {}), ToolCall("c2", "f", {})]
        await memory.save(
            [
                Message("user", "q", id="u"),
                Message("assistant", "looking", tool_calls=calls, id="a"),
                Message("tool", "r1", tool_call_id="c1", name="f", id="t1"),
                Message("tool", "r2", tool_call_id="c2", name="f", id="t2"),
                Message("assistant", "done", id="d"),
            ]
        )
        loaded = await memory.load()
        assert is_well_formed(loaded)
        assert [m.id for m in summarise.calls[0]] == ["u", "a", "t1", "t2"]
        assert [m.id for m in loaded[1:]] == ["d"]

    asyncio.run(main())


def test_results_saved_after_their_call_survive_a_compaction() -> None:
    """Repair closes the open call on load; the real result arriving next still wins."""

    async def main() -> None:
        memory = CompactedMemory(InMemoryMemory(100), max_messages=4)
        call = Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})], id="call")
        await memory.save([*_turn(0), call])
        assert (await memory.load())[-1].kind == "interrupted"  # the view closes the call
        # This save compacts: the real result must join its call in the kept tail.
        await memory.save(
            [
                Message("tool", "real", tool_call_id="c1", name="f", id="t"),
                Message("user", "next", id="n"),
            ]
        )
        loaded = await memory.load()
        assert is_well_formed(loaded)
        assert [m.id for m in loaded[1:]] == ["call", "t", "n"]
        assert not any(m.kind == "interrupted" for m in loaded)

    asyncio.run(main())


def test_over_a_file_memory_nothing_is_lost_or_duplicated(tmp_path: Path) -> None:
    async def main() -> None:
        memory = CompactedMemory(FileMemory(tmp_path, max_messages=50), max_messages=7)
        for i in range(10):
            await memory.save(_turn(i))
        loaded = await CompactedMemory(FileMemory(tmp_path), max_messages=7).load()
        assert len(loaded) <= 7
        tail = [m.id for m in loaded[1:]]
        assert len(tail) == len(set(tail))
        assert loaded[0].metadata["covers"] + len(tail) == 20
        assert tail[-2:] == ["u9", "a9"]

    asyncio.run(main())


def test_without_replace_it_falls_back_to_clear_then_save() -> None:
    async def main() -> None:
        inner = AppendOnlyMemory()
        memory = CompactedMemory(inner, max_messages=3)
        await memory.save([*_turn(0), *_turn(1)])
        assert inner.ops == ["clear", "save"]
        assert [m.kind for m in inner.stored] == ["compaction", None, None]
        assert [m.id for m in inner.stored[1:]] == ["u1", "a1"]

    asyncio.run(main())


def test_a_failing_summarizer_changes_nothing() -> None:
    def boom(messages: list[Message]) -> str:
        raise RuntimeError("model down")

    async def main() -> None:
        inner = InMemoryMemory(100)
        memory = CompactedMemory(inner, max_messages=3, summarize=boom)
        await memory.save(_turn(0))
        with pytest.raises(RuntimeError):
            await memory.save(_turn(1))
        bad = CompactedMemory(inner, max_messages=3, summarize=lambda _: 42)  # type: ignore[arg-type, return-value]
        with pytest.raises(InvalidArgumentError):
            await bad.save(_turn(1))
        assert [m.id for m in await inner.load()] == ["u0", "a0"]

    asyncio.run(main())


def test_load_compacts_an_oversized_inner_history_without_storing_it() -> None:
    async def main() -> None:
        inner = InMemoryMemory(100)
        for i in range(5):
            await inner.save(_turn(i))
        memory = CompactedMemory(inner, max_messages=4)
        view = await memory.load()
        assert len(view) <= 4 and view[0].kind == "compaction"
        assert len(await inner.load()) == 10
        assert await memory.load() == view  # deterministic: the boundary id too

    asyncio.run(main())


def test_replace_and_clear() -> None:
    async def main() -> None:
        memory = CompactedMemory(InMemoryMemory(100), max_messages=3)
        await memory.save(_turn(0))
        await memory.replace([*_turn(1), *_turn(2)])
        loaded = await memory.load()
        assert loaded[0].kind == "compaction" and loaded[0].metadata["covers"] == 2
        assert [m.id for m in loaded[1:]] == ["u2", "a2"]  # the earlier save was replaced
        await memory.clear()
        assert await memory.load() == []

    asyncio.run(main())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"inner": "not a memory"},
        {"inner": InMemoryMemory(), "max_messages": 0},
        {"inner": InMemoryMemory(), "summarize": "not callable"},
    ],
    ids=["inner", "max-messages", "summarize"],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        CompactedMemory(**kwargs)


def test_a_commit_keeps_what_another_writer_appended_since_its_base(tmp_path: Path) -> None:
    """Two instances over one FileMemory (two processes): a commit by one, from the
    history it started from, keeps the other's turn; so does a second replace with no
    load between (the base was forgotten after a replace, which then dropped it). The
    base after a write is what it wrote, as ``FileMemory``'s: what it merged in and now
    leaves out is removed.
    """

    async def main() -> None:
        a = CompactedMemory(FileMemory(tmp_path, max_messages=100), max_messages=40)
        b = CompactedMemory(FileMemory(tmp_path, max_messages=100), max_messages=40)
        await a.save(_turn(0))
        start = await a.load()
        await b.save(_turn(1))  # another writer's turn, unseen by a
        edited = Message("user", "Question 0, edited.", id="u0e")
        await a.commit([edited, start[1]], base={m.id for m in start})
        assert [m.id for m in await b.load()] == ["u0e", "a0", "u1", "a1"]
        await b.save(_turn(2))  # unseen by a again
        await a.replace([edited, start[1], *_turn(3)])  # no load since its commit
        assert [m.id for m in await b.load()] == ["u0e", "a0", "u3", "a3", "u2", "a2"]
        with pytest.raises(InvalidArgumentError):
            await a.commit([], base=5)  # type: ignore[arg-type]

    asyncio.run(main())


def test_an_agent_editing_over_a_shared_compacted_memory_keeps_the_other_agents_turn(
    tmp_path: Path,
) -> None:
    from framework_agents import Agent, NullConversationManager
    from framework_agents.testing import FunctionModel

    def agent() -> Agent:
        inner = FileMemory(tmp_path, max_messages=100)
        return Agent(
            FunctionModel(lambda messages, tools: "ok " + messages[-1].text),
            memory=CompactedMemory(inner, max_messages=40),
            conversation_manager=NullConversationManager(),
        )

    async def main() -> None:
        a, b = agent(), agent()
        await a.run("A0")
        await b.run("B0")
        await a.edit_message(0, "A0 (edited)")
        stored = [m.text for m in await FileMemory(tmp_path, max_messages=100).load()]
        assert stored == ["A0 (edited)", "ok A0", "B0", "ok B0"]

    asyncio.run(main())


def test_a_commit_after_another_writer_compacted_summarises_nothing_twice(
    tmp_path: Path,
) -> None:
    """A holds six messages (at the bound) and adds a turn while B compacts: A's commit
    drops what B's boundary now stands for, which then leads; every message is either
    stored or counted by the boundary, once."""

    async def main() -> None:
        a = CompactedMemory(FileMemory(tmp_path, max_messages=100), max_messages=6)
        b = CompactedMemory(FileMemory(tmp_path, max_messages=100), max_messages=6)
        for i in range(3):
            await a.save(_turn(i))
        start = await a.load()
        assert len(start) == 6 and start[0].kind is None
        await b.load()
        await b.save(_turn(10))  # 8 > 6: B compacts the oldest messages
        assert (await b.load())[0].kind == "compaction"
        await a.commit([*start, *_turn(11)], base={m.id for m in start})
        stored = await a.load()
        raw = [m for m in stored if m.kind != "compaction"]
        covers = sum(m.metadata["covers"] for m in stored if m.kind == "compaction")
        assert stored[0].kind == "compaction" and len(stored) <= 6
        assert [m.kind for m in stored[1:]] == [None] * len(raw)  # one boundary, in front
        assert covers + len(raw) == 10  # the ten messages made, once each
        assert [m.id for m in raw][-4:] == ["u11", "a11", "u10", "a10"]
        assert is_well_formed(stored)

    asyncio.run(main())
