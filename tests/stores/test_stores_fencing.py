"""Fencing without waiting for a lease: a lock taken away from a live holder, deterministically.

The holder's lease is ended by hand (the lock row expired in SQLite, the lock key deleted
in Redis, the lock session terminated in PostgreSQL); another instance takes the thread
and writes; the old holder's next save must be refused and write nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from stores_backends import PG_URL, REDIS_URL

from framework_agents import Message, ThreadCheckpoint
from framework_agents.errors import AgentError
from framework_agents.stores import Store, open_store
from framework_agents.stores.postgres import postgres_store
from framework_agents.stores.redis import redis_store


async def _fenced(first: Store, second: Store, end_lease: object) -> None:
    cp = first.checkpointer
    await cp.save(ThreadCheckpoint("t", None, [Message("user", "a")], {"by": "first"}))
    async with cp.thread_lock("t"):  # type: ignore[attr-defined]
        fence = cp.fence("t")  # type: ignore[attr-defined]
        assert isinstance(fence, int)
        base = await cp.load("t")
        assert base is not None
        await end_lease()  # type: ignore[operator]
        async with second.checkpointer.thread_lock("t", timeout=10):  # type: ignore[attr-defined]
            assert second.checkpointer.fence("t") > fence  # type: ignore[attr-defined]
            await second.checkpointer.load("t")
            await second.checkpointer.save(ThreadCheckpoint("t", None, [], {"by": "second"}))
            late = ThreadCheckpoint("t", None, [*base.messages, Message("user", "late")], {})
            with pytest.raises(AgentError) as info:
                await cp.save(late)
            assert info.value.code == "CHECKPOINT_CONFLICT"
    loaded = await second.checkpointer.load("t")
    assert loaded is not None and loaded.state == {"by": "second"} and loaded.messages == []


def test_sqlite_holder_whose_lease_ended_is_fenced(tmp_path: Path) -> None:
    path = tmp_path / "f.db"

    async def end_lease() -> None:
        def expire() -> None:
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE fa_locks SET expires_at = 0")

        await asyncio.to_thread(expire)

    async def body() -> None:
        async with open_store(f"sqlite:///{path}") as a, open_store(f"sqlite:///{path}") as b:
            await _fenced(a, b, end_lease)

    asyncio.run(body())


@pytest.mark.redis
def test_redis_holder_whose_lease_ended_is_fenced(redis_prefix: str) -> None:
    import redis.asyncio as aioredis

    async def end_lease() -> None:
        client = aioredis.Redis.from_url(REDIS_URL)
        await client.delete(f"{redis_prefix}lock:t")
        await client.aclose()

    async def body() -> None:
        def make() -> Store:
            return redis_store(REDIS_URL, lease=30, ttl=None, lock_timeout=5, prefix=redis_prefix)

        async with make() as a, make() as b:
            await _fenced(a, b, end_lease)

    asyncio.run(body())


@pytest.mark.postgres
def test_postgres_holder_whose_session_ended_is_fenced(pg_schema: str) -> None:
    import psycopg

    async def end_lease() -> None:
        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                "WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
                " AND objid = (hashtextextended(%s, 0) & 4294967295)::oid",
                (f"{pg_schema}/t",),
            )

    async def body() -> None:
        def make() -> Store:
            return postgres_store(PG_URL, lease=30, ttl=None, lock_timeout=5, schema=pg_schema)

        async with make() as a, make() as b:
            await _fenced(a, b, end_lease)

    asyncio.run(body())
