"""The store conformance suite: its tests of memory (mixed into ``StoreConformance``)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from ..errors import AgentError
from ..memory._base import AppendableMemory
from ..messages import Message, ToolCall
from ..stores._base import Store
from ._suite import (
    StoreFactory,
    alternating,
    error_code,
    needs,
    overlapping_agent_runs,
    present,
    rich_history,
    run_on_store,
)

__all__ = ["MemorySuite"]


class MemorySuite:
    """Conformance tests of memories and agents sharing them."""

    # -- memory -------------------------------------------------------------------------

    def test_memory_appends_in_order_and_windows(self, store_factory: StoreFactory) -> None:
        """save() appends; the window keeps the newest messages, never opening on a tool."""

        async def body(store: Store) -> None:
            memory = store.memory("mem/a", max_messages=4)
            await memory.save([Message("user", "u0")])
            await memory.save([Message("assistant", "a0")])
            assert [m.text for m in await memory.load()] == ["u0", "a0"]
            call = Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})])
            result = Message("tool", "r", tool_call_id="c1", name="f")
            await memory.save([Message("user", "u1"), call, result, Message("assistant", "a1")])
            loaded = await memory.load()
            assert len(loaded) <= 4 and loaded[0].role != "tool"
            assert loaded[-1].text == "a1"
            other = store.memory("mem/b", max_messages=4)
            assert await other.load() == []
            await memory.clear()
            assert await memory.load() == []

        run_on_store(store_factory, body)

    def test_memory_replace_is_atomic_swap(self, store_factory: StoreFactory) -> None:
        """replace() makes the given history (windowed) the stored one."""

        async def body(store: Store) -> None:
            memory = store.memory("mem", max_messages=3)
            replace = present(getattr(memory, "replace", None), "memory.replace")
            await memory.save(rich_history())
            await replace([Message("user", f"r{i}") for i in range(5)])
            assert [m.text for m in await memory.load()] == ["r2", "r3", "r4"]

        run_on_store(store_factory, body)

    def test_memory_save_is_idempotent_by_message_id(self, store_factory: StoreFactory) -> None:
        """A save retried (a message given again, or twice) stores each message once."""

        async def body(store: Store) -> None:
            memory = store.memory("mem/once", max_messages=50)
            a, b, c, d, e = (Message("user", f"m{i}", id=f"m{i}") for i in range(5))
            await memory.save([a, b])
            await memory.save([b, c])  # the retry of a save that had landed, plus c
            await memory.save([c, c, d])
            await store.memory("mem/once", max_messages=50).save([d, e])  # another writer
            assert [m.id for m in await memory.load()] == ["m0", "m1", "m2", "m3", "m4"]

        run_on_store(store_factory, body)

    def test_memory_replace_keeps_what_another_writer_appended(
        self, store_factory: StoreFactory
    ) -> None:
        """Two writers of one key: a replace keeps what the other appended since it read.

        What an agent's commit does: it starts from the stored history, adds its turn and
        replaces the history. A turn another writer added meanwhile is kept (after the
        committed history), never dropped; a message the committer read and left out is
        removed; an instance that never read the key replaces it whole.
        """

        async def body(store: Store) -> None:
            a = store.memory("mem/shared", max_messages=50)
            b = store.memory("mem/shared", max_messages=50)
            needs(a is not b, "two memory objects on one key")
            needs(callable(getattr(a, "replace", None)), "memory.replace")

            def turn(tag: str) -> list[Message]:
                return [
                    Message("user", f"u{tag}", id=f"u{tag}"),
                    Message("assistant", id=f"a{tag}"),
                ]

            await a.save(turn("0"))
            start_a, start_b = await a.load(), await b.load()
            await a.replace([*start_a, *turn("A")])  # type: ignore[attr-defined]
            await b.replace([*start_b, *turn("B")])  # type: ignore[attr-defined]
            ids = ["u0", "a0", "uB", "aB", "uA", "aA"]
            assert [m.id for m in await a.load()] == ids
            seen = await b.load()
            await b.replace(seen[2:])  # type: ignore[attr-defined]
            assert [m.id for m in await a.load()] == ids[2:]
            await a.save(turn("C"))  # unseen by b: kept by b's next replace
            await b.replace([*seen[2:], *turn("D")])  # type: ignore[attr-defined]
            assert [m.id for m in await a.load()] == [*ids[2:], "uD", "aD", "uC", "aC"]
            blind = store.memory("mem/shared", max_messages=50)
            await blind.replace(turn("E"))  # type: ignore[attr-defined]
            assert [m.id for m in await a.load()] == ["uE", "aE"]
            commit = getattr(blind, "commit", None)
            if callable(commit):  # the base given explicitly: the ids the caller started from
                await a.save(turn("F"))
                await commit([*turn("E"), *turn("G")], base={"uE", "aE"})
                assert [m.id for m in await a.load()] == ["uE", "aE", "uG", "aG", "uF", "aF"]
                for bad in (5, "uE", [1]):  # not a collection of ids: nothing written
                    with pytest.raises(AgentError) as info:
                        await commit(turn("H"), base=bad)
                    assert info.value.code == "INVALID_ARGUMENT"
                assert [m.id for m in await a.load()] == ["uE", "aE", "uG", "aG", "uF", "aF"]

        run_on_store(store_factory, body)

    def test_memory_appends_only_while_nothing_was_written(
        self, store_factory: StoreFactory
    ) -> None:
        """``save_if`` appends while the revision holds; any other write ends it.

        What lets an agent commit a run in what the run added: while ``unchanged``, the
        memory holds what this object last read or wrote, and ``save_if`` appends to it.
        A write by another object on the key (a save, a replace, a clear, even of an
        empty history) makes ``unchanged`` false and ``save_if`` write nothing.
        """

        async def body(store: Store) -> None:
            memory = store.memory("mem/append", max_messages=50)
            needs(isinstance(memory, AppendableMemory), "an appendable memory")
            assert isinstance(memory, AppendableMemory)
            other = store.memory("mem/append", max_messages=50)
            needs(other is not memory, "two memory objects on one key")
            m = alternating(8)
            assert await memory.load() == []
            done = await memory.save_if(m[:2], revision=memory.revision)
            assert done is not None and done.dropped == 0 and done.revision == memory.revision
            assert await memory.unchanged(done.revision)
            done = await memory.save_if(m[2:4], revision=done.revision)
            assert done is not None and await memory.unchanged(done.revision)
            assert [x.id for x in await other.load()] == ["m0", "m1", "m2", "m3"]
            assert await memory.unchanged(done.revision)  # a read is no write
            await other.save(m[4:5])
            assert not await memory.unchanged(done.revision)
            assert await memory.save_if(m[5:6], revision=done.revision) is None
            assert [x.id for x in await memory.load()] == ["m0", "m1", "m2", "m3", "m4"]
            revision = memory.revision
            assert await memory.unchanged(revision)
            for write in (
                lambda: other.save(m[5:6]),
                lambda: other.replace([]),  # type: ignore[attr-defined]
                lambda: other.clear(),
            ):
                await memory.load()
                revision = memory.revision
                await write()
                assert not await memory.unchanged(revision)
                assert await memory.save_if(m[6:7], revision=revision) is None
            assert await memory.load() == []

        run_on_store(store_factory, body)

    def test_memory_save_if_refuses_stored_ids_and_counts_the_window(
        self, store_factory: StoreFactory
    ) -> None:
        """``save_if`` refuses stored or repeated ids; ``dropped`` is what the window cut.

        The caller's view (its history past ``dropped``) then stays what a load returns.
        """

        async def body(store: Store) -> None:
            memory = store.memory("mem/window", max_messages=4)
            needs(isinstance(memory, AppendableMemory), "an appendable memory")
            assert isinstance(memory, AppendableMemory)
            m = alternating(8)
            await memory.load()
            done = await memory.save_if(m[:4], revision=memory.revision)
            assert done is not None and done.dropped == 0
            assert await memory.save_if([m[3], m[4]], revision=done.revision) is None
            assert await memory.save_if([m[4], m[4]], revision=done.revision) is None
            assert await memory.unchanged(done.revision)  # nothing was written
            view = m[:4]
            done = await memory.save_if(m[4:6], revision=done.revision)
            assert done is not None and done.dropped == 2
            view = [*view, *m[4:6]][done.dropped :]
            assert [x.id for x in await memory.load()] == [x.id for x in view]
            assert memory.revision == done.revision  # the load found what the append left

        run_on_store(store_factory, body)

    def test_memory_view_kept_by_save_if_is_what_a_load_returns(
        self, store_factory: StoreFactory
    ) -> None:
        """Random writes by three objects on one key: an agent's invariant always holds.

        A view (what a load returned, extended by each ``save_if`` past its
        ``dropped``) is exactly what a load returns while ``unchanged`` holds. Writes of
        the others (appends, duplicates, replaces, clears, by an object with a smaller
        or a wider window) end that or leave the history as it was.
        """
        needs(store_factory.cross_process, "a durable memory")

        async def body(store: Store) -> None:
            mine = store.memory("mem/invariant", max_messages=6)
            needs(isinstance(mine, AppendableMemory), "an appendable memory")
            assert isinstance(mine, AppendableMemory)
            others = [
                store.memory("mem/invariant", max_messages=3),
                store.memory("mem/invariant", max_messages=12),
            ]
            rng = random.Random(20261204)
            made = 0

            def fresh(n: int) -> list[Message]:
                nonlocal made
                out = alternating(made + n)[made:]
                made += n
                return out

            view = await mine.load()
            revision = mine.revision
            for _ in range(120):
                step = rng.random()
                if step < 0.45:
                    new = fresh(rng.choice((1, 2, 2, 4)))
                    done = await mine.save_if(new, revision=revision)
                    if done is None:
                        view, revision = await mine.load(), mine.revision
                    else:
                        view, revision = [*view, *new][done.dropped :], done.revision
                elif step < 0.85:
                    other = rng.choice(others)
                    kind = rng.random()
                    if kind < 0.5:
                        await other.save(fresh(rng.choice((1, 2))))
                    elif kind < 0.7:
                        seen = await other.load()
                        await other.save(seen[-2:])  # duplicates only
                    elif kind < 0.9:
                        seen = await other.load()
                        await other.replace(seen[1:])  # type: ignore[attr-defined]
                    else:
                        await other.clear()
                if await mine.unchanged(revision):
                    assert [m.id for m in await mine.load()] == [m.id for m in view]
                    assert mine.revision == revision

        run_on_store(store_factory, body)

    def test_one_memory_object_appends_once_from_one_revision(
        self, store_factory: StoreFactory
    ) -> None:
        """Two tasks appending from the same revision on one object: one of them appends."""

        async def body(store: Store) -> None:
            memory = store.memory("mem/twice", max_messages=50)
            needs(isinstance(memory, AppendableMemory), "an appendable memory")
            assert isinstance(memory, AppendableMemory)
            await memory.load()
            revision = memory.revision
            results = await asyncio.gather(
                memory.save_if([Message("user", "a", id="a")], revision=revision),
                memory.save_if([Message("user", "b", id="b")], revision=revision),
            )
            assert sum(r is not None for r in results) == 1, results

        run_on_store(store_factory, body)

    def test_an_agent_commits_a_run_by_appending_it(self, store_factory: StoreFactory) -> None:
        """An agent on an appendable memory appends each run's messages (no replace)."""

        async def body(store: Store) -> None:
            memory = store.memory("mem/agent", max_messages=100)
            needs(isinstance(memory, AppendableMemory), "an appendable memory")
            from ..agent.agent import Agent
            from ..conversation.null import NullConversationManager
            from ..testing.models import FunctionModel

            agent = Agent(
                FunctionModel(lambda history, tools: f"answer {len(history)}"),
                memory=memory,
                conversation_manager=NullConversationManager(),
            )
            await agent.run("one")
            replaced: list[str] = []
            for name in ("replace", "commit"):
                if callable(getattr(memory, name, None)):

                    async def refuse(*args: Any, _name: str = name, **kw: Any) -> None:
                        replaced.append(_name)
                        raise AssertionError(f"{_name} called: the run was not appended")

                    setattr(memory, name, refuse)
            await agent.run("two")
            await agent.run("three")
            assert replaced == []
            texts = [m.text for m in await store.memory("mem/agent", max_messages=100).load()]
            assert texts == ["one", "answer 1", "two", "answer 3", "three", "answer 5"]

        run_on_store(store_factory, body)

    def test_agents_sharing_a_memory_lose_no_turn(self, store_factory: StoreFactory) -> None:
        """Two agents, each with its own memory object on one key, run at the same time."""

        async def body(store: Store) -> None:
            probe = store.memory("mem/agents", max_messages=100)
            needs(probe is not store.memory("mem/agents", max_messages=100), "two memory objects")
            memories = [store.memory("mem/agents", max_messages=100) for _ in range(2)]
            await overlapping_agent_runs(memories, 3)
            texts = [m.text for m in await probe.load()]
            for i in range(3):
                for who in (0, 1):
                    assert texts.count(f"{who} {i}") == 1, texts
                    assert texts.count(f"answer to {who} {i}") == 1, texts

        run_on_store(store_factory, body)

    def test_memory_round_trip_is_exact(self, store_factory: StoreFactory) -> None:
        """Every message field (blocks, calls, metadata, ids) survives a save and a load."""

        async def body(store: Store) -> None:
            memory = store.memory("mem", max_messages=50)
            history = rich_history()
            await memory.save(history)
            assert [m.model_dump_json() for m in await memory.load()] == [
                m.model_dump_json() for m in history
            ]

        run_on_store(store_factory, body)

    def test_corrupt_memory_is_reported(self, store_factory: StoreFactory) -> None:
        """Unreadable stored messages: MEMORY_CORRUPT, never an empty history."""
        corrupter = present(store_factory.corrupter, "a corrupter in the factory")

        async def body(store: Store) -> None:
            memory = store.memory("mem", max_messages=10)
            await memory.save([Message("user", "a"), Message("assistant", "b")])
            await corrupter.corrupt_memory("mem")
            assert await error_code(memory.load)() == "MEMORY_CORRUPT"

        run_on_store(store_factory, body)
