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
