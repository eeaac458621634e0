"""Connections that drop under a running store: reads are retried, nothing is half-written."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from stores_backends import PG_URL, REDIS_URL

from framework_agents import Message, ThreadCheckpoint
from framework_agents.stores.postgres import postgres_store
from framework_agents.stores.redis import redis_store


@pytest.mark.postgres
def test_postgres_reads_survive_a_dropped_connection(pg_schema: str) -> None:
    import psycopg

    name = f"fa_drop_{uuid.uuid4().hex[:8]}"
    url = f"{PG_URL}?application_name={name}"
    store = postgres_store(url, lease=5, ttl=None, lock_timeout=5, schema=pg_schema)

    async def body() -> None:
        await store.storage.put("a", b"1")
        await store.checkpointer.save(ThreadCheckpoint("t", None, [Message("user", "x")], {}))
        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
            cur = await admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (name,),
            )
            killed = await cur.fetchone()
            assert killed is not None and killed[0] >= 1
        assert await store.storage.get("a") == b"1"
        loaded = await store.checkpointer.load("t")
        assert loaded is not None and loaded.messages[0].text == "x"
        await store.close()

    asyncio.run(body())


@pytest.mark.postgres
def test_postgres_thread_lock_after_the_server_dropped_its_parked_sessions(
    pg_schema: str,
) -> None:
    """A restart or failover ends every parked lock session: the next lock opens a new
    one (it raised a raw psycopg error, retrying on the next parked one, dead too)."""
    import psycopg

    from framework_agents.stores import PostgresCheckpointer

    async def body() -> None:
        cp = PostgresCheckpointer(PG_URL, schema=pg_schema)
        try:
            async with cp.thread_lock("a"), cp.thread_lock("b"):
                pass  # two lock sessions, both parked for reuse afterwards
            pids = [c.info.backend_pid for c in cp._idle_lock_conns]
            assert len(pids) == 2
            async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
                for pid in pids:
                    await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            async with cp.thread_lock("c"):
                pass
        finally:
            await cp.close()

    asyncio.run(body())


@pytest.mark.redis
def test_redis_reads_survive_a_dropped_connection(redis_prefix: str) -> None:
    import redis.asyncio as aioredis

    name = f"fa-drop-{uuid.uuid4().hex[:8]}"
    store = redis_store(
        f"{REDIS_URL}?client_name={name}", lease=5, ttl=None, lock_timeout=5, prefix=redis_prefix
    )

    async def body() -> None:
        await store.storage.put("a", b"1")
        memory = store.memory("m")
        await memory.save([Message("user", "x")])
        admin = aioredis.Redis.from_url(REDIS_URL)
        clients = await admin.client_list()
        ids = [c["id"] for c in clients if c.get("name") == name]
        assert ids
        for client_id in ids:
            await admin.client_kill_filter(_id=client_id)
        await admin.aclose()
        assert await store.storage.get("a") == b"1"
        assert [m.text for m in await memory.load()] == ["x"]
        await store.close()

    asyncio.run(body())


@pytest.mark.redis
def test_redis_keys_of_another_type_are_the_stores_corrupt_codes(redis_prefix: str) -> None:
    """A string where a hash or a list belongs: the store's ``*_CORRUPT``, the key left as
    it is (a raw WRONGTYPE ``ResponseError`` before)."""
    import redis

    from framework_agents.errors import AgentError

    client = redis.Redis.from_url(REDIS_URL)
    store = redis_store(REDIS_URL, lease=5, ttl=None, lock_timeout=5, prefix=redis_prefix)

    async def code(call: object) -> str:
        with pytest.raises(AgentError) as info:
            await call  # type: ignore[misc]
        return info.value.code

    async def body() -> None:
        await store.checkpointer.save(ThreadCheckpoint("t", None, [Message("user", "x")], {}))
        client.delete(f"{redis_prefix}m:t")
        client.set(f"{redis_prefix}m:t", b"garbage")
        fresh = redis_store(REDIS_URL, lease=5, ttl=None, lock_timeout=5, prefix=redis_prefix)
        assert await code(fresh.checkpointer.load("t")) == "CHECKPOINT_CORRUPT"
        await fresh.close()
        client.set(f"{redis_prefix}mem:k", b"garbage")
        memory = store.memory("k", 50)
        assert await code(memory.load()) == "MEMORY_CORRUPT"
        assert await code(memory.save([Message("user", "y")])) == "MEMORY_CORRUPT"
        client.set(f"{redis_prefix}kv:data", b"garbage")
        assert await code(store.storage.get("a/b")) == "SNAPSHOT_CORRUPT"
        # A write whose script would meet such a key late (after writing what comes
        # first: a script is not rolled back) is refused before it writes anything.
        client.set(f"{redis_prefix}threads", b"garbage")
        saving = store.checkpointer.save(ThreadCheckpoint("u", None, [Message("user", "z")], {}))
        assert await code(saving) == "CHECKPOINT_CORRUPT"
        assert client.exists(f"{redis_prefix}t:u", f"{redis_prefix}m:u") == 0
        client.hset(f"{redis_prefix}memseq:j", "x", "1")
        assert await code(store.memory("j", 50).save([Message("user", "w")])) == "MEMORY_CORRUPT"
        assert client.exists(f"{redis_prefix}mem:j") == 0
        await store.close()

    try:
        asyncio.run(body())
        for key in ("m:t", "mem:k", "kv:data"):  # left as they were
            assert client.get(f"{redis_prefix}{key}") == b"garbage"
    finally:
        client.close()
