"""Concurrent ``save_latest`` never loses an acknowledged update (compare-and-swap)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import sys
from pathlib import Path

import pytest

from framework_agents import (
    AgentError,
    InMemoryStorage,
    LocalFileStorage,
    SessionManager,
    Snapshot,
    SnapshotData,
)
from framework_agents.sessions import Storage

sys.path.insert(0, str(Path(__file__).parent))  # children import the worker module by name
import sessions_workers as workers

WRITERS, UPDATES = 8, 12


def _snap(n: int) -> Snapshot:
    return Snapshot(SnapshotData(state={"n": n}))


@pytest.mark.parametrize("backend", ["memory", "file"])
def test_a_stale_writer_is_refused_and_writes_nothing(tmp_path: Path, backend: str) -> None:
    storage: Storage = InMemoryStorage() if backend == "memory" else LocalFileStorage(tmp_path)

    async def main() -> None:
        mine, theirs = SessionManager("s", storage), SessionManager("s", storage)
        assert await mine.load_latest() is None
        assert await theirs.load_latest() is None
        await theirs.save_latest(_snap(1))
        with pytest.raises(AgentError) as info:
            await mine.save_latest(_snap(2))
        assert info.value.code == "CHECKPOINT_CONFLICT"
        latest = await SessionManager("s", storage).load_latest()
        assert latest is not None and latest.data.state == {"n": 1}
        reloaded = await mine.load_latest()
        assert reloaded is not None
        await mine.save_latest(_snap(3))  # after reading again it may write
        await mine.save_latest(_snap(4))  # and go on writing what it wrote
        latest = await theirs.load_latest()
        assert latest is not None and latest.data.state == {"n": 4}

    asyncio.run(main())


class _PutOnly:
    """A third-party storage without ``swap``: ``save_latest`` falls back to ``put``."""

    def __init__(self) -> None:
        self.inner = InMemoryStorage()

    async def put(self, key: str, data: bytes) -> None:
        await self.inner.put(key, data)

    async def get(self, key: str) -> bytes | None:
        return await self.inner.get(key)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def list(self, prefix: str = "") -> list[str]:
        return await self.inner.list(prefix)


def test_a_storage_without_swap_gets_a_put() -> None:
    async def main() -> None:
        storage = _PutOnly()
        mine, theirs = SessionManager("s", storage), SessionManager("s", storage)
        await mine.load_latest()
        await theirs.save_latest(_snap(1))
        await mine.save_latest(_snap(2))
        latest = await theirs.load_latest()
        assert latest is not None and latest.data.state == {"n": 2}

    asyncio.run(main())


@pytest.mark.slow
@pytest.mark.parametrize("append", [False, True], ids=["put", "append"])
def test_eight_processes_updating_one_session_lose_nothing(tmp_path: Path, append: bool) -> None:
    """Regression: load_latest -> save_latest from two processes lost 82 of 200 updates."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [
        ctx.Process(target=workers.update_worker, args=(str(tmp_path), f"w{w}", UPDATES, barrier))
        for w in range(WRITERS)
    ]
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=240)
            assert proc.exitcode == 0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    latest = asyncio.run(SessionManager("shared", LocalFileStorage(tmp_path)).load_latest())
    assert latest is not None and latest.data.state is not None
    done = latest.data.state["done"]
    assert len(done) == len(set(done)) == WRITERS * UPDATES
    for w in range(WRITERS):
        assert [d for d in done if d.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(UPDATES)]
    assert [m.id for m in latest.data.messages or []] == done  # the same order, no loss
