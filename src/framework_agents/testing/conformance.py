"""One conformance suite for every store backend, shipped or third-party.

Subclass :class:`StoreConformance` in a test module and give it a ``store_factory``
fixture that returns a :class:`StoreFactory` for a fresh, empty namespace (a new
directory, schema or key prefix) and cleans it up afterwards::

    import functools, pytest
    from framework_agents.testing.conformance import StoreConformance, StoreFactory

    def open_mine(url: str) -> Store: ...          # top level: child processes import it

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return StoreFactory(functools.partial(open_mine, str(tmp_path)), lease=2.0)

Capabilities are detected, and a test whose capability is missing is skipped with the
reason: ``thread_lock`` and ``fence`` on the checkpointer, ``prune`` on the storage and
the checkpointer, ``replace`` on memories, ``cross_process`` and ``lease`` and
``corrupter`` on the factory. Tests that start OS processes (concurrent appends, lock
exclusion, a killed holder, a fenced stale writer) are marked ``slow``; they use the
``spawn`` start method, so ``StoreFactory.open`` must be picklable (a module-level
function or a ``functools.partial`` of one).

Needs pytest (a test dependency, not a runtime one): import this module from tests only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import os
import random
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar

import pytest

from ..checkpoint._base import thread_lock
from ..checkpoint.model import ThreadCheckpoint
from ..errors import AgentError
from ..memory._base import AppendableMemory, Memory
from ..messages import Message, ReasoningBlock, TextBlock, ToolCall
from ..sessions._base import as_logged, digest
from ..sessions.manager import SessionManager
from ..sessions.snapshot import Snapshot, SnapshotData
from ..stores._base import Store
from . import _store_workers as workers

__all__ = ["Corrupter", "StoreConformance", "StoreFactory", "overlapping_agent_runs"]

T = TypeVar("T")

#: Keys no backend may accept (STORAGE_KEY_INVALID).
HOSTILE_KEYS = ["", "/abs", "a/../b", "..", "a//b", "a\\b", "a\0b", "a/", "con", "x/.hidden", "é"]
#: Thread ids no backend may accept (THREAD_ID_INVALID).
HOSTILE_THREAD_IDS = ["", "..", ".hidden", "a/b", "a\\b", "a\0b", "x" * 200, "sp ace", "é"]


class Corrupter(Protocol):
    """Writes bytes a backend never writes, behind its back (picklable)."""

    async def corrupt_checkpoint(self, thread_id: str) -> None:
        """Make the stored checkpoint of ``thread_id`` unreadable."""
        ...

    async def corrupt_memory(self, key: str) -> None:
        """Make the stored memory ``key`` unreadable."""
        ...


@dataclass(frozen=True)
class StoreFactory:
    """How the suite opens the backend under test (see the module docstring).

    ``open``: returns a new :class:`Store` on the namespace under test (each call a new
    connection to the same data). ``cross_process``: whether stores opened in other
    processes share that data. ``lease``: seconds a dead or stopped holder keeps a
    thread (``None``: the backend has no lease; a dead holder is replaced at once).
    ``corrupter``: writes unreadable data, for the ``*_CORRUPT`` tests.
    """

    open: Callable[[], Store]
    cross_process: bool = True
    lease: float | None = None
    corrupter: Corrupter | None = None


def _run(factory: StoreFactory, body: Callable[[Store], Awaitable[T]]) -> T:
    async def main() -> T:
        store = factory.open()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _code(call: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], Awaitable[str | None]]:
    async def run() -> str | None:
        try:
            await call()
        except AgentError as exc:
            return exc.code
        return None

    return run


def _rich_history() -> list[Message]:
    call = ToolCall("c1", "lookup", {"q": "ünï", "n": [1, 2.5, None, True], "d": {"k": "v"}})
    return [
        Message("system", "be brief"),
        Message("user", [TextBlock("hi "), TextBlock("there")], metadata={"k": [1, {"x": None}]}),
        Message(
            "assistant",
            [ReasoningBlock("think", signature="sig"), TextBlock("")],
            tool_calls=[call],
        ),
        Message("tool", "42", tool_call_id="c1", name="lookup"),
        Message("assistant", "the answer is 42 \U0001f600"),
    ]


async def overlapping_agent_runs(memories: Sequence[Memory], rounds: int) -> None:
    """One agent per memory (two may share one), their runs overlapping ``rounds`` times.

    Agent ``k``'s prompt in round ``i`` is ``"k i"``, its answer ``"answer to k i"``; the
    scripted model waits until every agent of the round has read its history before any
    answers, so each commit meets the others' turns stored meanwhile.
    """
    from ..agent import Agent
    from ..conversation import NullConversationManager
    from .models import FunctionModel

    all_started = asyncio.Barrier(len(memories))

    async def reply(history: list[Message], tools: object) -> str:
        await all_started.wait()
        return f"answer to {history[-1].text}"

    agents = [
        Agent(FunctionModel(reply), memory=m, conversation_manager=NullConversationManager())
        for m in memories
    ]
    for i in range(rounds):
        await asyncio.gather(*(agent.run(f"{k} {i}") for k, agent in enumerate(agents)))


def _alternating(n: int) -> list[Message]:
    """``n`` messages, user and assistant in turn, with ids ``m0``, ``m1``..."""
    return [Message("user" if i % 2 == 0 else "assistant", f"m{i}", id=f"m{i}") for i in range(n)]


def _needs(condition: bool, reason: str) -> None:
    if not condition:
        pytest.skip(f"capability missing: {reason}")


def _spawn(target: Callable[..., None], *args: Any) -> tuple[Any, Any]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child, *args), daemon=True)
    proc.start()
    child.close()
    return proc, parent


def _wait(conn: Any, proc: Any, timeout: float = 120.0) -> Any:
    if not conn.poll(timeout):
        proc.kill()
        raise AssertionError(f"child process {proc.pid} did not answer within {timeout}s")
    return conn.recv()


class StoreConformance:
    """The contracts of API.md "Durable stores", for the backend of ``store_factory``."""

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """Override: a factory for a fresh, empty namespace of the backend under test."""
        raise NotImplementedError("define a store_factory fixture in the subclass")

    # -- storage ------------------------------------------------------------------------

    def test_storage_round_trip_and_sorted_listing(self, store_factory: StoreFactory) -> None:
        """put/get/delete/list behave like the file backend (bytes exact, keys sorted)."""

        async def body(store: Store) -> None:
            s = store.storage
            values = {"b/2": b"\x00\xff two", "a": b"", "b/1": bytes(range(256)), "c.d/e_f-g": b"x"}
            for key, value in values.items():
                await s.put(key, value)
            assert await s.list() == sorted(values)
            assert await s.list("b/") == ["b/1", "b/2"]
            assert await s.list("b") == ["b/1", "b/2"]
            for key, value in values.items():
                assert await s.get(key) == value
            await s.put("a", b"again")
            assert await s.get("a") == b"again"
            await s.delete("b/1")
            await s.delete("missing")
            assert await s.get("b/1") is None
            assert await s.list() == ["a", "b/2", "c.d/e_f-g"]

        _run(store_factory, body)

    def test_storage_key_is_a_value_or_a_directory(self, store_factory: StoreFactory) -> None:
        """Storing ``a`` under ``a/b`` (or the reverse) is STORAGE_KEY_INVALID."""

        async def body(store: Store) -> None:
            s = store.storage
            await s.put("a/b", b"1")
            assert await _code(lambda: s.put("a", b"2"))() == "STORAGE_KEY_INVALID"
            await s.put("c", b"1")
            assert await _code(lambda: s.put("c/d", b"2"))() == "STORAGE_KEY_INVALID"
            assert await s.list() == ["a/b", "c"]

        _run(store_factory, body)

    @pytest.mark.parametrize("key", HOSTILE_KEYS, ids=repr)
    def test_storage_refuses_hostile_keys(self, store_factory: StoreFactory, key: str) -> None:
        """Every method refuses a hostile key before touching anything."""

        async def body(store: Store) -> None:
            s = store.storage
            for call in (lambda: s.put(key, b"x"), lambda: s.get(key), lambda: s.delete(key)):
                assert await _code(call)() == "STORAGE_KEY_INVALID"
            with pytest.raises(AgentError) as info:
                store.memory(key)
            assert info.value.code == "STORAGE_KEY_INVALID"
            assert await s.list() == []

        _run(store_factory, body)

    def test_session_manager_round_trip_and_corrupt_snapshot(
        self, store_factory: StoreFactory
    ) -> None:
        """SessionManager works on the storage; bytes that are no snapshot: SNAPSHOT_CORRUPT."""

        async def body(store: Store) -> None:
            manager = SessionManager("s1", store.storage)
            snapshot = Snapshot(SnapshotData(messages=_rich_history(), state={"k": 1}))
            await manager.save_latest(snapshot)
            loaded = await manager.load_latest()
            assert loaded is not None and loaded.to_json() == snapshot.to_json()
            await store.storage.put(manager.latest_key, b'{"schema_version": 1, "dat')
            with pytest.raises(AgentError) as info:
                await manager.load_latest()
            assert info.value.code == "SNAPSHOT_CORRUPT"

        _run(store_factory, body)

    def test_storage_compare_and_put(self, store_factory: StoreFactory) -> None:
        """compare_and_put writes only over the expected value; else CHECKPOINT_CONFLICT."""

        async def body(store: Store) -> None:
            cas: Any = getattr(store.storage, "compare_and_put", None)
            _needs(callable(cas), "storage.compare_and_put")
            await cas("k", b"1", expected=None)
            assert await _code(lambda: cas("k", b"x", expected=None))() == "CHECKPOINT_CONFLICT"
            await cas("k", b"2", expected=b"1")
            assert await _code(lambda: cas("k", b"x", expected=b"1"))() == "CHECKPOINT_CONFLICT"
            assert await store.storage.get("k") == b"2"
            assert await _code(lambda: cas("k/sub", b"x", expected=None))() in {
                "STORAGE_KEY_INVALID",
                "CHECKPOINT_CONFLICT",
            }
            assert await store.storage.list() == ["k"]

        _run(store_factory, body)

    def test_storage_prune(self, store_factory: StoreFactory) -> None:
        """prune(older_than) removes what was not written since, and keeps the rest."""

        async def body(store: Store) -> None:
            prune = getattr(store.storage, "prune", None)
            _needs(callable(prune), "storage.prune")
            assert prune is not None
            await store.storage.put("old", b"1")
            assert await prune(timedelta(days=1)) == 0
            assert await prune(timedelta(0)) == 1
            assert await store.storage.list() == []

        _run(store_factory, body)

    def test_storage_logged_values(self, store_factory: StoreFactory) -> None:
        """Records appended to a value: tags move on, a stale tag is refused, a store resets."""

        async def body(store: Store) -> None:
            s = as_logged(store.storage)
            _needs(s is not None, "logged values (read_logged/append_logged/swap)")
            assert s is not None
            assert await s.read_logged("v") == (None, [], None)
            assert await _code(lambda: s.append_logged("v", b"r", "x"))() == "CHECKPOINT_CONFLICT"
            await s.put("v", b"base")
            tag0 = digest(b"base")
            assert await s.read_logged("v") == (b"base", [], tag0)
            tag1 = await s.append_logged("v", b"r1", tag0)
            tag2 = await s.append_logged("v", b"\x00r2\n", tag1)
            assert len({tag0, tag1, tag2}) == 3
            assert await s.read_logged("v") == (b"base", [b"r1", b"\x00r2\n"], tag2)
            assert await s.get("v") == b"base"  # the value alone is what was stored
            for stale in (tag0, tag1):  # a writer that missed an append writes nothing
                append = _code(functools.partial(s.append_logged, "v", b"x", stale))
                assert await append() == "CHECKPOINT_CONFLICT"
                assert await _code(functools.partial(s.swap, "v", b"x", stale))() == (
                    "CHECKPOINT_CONFLICT"
                )
            assert await _code(lambda: s.swap("v", b"x", None))() == "CHECKPOINT_CONFLICT"
            cas: Any = getattr(s, "compare_and_put", None)
            if callable(cas):  # a value with records holds more than its bytes
                assert await _code(lambda: cas("v", b"x", expected=b"base"))() == (
                    "CHECKPOINT_CONFLICT"
                )
            assert (await s.read_logged("v"))[1] == [b"r1", b"\x00r2\n"]
            await s.swap("v", b"folded", tag2)  # storing a value starts a new log
            assert await s.read_logged("v") == (b"folded", [], digest(b"folded"))
            tag3 = await s.append_logged("v", b"r3", digest(b"folded"))
            await s.put("v", b"plain")
            assert await s.read_logged("v") == (b"plain", [], digest(b"plain"))
            assert await _code(lambda: s.append_logged("v", b"x", tag3))() == (
                "CHECKPOINT_CONFLICT"
            )
            await s.append_logged("v", b"r4", digest(b"plain"))
            await s.delete("v")  # the log goes with the value
            assert await s.read_logged("v") == (None, [], None)
            await s.swap("v", b"new", None)
            assert await s.read_logged("v") == (b"new", [], digest(b"new"))
            assert await s.list() == ["v"]

        _run(store_factory, body)

    def test_session_saves_append_what_is_new(self, store_factory: StoreFactory) -> None:
        """On a logging storage a grown session is one record; another writer is refused."""

        async def body(store: Store) -> None:
            s = as_logged(store.storage)
            _needs(s is not None, "logged values (read_logged/append_logged/swap)")
            assert s is not None
            manager = SessionManager("s1", store.storage)
            history = _rich_history()
            await manager.save_latest(Snapshot(SnapshotData(messages=history[:2])))
            for n in range(3, len(history) + 1):
                await manager.save_latest(Snapshot(SnapshotData(messages=history[:n])))
            value, records, _ = await s.read_logged(manager.latest_key)
            assert value is not None and len(records) == len(history) - 2
            assert max(map(len, records)) < len(value) + 400  # a record holds one message
            other = SessionManager("s1", store.storage)
            loaded = await other.load_latest()
            assert loaded is not None
            assert loaded.data.messages is not None
            assert [m.model_dump() for m in loaded.data.messages] == [
                m.model_dump() for m in history
            ]
            grown = [*history, Message("user", "more")]
            await other.save_latest(Snapshot(SnapshotData(messages=grown)))
            with pytest.raises(AgentError) as info:  # it did not see the other's save
                await manager.save_latest(Snapshot(SnapshotData(messages=[*history, history[0]])))
            assert info.value.code == "CHECKPOINT_CONFLICT"
            again = await manager.load_latest()
            assert again is not None and again.data.messages is not None
            assert [m.text for m in again.data.messages][-1] == "more"

        _run(store_factory, body)

    # -- checkpointer -------------------------------------------------------------------

    def test_checkpoint_round_trip_keeps_every_field(self, store_factory: StoreFactory) -> None:
        """Every field of ThreadCheckpoint comes back equal (JSON-equal), ids sorted."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            history = _rich_history()
            pending = ToolCall("c9", "pay", {"amount": 10.5})
            saved = ThreadCheckpoint(
                "t-2",
                None,
                history,
                {"nested": {"a": [1, "two"]}},
                pending,
                decisions={"pay": "approve"},
            )
            await cp.save(saved)
            await cp.save(ThreadCheckpoint("t-1", None, [], {}))
            loaded = await cp.load("t-2")
            assert loaded is not None
            assert loaded.model_dump_json() == saved.model_dump_json()
            assert await cp.list_threads() == ["t-1", "t-2"]
            assert await cp.load("nobody") is None
            await cp.delete("t-1")
            await cp.delete("t-1")
            assert await cp.list_threads() == ["t-2"]

        _run(store_factory, body)

    def test_an_inconsistent_checkpoint_is_refused_and_nothing_stored(
        self, store_factory: StoreFactory
    ) -> None:
        """Turn fields that disagree (made with ``model_copy``, which skips validators)."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            base = ThreadCheckpoint("t1", None, [Message("user", "q", id="q")], {})
            await cp.save(base)
            orphan = Message("tool", "r", tool_call_id="nobody", name="f")
            turn = Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})])
            for bad in (
                base.model_copy(update={"in_flight": [ToolCall("c1", "f", {})]}),
                base.model_copy(update={"turn": turn, "results": [orphan]}),
            ):
                assert await _code(functools.partial(cp.save, bad))() == "INVALID_ARGUMENT"
            loaded = await cp.load("t1")
            assert loaded is not None and loaded.model_dump_json() == base.model_dump_json()

        _run(store_factory, body)

    def test_checkpoint_append_edit_and_truncate(self, store_factory: StoreFactory) -> None:
        """A grown, an edited and a shortened history each load back exactly."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            history = [Message("user", f"u{i}") for i in range(6)]
            await cp.save(ThreadCheckpoint("t", None, history[:3], {"n": 1}))
            await cp.save(ThreadCheckpoint("t", None, history, {"n": 2}))
            edited = [
                *history[:2],
                history[2].model_copy(update={"content": "edited"}),
                *history[3:],
            ]
            await cp.save(ThreadCheckpoint("t", None, edited, {"n": 3}))
            loaded = await cp.load("t")
            assert loaded is not None and [m.text for m in loaded.messages] == [
                m.text for m in edited
            ]
            await cp.save(ThreadCheckpoint("t", None, edited[:2], {"n": 4}))
            again = await cp.load("t")
            assert again is not None and again.messages == edited[:2] and again.state == {"n": 4}
            if store_factory.cross_process:  # what another process reads, not a cache
                other = store_factory.open()
                try:
                    fresh = await other.checkpointer.load("t")
                finally:
                    await other.close()
                assert fresh is not None and fresh.messages == edited[:2]

        _run(store_factory, body)

    @pytest.mark.parametrize("thread_id", HOSTILE_THREAD_IDS, ids=repr)
    def test_checkpointer_refuses_hostile_thread_ids(
        self, store_factory: StoreFactory, thread_id: str
    ) -> None:
        """load/delete/thread_lock refuse a hostile thread id (THREAD_ID_INVALID)."""

        async def body(store: Store) -> None:
            cp = store.checkpointer

            async def lock() -> None:
                async with thread_lock(cp, thread_id):
                    pass

            for call in (lambda: cp.load(thread_id), lambda: cp.delete(thread_id), lock):
                assert await _code(call)() == "THREAD_ID_INVALID"

        _run(store_factory, body)

    def test_thread_lock_excludes_a_second_run(self, store_factory: StoreFactory) -> None:
        """A second hold of a held thread waits, then THREAD_BUSY; saves inside still work."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            _needs(callable(getattr(cp, "thread_lock", None)), "checkpointer.thread_lock")
            other = store_factory.open() if store_factory.cross_process else store
            try:
                async with cp.thread_lock("t"):  # type: ignore[attr-defined]
                    await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {}))
                    with pytest.raises(AgentError) as info:
                        async with other.checkpointer.thread_lock("t", timeout=0.1):  # type: ignore[attr-defined]
                            pass
                    assert info.value.code == "THREAD_BUSY"
                async with other.checkpointer.thread_lock("t", timeout=5):  # type: ignore[attr-defined]
                    pass
            finally:
                if other is not store:
                    await other.close()

        _run(store_factory, body)

    def test_thread_lock_is_not_reentrant(self, store_factory: StoreFactory) -> None:
        """A run that holds a thread and asks for it again waits, then THREAD_BUSY."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            _needs(callable(getattr(cp, "thread_lock", None)), "checkpointer.thread_lock")
            async with cp.thread_lock("t"):  # type: ignore[attr-defined]
                with pytest.raises(AgentError) as info:
                    async with cp.thread_lock("t", timeout=0.1):  # type: ignore[attr-defined]
                        pass
                assert info.value.code == "THREAD_BUSY"
                await cp.save(ThreadCheckpoint("t", None, [Message("user", "still mine")], {}))
            loaded = await cp.load("t")
            assert loaded is not None and loaded.messages[0].text == "still mine"

        _run(store_factory, body)

    def test_stale_version_is_a_conflict(self, store_factory: StoreFactory) -> None:
        """A writer whose view of the thread is stale gets CHECKPOINT_CONFLICT, writes nothing."""
        _needs(store_factory.cross_process, "two opens sharing data")

        async def body(store: Store) -> None:
            cp = store.checkpointer
            _needs(callable(getattr(cp, "fence", None)), "fenced writes (checkpointer.fence)")
            await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {"v": 1}))
            other = store_factory.open()
            try:
                assert await other.checkpointer.load("t") is not None
                assert await cp.load("t") is not None
                await cp.save(ThreadCheckpoint("t", None, [Message("user", "b")], {"v": 2}))
                late = ThreadCheckpoint("t", None, [Message("user", "c")], {"v": 3})
                assert await _code(lambda: other.checkpointer.save(late))() == "CHECKPOINT_CONFLICT"
                # Someone else's live lock refuses an unlocked write as well.
                async with cp.thread_lock("t"):  # type: ignore[attr-defined]
                    code = await _code(lambda: other.checkpointer.save(late))()
                    assert code == "CHECKPOINT_CONFLICT"
            finally:
                await other.close()
            loaded = await cp.load("t")
            assert loaded is not None and loaded.state == {"v": 2}

        _run(store_factory, body)

    def test_checkpointer_prune_keeps_held_and_pending_threads(
        self, store_factory: StoreFactory
    ) -> None:
        """prune() removes idle threads, never a held one or one with a pending approval."""

        async def body(store: Store) -> None:
            cp = store.checkpointer
            prune = getattr(cp, "prune", None)
            _needs(callable(prune), "checkpointer.prune")
            assert prune is not None
            pending = ToolCall("c1", "pay", {})
            await cp.save(ThreadCheckpoint("idle", None, [Message("user", "a")], {}))
            await cp.save(ThreadCheckpoint("pending", None, [], {}, pending))
            await cp.save(ThreadCheckpoint("held", None, [], {}))
            async with thread_lock(cp, "held"):
                assert await prune(timedelta(days=1)) == 0
                assert await prune(timedelta(0)) == 1
            assert await cp.list_threads() == ["held", "pending"]

        _run(store_factory, body)

    def test_corrupt_checkpoint_is_reported(self, store_factory: StoreFactory) -> None:
        """Unreadable stored data: CHECKPOINT_CORRUPT on load, left as it is."""
        corrupter = store_factory.corrupter
        _needs(corrupter is not None, "a corrupter in the factory")
        assert corrupter is not None

        async def body(store: Store) -> None:
            cp = store.checkpointer
            await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {}))
            await corrupter.corrupt_checkpoint("t")
            for _ in range(2):
                assert await _code(lambda: cp.load("t"))() == "CHECKPOINT_CORRUPT"

        _run(store_factory, body)

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

        _run(store_factory, body)

    def test_memory_replace_is_atomic_swap(self, store_factory: StoreFactory) -> None:
        """replace() makes the given history (windowed) the stored one."""

        async def body(store: Store) -> None:
            memory = store.memory("mem", max_messages=3)
            replace = getattr(memory, "replace", None)
            _needs(callable(replace), "memory.replace")
            assert replace is not None
            await memory.save(_rich_history())
            await replace([Message("user", f"r{i}") for i in range(5)])
            assert [m.text for m in await memory.load()] == ["r2", "r3", "r4"]

        _run(store_factory, body)

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

        _run(store_factory, body)

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
            _needs(a is not b, "two memory objects on one key")
            _needs(callable(getattr(a, "replace", None)), "memory.replace")

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

        _run(store_factory, body)

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
            _needs(isinstance(memory, AppendableMemory), "an appendable memory")
            assert isinstance(memory, AppendableMemory)
            other = store.memory("mem/append", max_messages=50)
            _needs(other is not memory, "two memory objects on one key")
            m = _alternating(8)
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

        _run(store_factory, body)

    def test_memory_save_if_refuses_stored_ids_and_counts_the_window(
        self, store_factory: StoreFactory
    ) -> None:
        """``save_if`` refuses stored or repeated ids; ``dropped`` is what the window cut.

        The caller's view (its history past ``dropped``) then stays what a load returns.
        """

        async def body(store: Store) -> None:
            memory = store.memory("mem/window", max_messages=4)
            _needs(isinstance(memory, AppendableMemory), "an appendable memory")
            assert isinstance(memory, AppendableMemory)
            m = _alternating(8)
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

        _run(store_factory, body)

    def test_memory_view_kept_by_save_if_is_what_a_load_returns(
        self, store_factory: StoreFactory
    ) -> None:
        """Random writes by three objects on one key: an agent's invariant always holds.

        A view (what a load returned, extended by each ``save_if`` past its
        ``dropped``) is exactly what a load returns while ``unchanged`` holds. Writes of
        the others (appends, duplicates, replaces, clears, by an object with a smaller
        or a wider window) end that or leave the history as it was.
        """
        _needs(store_factory.cross_process, "a durable memory")

        async def body(store: Store) -> None:
            mine = store.memory("mem/invariant", max_messages=6)
            _needs(isinstance(mine, AppendableMemory), "an appendable memory")
            assert isinstance(mine, AppendableMemory)
            others = [
                store.memory("mem/invariant", max_messages=3),
                store.memory("mem/invariant", max_messages=12),
            ]
            rng = random.Random(20261204)
            made = 0

            def fresh(n: int) -> list[Message]:
                nonlocal made
                out = _alternating(made + n)[made:]
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

        _run(store_factory, body)

    def test_one_memory_object_appends_once_from_one_revision(
        self, store_factory: StoreFactory
    ) -> None:
        """Two tasks appending from the same revision on one object: one of them appends."""

        async def body(store: Store) -> None:
            memory = store.memory("mem/twice", max_messages=50)
            _needs(isinstance(memory, AppendableMemory), "an appendable memory")
            assert isinstance(memory, AppendableMemory)
            await memory.load()
            revision = memory.revision
            results = await asyncio.gather(
                memory.save_if([Message("user", "a", id="a")], revision=revision),
                memory.save_if([Message("user", "b", id="b")], revision=revision),
            )
            assert sum(r is not None for r in results) == 1, results

        _run(store_factory, body)

    def test_an_agent_commits_a_run_by_appending_it(self, store_factory: StoreFactory) -> None:
        """An agent on an appendable memory appends each run's messages (no replace)."""

        async def body(store: Store) -> None:
            memory = store.memory("mem/agent", max_messages=100)
            _needs(isinstance(memory, AppendableMemory), "an appendable memory")
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

        _run(store_factory, body)

    def test_agents_sharing_a_memory_lose_no_turn(self, store_factory: StoreFactory) -> None:
        """Two agents, each with its own memory object on one key, run at the same time."""

        async def body(store: Store) -> None:
            probe = store.memory("mem/agents", max_messages=100)
            _needs(probe is not store.memory("mem/agents", max_messages=100), "two memory objects")
            memories = [store.memory("mem/agents", max_messages=100) for _ in range(2)]
            await overlapping_agent_runs(memories, 3)
            texts = [m.text for m in await probe.load()]
            for i in range(3):
                for who in (0, 1):
                    assert texts.count(f"{who} {i}") == 1, texts
                    assert texts.count(f"answer to {who} {i}") == 1, texts

        _run(store_factory, body)

    def test_memory_round_trip_is_exact(self, store_factory: StoreFactory) -> None:
        """Every message field (blocks, calls, metadata, ids) survives a save and a load."""

        async def body(store: Store) -> None:
            memory = store.memory("mem", max_messages=50)
            history = _rich_history()
            await memory.save(history)
            assert [m.model_dump_json() for m in await memory.load()] == [
                m.model_dump_json() for m in history
            ]

        _run(store_factory, body)

    def test_corrupt_memory_is_reported(self, store_factory: StoreFactory) -> None:
        """Unreadable stored messages: MEMORY_CORRUPT, never an empty history."""
        corrupter = store_factory.corrupter
        _needs(corrupter is not None, "a corrupter in the factory")
        assert corrupter is not None

        async def body(store: Store) -> None:
            memory = store.memory("mem", max_messages=10)
            await memory.save([Message("user", "a"), Message("assistant", "b")])
            await corrupter.corrupt_memory("mem")
            assert await _code(memory.load)() == "MEMORY_CORRUPT"

        _run(store_factory, body)

    # -- several processes (slow) -----------------------------------------------------------

    @pytest.mark.slow
    def test_concurrent_appends_from_processes_lose_nothing(
        self, store_factory: StoreFactory
    ) -> None:
        """Three processes append to one memory at once: every message once, each in order."""
        _needs(store_factory.cross_process, "cross-process sharing")
        procs = [
            _spawn(workers.append_worker, store_factory.open, "mem", f"p{i}", 20) for i in range(3)
        ]
        for proc, conn in procs:
            assert (got := _wait(conn, proc)) == ("ok", 20), got
            proc.join(30)

        async def body(store: Store) -> None:
            texts = [m.text for m in await store.memory("mem", max_messages=100_000).load()]
            assert sorted(texts) == sorted(f"p{i}-{j}" for i in range(3) for j in range(20))
            for i in range(3):
                mine = [t for t in texts if t.startswith(f"p{i}-")]
                assert mine == [f"p{i}-{j}" for j in range(20)]

        _run(store_factory, body)

    @pytest.mark.slow
    def test_agents_in_processes_sharing_a_memory_lose_no_turn(
        self, store_factory: StoreFactory
    ) -> None:
        """Three processes run agents on one memory key at once: every turn stored once."""
        _needs(store_factory.cross_process, "cross-process sharing")
        turns = 8
        procs = [
            _spawn(workers.agent_worker, store_factory.open, "mem/agents", f"p{i}", turns)
            for i in range(3)
        ]
        for proc, conn in procs:
            assert (got := _wait(conn, proc)) == ("ok", turns), got
            proc.join(30)

        async def body(store: Store) -> None:
            texts = [m.text for m in await store.memory("mem/agents", max_messages=100_000).load()]
            for i in range(3):
                for j in range(turns):
                    assert texts.count(f"p{i}-{j}") == 1, texts
                    assert texts.count(f"answer to p{i}-{j}") == 1, texts
                mine = [t for t in texts if t.startswith(f"p{i}-")]
                assert mine == [f"p{i}-{j}" for j in range(turns)]  # each agent's in order

        _run(store_factory, body)

    @pytest.mark.slow
    def test_compare_and_put_loses_no_update_across_processes(
        self, store_factory: StoreFactory
    ) -> None:
        """Two processes increment one stored counter 20 times each: it ends at 40."""
        _needs(store_factory.cross_process, "cross-process sharing")
        probe = store_factory.open()
        able = callable(getattr(probe.storage, "compare_and_put", None))
        asyncio.run(probe.close())
        _needs(able, "storage.compare_and_put")
        procs = [
            _spawn(workers.counter_worker, store_factory.open, "counter", 20) for _ in range(2)
        ]
        for proc, conn in procs:
            assert (got := _wait(conn, proc)) == ("ok", 20), got
            proc.join(30)

        async def body(store: Store) -> None:
            assert await store.storage.get("counter") == b"40"

        _run(store_factory, body)

    @pytest.mark.slow
    def test_thread_lock_excludes_runs_across_processes(self, store_factory: StoreFactory) -> None:
        """Two processes, 10 locked turns each on one thread: no lost, duplicated or split turn."""
        _needs(store_factory.cross_process, "cross-process sharing")
        turns = 10
        procs = [
            _spawn(workers.turns_worker, store_factory.open, "t", f"p{i}", turns) for i in range(2)
        ]
        for proc, conn in procs:
            assert (got := _wait(conn, proc)) == ("ok", turns), got
            proc.join(30)

        async def body(store: Store) -> None:
            loaded = await store.checkpointer.load("t")
            assert loaded is not None and loaded.state == {"turns": 2 * turns}
            texts = [m.text for m in loaded.messages]
            pairs = list(zip(texts[::2], texts[1::2], strict=True))
            assert all(u == a for u, a in pairs)  # a turn is never split by another
            assert sorted(u for u, _ in pairs) == sorted(
                f"p{i}-{j}" for i in range(2) for j in range(turns)
            )

        _run(store_factory, body)

    @pytest.mark.slow
    def test_killed_holder_is_replaced_within_its_lease(self, store_factory: StoreFactory) -> None:
        """SIGKILL the process holding a thread: another takes it once the lease runs out."""
        _needs(store_factory.cross_process, "cross-process sharing")
        proc, conn = _spawn(workers.hold_worker, store_factory.open, "t")
        assert (got := _wait(conn, proc)) == ("held", None), got
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
        wait = 3 * (store_factory.lease or 1.0) + 5

        async def body(store: Store) -> None:
            cp = store.checkpointer
            _needs(callable(getattr(cp, "thread_lock", None)), "checkpointer.thread_lock")
            async with cp.thread_lock("t", timeout=wait):  # type: ignore[attr-defined]
                await cp.save(ThreadCheckpoint("t", None, [Message("user", "next")], {}))

        _run(store_factory, body)

    @pytest.mark.slow
    def test_stopped_holder_is_fenced(self, store_factory: StoreFactory) -> None:
        """A holder stopped past its lease loses the thread; its late save: CHECKPOINT_CONFLICT."""
        _needs(store_factory.cross_process, "cross-process sharing")
        _needs(store_factory.lease is not None, "a lease (StoreFactory.lease)")
        probe = store_factory.open()
        fenced = callable(getattr(probe.checkpointer, "fence", None))
        asyncio.run(probe.close())
        _needs(fenced, "fenced writes (checkpointer.fence)")
        proc, conn = _spawn(workers.stale_worker, store_factory.open, "t")
        try:
            assert (got := _wait(conn, proc)) == ("held", None), got
            os.kill(proc.pid, signal.SIGSTOP)
            wait = 3 * (store_factory.lease or 1.0) + 5

            async def take(store: Store) -> None:
                cp = store.checkpointer
                async with cp.thread_lock("t", timeout=wait):  # type: ignore[attr-defined]
                    await cp.load("t")
                    await cp.save(ThreadCheckpoint("t", None, [], {"by": "successor"}))

            _run(store_factory, take)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
        conn.send("go")
        status = _wait(conn, proc)
        proc.join(30)
        assert status[:2] == ("error", "CHECKPOINT_CONFLICT"), status

        async def check(store: Store) -> None:
            loaded = await store.checkpointer.load("t")
            assert loaded is not None and loaded.state == {"by": "successor"}

        _run(store_factory, check)
