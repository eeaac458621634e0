"""ttl= and prune(): what expires, and what never does (held or pending threads)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from stores_backends import REDIS_URL

from framework_agents import Message, ThreadCheckpoint, ToolCall
from framework_agents.errors import AgentError
from framework_agents.stores import SqliteCheckpointer, SqliteStorage
from framework_agents.stores.redis import redis_store


def test_prune_defaults_to_the_ttl_and_needs_one(tmp_path: Path) -> None:
    async def body() -> None:
        kept = SqliteStorage(tmp_path / "a.db", ttl=3600)
        await kept.put("k", b"1")
        assert await kept.prune() == 0  # written just now: younger than the ttl
        assert await kept.get("k") == b"1"
        await kept.close()
        forever = SqliteCheckpointer(tmp_path / "a.db")
        with pytest.raises(AgentError) as info:
            await forever.prune()
        assert info.value.code == "INVALID_ARGUMENT"
        with pytest.raises(AgentError):
            await forever.prune(3600)  # type: ignore[arg-type]
        await forever.close()

    asyncio.run(body())


@pytest.mark.redis
def test_redis_threads_expire_unless_an_approval_is_pending(redis_prefix: str) -> None:
    import redis

    store = redis_store(REDIS_URL, lease=5, ttl=600, lock_timeout=5, prefix=redis_prefix)

    async def body() -> None:
        cp = store.checkpointer
        await cp.save(ThreadCheckpoint("idle", None, [Message("user", "a")], {}))
        await cp.save(ThreadCheckpoint("waiting", None, [], {}, ToolCall("c", "pay", {})))
        await store.close()

    asyncio.run(body())
    client = redis.Redis.from_url(REDIS_URL)
    for suffix in ("t:idle", "m:idle"):
        assert 0 < client.pttl(redis_prefix + suffix) <= 600_000
    assert client.pttl(redis_prefix + "t:waiting") == -1  # no expiry while it waits
    client.close()


@pytest.mark.redis
def test_redis_thread_held_by_a_live_run_outlives_its_ttl(redis_prefix: str) -> None:
    """A held thread's keys expire no sooner than its lock: taking, renewing, saving.

    With a ttl shorter than the lease, the thread of a run still going (its lease renewed)
    expired under it: a load in the run gave nothing, and its next save a conflict.
    """
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    store = redis_store(REDIS_URL, lease=60, ttl=0.5, lock_timeout=5, prefix=redis_prefix)

    def left(kind: str) -> int:
        return int(client.pttl(f"{redis_prefix}{kind}:t"))

    async def body() -> None:
        cp = store.checkpointer
        await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {}))
        assert 0 < left("t") <= 500  # not held: the ttl alone
        async with cp.thread_lock("t"):  # type: ignore[attr-defined]
            for kind in ("t", "m"):
                assert left(kind) > 50_000  # taking the lock: as long as the lease
            client.pexpire(f"{redis_prefix}t:t", 10)  # as if the ttl had almost run out
            assert await cp._renew("t", cp._locks.held["t"].owner)  # type: ignore[attr-defined]
            assert left("t") > 50_000  # a renewal pushes it past the lease again
            base = await cp.load("t")
            assert base is not None
            await cp.save(ThreadCheckpoint("t", None, [*base.messages, Message("user", "b")], {}))
            for kind in ("t", "m"):
                assert left(kind) > 50_000  # a save under the lock: not the bare ttl
        await store.close()

    try:
        asyncio.run(body())
    finally:
        client.close()


@pytest.mark.parametrize("where", ["memory", "files"])
def test_open_store_gives_the_ttl_to_in_process_and_file_stores(tmp_path: Path, where: str) -> None:
    from framework_agents.stores import open_store

    url = "memory:" if where == "memory" else str(tmp_path / "store")

    async def body() -> None:
        async with open_store(url, ttl=3600) as store:
            assert store.storage.ttl == 3600  # type: ignore[attr-defined]
            assert store.checkpointer.ttl == 3600  # type: ignore[attr-defined]
            await store.storage.put("k", b"1")
            await store.checkpointer.save(ThreadCheckpoint("t", None, [], {}))
            assert await store.storage.prune() == 0  # type: ignore[attr-defined]
            assert await store.checkpointer.prune() == 0  # type: ignore[attr-defined]
            assert await store.storage.list() == ["k"]
            assert await store.checkpointer.list_threads() == ["t"]

    asyncio.run(body())


def test_file_prune_keeps_an_unreadable_thread(tmp_path: Path) -> None:
    """Corrupt data is never removed as a side effect: prune logs it and goes on."""
    from datetime import timedelta

    from framework_agents import FileCheckpointer

    async def body() -> None:
        cp = FileCheckpointer(tmp_path)
        await cp.save(ThreadCheckpoint("bad", None, [Message("user", "a")], {}))
        await cp.save(ThreadCheckpoint("idle", None, [Message("user", "b")], {}))
        cp.path("bad").write_bytes(b'{"version": 2, "thread')
        assert await FileCheckpointer(tmp_path).prune(timedelta(0)) == 1
        assert await cp.list_threads() == ["bad"]
        assert cp.path("bad").read_bytes() == b'{"version": 2, "thread'
        assert not cp.thread_dir("idle").exists()  # its directory went with it

    asyncio.run(body())
