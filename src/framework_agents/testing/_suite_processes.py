"""The store conformance suite: its tests across processes, marked slow (a mixin)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

from ..checkpoint.model import ThreadCheckpoint
from ..messages import Message
from ..sessions.manager import SessionManager
from ..stores._base import Store
from . import _store_workers as workers
from ._suite import StoreFactory, needs, run_on_store, spawn, wait_answer

__all__ = ["ProcessSuite"]


def _all_answer(procs: list[tuple[Any, Any]], expected: tuple[str, int]) -> None:
    """Wait for each spawned worker's answer (it must be ``expected``), then for its exit."""
    for proc, conn in procs:
        assert (got := wait_answer(conn, proc)) == expected, got
        proc.join(30)


def _run_workers(
    store_factory: StoreFactory, worker: Callable[..., None], key: str, count: int, processes: int
) -> None:
    """``processes`` processes run ``worker`` on ``key`` at once, the i-th as ``p{i}``.

    Each does ``count`` of its steps and must answer ``("ok", count)``.
    """
    procs = [spawn(worker, store_factory.open, key, f"p{i}", count) for i in range(processes)]
    _all_answer(procs, ("ok", count))


def _each_turn_once(texts: list[str], workers: int, turns: int) -> None:
    """Every agent's (``p{i}``) prompts and answers stored once, its prompts in order."""
    for i in range(workers):
        for j in range(turns):
            assert texts.count(f"p{i}-{j}") == 1, texts
            assert texts.count(f"answer to p{i}-{j}") == 1, texts
        mine = [t for t in texts if t.startswith(f"p{i}-")]
        assert mine == [f"p{i}-{j}" for j in range(turns)]  # each agent's in order


class ProcessSuite:
    """Conformance tests of several processes (marked slow)."""

    # -- several processes (slow) -----------------------------------------------------------

    @pytest.mark.slow
    def test_concurrent_appends_from_processes_lose_nothing(
        self, store_factory: StoreFactory
    ) -> None:
        """Three processes append to one memory at once: every message once, each in order."""
        needs(store_factory.cross_process, "cross-process sharing")
        _run_workers(store_factory, workers.append_worker, "mem", 20, 3)

        async def body(store: Store) -> None:
            texts = [m.text for m in await store.memory("mem", max_messages=100_000).load()]
            assert sorted(texts) == sorted(f"p{i}-{j}" for i in range(3) for j in range(20))
            for i in range(3):
                mine = [t for t in texts if t.startswith(f"p{i}-")]
                assert mine == [f"p{i}-{j}" for j in range(20)]

        run_on_store(store_factory, body)

    @pytest.mark.slow
    def test_agents_in_processes_sharing_a_memory_lose_no_turn(
        self, store_factory: StoreFactory
    ) -> None:
        """Three processes run agents on one memory key at once: every turn stored once."""
        needs(store_factory.cross_process, "cross-process sharing")
        turns = 8
        _run_workers(store_factory, workers.agent_worker, "mem/agents", turns, 3)

        async def body(store: Store) -> None:
            texts = [m.text for m in await store.memory("mem/agents", max_messages=100_000).load()]
            _each_turn_once(texts, 3, turns)

        run_on_store(store_factory, body)

    @pytest.mark.slow
    def test_agents_in_processes_sharing_a_session_merge_every_turn(
        self, store_factory: StoreFactory
    ) -> None:
        """Three processes run agents on one session at once: every turn stored once, no error.

        Each agent's save that another's beat merges (messages by id, state by key).
        """
        needs(store_factory.cross_process, "cross-process sharing")
        turns = 6
        _run_workers(store_factory, workers.session_agent_worker, "shared", turns, 3)

        async def body(store: Store) -> None:
            latest = await SessionManager("shared", store.storage).load_latest()
            assert latest is not None and latest.data.messages is not None
            texts = [m.text for m in latest.data.messages]
            assert len({m.id for m in latest.data.messages}) == len(texts)
            _each_turn_once(texts, 3, turns)
            for i in range(3):
                for j in range(turns):
                    at = texts.index(f"p{i}-{j}")
                    assert texts[at + 1] == f"answer to p{i}-{j}", texts  # turns stay whole
            assert latest.data.state == {f"p{i}": turns - 1 for i in range(3)}

        run_on_store(store_factory, body)

    @pytest.mark.slow
    def test_compare_and_put_loses_no_update_across_processes(
        self, store_factory: StoreFactory
    ) -> None:
        """Two processes increment one stored counter 20 times each: it ends at 40."""
        needs(store_factory.cross_process, "cross-process sharing")
        probe = store_factory.open()
        able = callable(getattr(probe.storage, "compare_and_put", None))
        asyncio.run(probe.close())
        needs(able, "storage.compare_and_put")
        procs = [spawn(workers.counter_worker, store_factory.open, "counter", 20) for _ in range(2)]
        _all_answer(procs, ("ok", 20))

        async def body(store: Store) -> None:
            assert await store.storage.get("counter") == b"40"

        run_on_store(store_factory, body)

    @pytest.mark.slow
    def test_thread_lock_excludes_runs_across_processes(self, store_factory: StoreFactory) -> None:
        """Two processes, 10 locked turns each on one thread: no lost, duplicated or split turn."""
        needs(store_factory.cross_process, "cross-process sharing")
        turns = 10
        _run_workers(store_factory, workers.turns_worker, "t", turns, 2)

        async def body(store: Store) -> None:
            loaded = await store.checkpointer.load("t")
            assert loaded is not None and loaded.state == {"turns": 2 * turns}
            texts = [m.text for m in loaded.messages]
            pairs = list(zip(texts[::2], texts[1::2], strict=True))
            assert all(u == a for u, a in pairs)  # a turn is never split by another
            assert sorted(u for u, _ in pairs) == sorted(
                f"p{i}-{j}" for i in range(2) for j in range(turns)
            )

        run_on_store(store_factory, body)

    @pytest.mark.slow
    def test_killed_holder_is_replaced_within_its_lease(self, store_factory: StoreFactory) -> None:
        """SIGKILL the process holding a thread: another takes it once the lease runs out."""
        needs(store_factory.cross_process, "cross-process sharing")
        proc, conn = spawn(workers.hold_worker, store_factory.open, "t")
        assert (got := wait_answer(conn, proc)) == ("held", None), got
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
        wait = 3 * (store_factory.lease or 1.0) + 5

        async def body(store: Store) -> None:
            cp = store.checkpointer
            needs(callable(getattr(cp, "thread_lock", None)), "checkpointer.thread_lock")
            async with cp.thread_lock("t", timeout=wait):  # type: ignore[attr-defined]
                await cp.save(ThreadCheckpoint("t", None, [Message("user", "next")], {}))

        run_on_store(store_factory, body)

    @pytest.mark.slow
    def test_stopped_holder_is_fenced(self, store_factory: StoreFactory) -> None:
        """A holder stopped past its lease loses the thread; its late save: CHECKPOINT_CONFLICT."""
        needs(store_factory.cross_process, "cross-process sharing")
        needs(store_factory.lease is not None, "a lease (StoreFactory.lease)")
        probe = store_factory.open()
        fenced = callable(getattr(probe.checkpointer, "fence", None))
        asyncio.run(probe.close())
        needs(fenced, "fenced writes (checkpointer.fence)")
        proc, conn = spawn(workers.stale_worker, store_factory.open, "t")
        try:
            assert (got := wait_answer(conn, proc)) == ("held", None), got
            os.kill(proc.pid, signal.SIGSTOP)
            wait = 3 * (store_factory.lease or 1.0) + 5

            async def take(store: Store) -> None:
                cp = store.checkpointer
                async with cp.thread_lock("t", timeout=wait):  # type: ignore[attr-defined]
                    await cp.load("t")
                    await cp.save(ThreadCheckpoint("t", None, [], {"by": "successor"}))

            run_on_store(store_factory, take)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
        conn.send("go")
        status = wait_answer(conn, proc)
        proc.join(30)
        assert status[:2] == ("error", "CHECKPOINT_CONFLICT"), status

        async def check(store: Store) -> None:
            loaded = await store.checkpointer.load("t")
            assert loaded is not None and loaded.state == {"by": "successor"}

        run_on_store(store_factory, check)
