"""Schema version 1 databases (no value digests, no value logs) are migrated on first use.

Version 1 is rebuilt by hand from a fresh database (the digest column dropped, the
version set back), with values written the way a version-1 release writes them.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from framework_agents.messages import Message
from framework_agents.sessions import SessionManager
from framework_agents.sessions._base import LoggedStorage, digest
from framework_agents.sessions.snapshot import Snapshot, SnapshotData
from framework_agents.stores import (
    PostgresMemory,
    PostgresStorage,
    RedisMemory,
    SqliteMemory,
    SqliteStorage,
)

_HISTORY = [Message("user", f"m{i}") for i in range(3)]


def _snapshot(n: int) -> Snapshot:
    return Snapshot(SnapshotData(messages=_HISTORY[:n]))


async def _session_round_trip(storage: LoggedStorage) -> None:
    manager = SessionManager("s", storage)
    assert await manager.load_latest() is None
    for n in (1, 2, 3):
        await manager.save_latest(_snapshot(n))
    _, records, _ = await storage.read_logged(manager.latest_key)
    assert len(records) == 2  # the migrated store appends
    loaded = await SessionManager("s", storage).load_latest()
    assert loaded is not None and loaded.data.messages is not None
    assert [m.text for m in loaded.data.messages] == ["m0", "m1", "m2"]


def test_sqlite_version_1_database_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"

    async def make() -> None:
        async with SqliteStorage(path) as storage:
            await storage.put("seed", b"x")

    asyncio.run(make())
    with sqlite3.connect(path) as conn:  # what a version-1 release left
        conn.execute("DELETE FROM fa_kv")
        conn.execute("ALTER TABLE fa_kv DROP COLUMN digest")
        conn.execute("DROP TABLE fa_kv_log")
        conn.execute("UPDATE fa_schema SET version = 1")
        conn.execute("INSERT INTO fa_kv VALUES ('old/value', X'6f6c64', 0)")

    async def body() -> None:
        async with SqliteStorage(path) as storage:
            assert await storage.read_logged("old/value") == (b"old", [], digest(b"old"))
            tag = await storage.append_logged("old/value", b"r", digest(b"old"))
            assert (await storage.read_logged("old/value"))[1:] == ([b"r"], tag)
            await _session_round_trip(storage)

    asyncio.run(body())
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM fa_schema").fetchone() == (2,)


def test_sqlite_value_rewritten_behind_the_log_drops_the_stale_log(tmp_path: Path) -> None:
    """A value changed without its digest (a version-1 writer): its log no longer applies."""
    path = tmp_path / "a.db"

    async def make() -> None:
        async with SqliteStorage(path) as storage:
            await storage.put("k", b"base")
            await storage.append_logged("k", b"r1", digest(b"base"))

    asyncio.run(make())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE fa_kv SET data = X'6e6577' WHERE key = 'k'")

    async def body() -> None:
        async with SqliteStorage(path) as storage:
            assert await storage.read_logged("k") == (b"new", [], digest(b"new"))
            await storage.append_logged("k", b"r2", digest(b"new"))
            assert (await storage.read_logged("k"))[1] == [b"r2"]

    asyncio.run(body())


@pytest.mark.postgres
def test_postgres_version_1_schema_is_migrated(pg_schema: str) -> None:
    import psycopg
    from stores_backends import PG_URL

    async def body() -> None:
        async with PostgresStorage(PG_URL, schema=pg_schema) as storage:
            await storage.put("seed", b"x")
        with psycopg.connect(PG_URL, autocommit=True) as conn:  # back to version 1
            s = f'"{pg_schema}"'
            conn.execute(f"DELETE FROM {s}.fa_kv")
            conn.execute(f"ALTER TABLE {s}.fa_kv DROP COLUMN digest")
            conn.execute(f"DROP TABLE {s}.fa_kv_log")
            conn.execute(f"UPDATE {s}.fa_schema SET version = 1")
            conn.execute(f"INSERT INTO {s}.fa_kv VALUES ('old/value', 'old', 0)")
        async with PostgresStorage(PG_URL, schema=pg_schema) as storage:
            assert await storage.read_logged("old/value") == (b"old", [], digest(b"old"))
            tag = await storage.append_logged("old/value", b"r", digest(b"old"))
            assert (await storage.read_logged("old/value"))[1:] == ([b"r"], tag)
            await _session_round_trip(storage)
            # a version-1 writer changes a value behind its log: the log no longer applies
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"UPDATE {s}.fa_kv SET data = 'new' WHERE key = 'old/value'")
            assert await storage.read_logged("old/value") == (b"new", [], digest(b"new"))
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            assert conn.execute(f"SELECT version FROM {s}.fa_schema").fetchone() == (2,)

    asyncio.run(body())


@pytest.mark.redis
def test_redis_value_without_digest_is_given_one(redis_prefix: str) -> None:
    """Values written before the value logs (no digest), or rewritten behind a log."""
    import redis
    from stores_backends import REDIS_URL

    from framework_agents.stores import RedisStorage

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.hset(f"{redis_prefix}kv:data", "old", b"old")  # what an earlier release left
        client.zadd(f"{redis_prefix}kv:index", {"old": 0})
        client.zadd(f"{redis_prefix}kv:time", {"old": 1})

        async def body() -> None:
            async with RedisStorage(REDIS_URL, prefix=redis_prefix) as storage:
                assert await storage.read_logged("old") == (b"old", [], digest(b"old"))
                await storage.append_logged("old", b"r", digest(b"old"))
                client.hset(f"{redis_prefix}kv:data", "old", b"new")  # an earlier release's put
                assert await storage.read_logged("old") == (b"new", [], digest(b"new"))
                await _session_round_trip(storage)

        asyncio.run(body())
    finally:
        client.close()


# -- memories of a release before idempotent saves (no id index, no id set) -------------

_ONCE = [Message("user", f"o{i}", id=f"o{i}") for i in range(3)]


async def _saves_once(memory: SqliteMemory | PostgresMemory | RedisMemory) -> None:
    await memory.save(_ONCE[1:])  # o1 was stored by the earlier release
    assert [m.id for m in await memory.load()] == ["o0", "o1", "o2"]


def test_sqlite_memory_without_the_id_index_gains_it(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def make() -> None:
        async with SqliteMemory(path, "k") as memory:
            await memory.save(_ONCE[:2])

    asyncio.run(make())
    with sqlite3.connect(path) as conn:  # what a release before the index left
        conn.execute("DROP INDEX fa_memory_message_ids")

    async def body() -> None:
        async with SqliteMemory(path, "k") as memory:
            await _saves_once(memory)

    asyncio.run(body())
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "fa_memory_message_ids" in names


@pytest.mark.postgres
def test_postgres_memory_without_the_id_index_gains_it(pg_schema: str) -> None:
    import psycopg
    from stores_backends import PG_URL

    async def body() -> None:
        async with PostgresMemory(PG_URL, "k", schema=pg_schema) as memory:
            await memory.save(_ONCE[:2])
        with psycopg.connect(PG_URL, autocommit=True) as conn:  # before the index
            conn.execute(f'DROP INDEX "{pg_schema}".fa_memory_message_ids')
            conn.execute(f'DROP FUNCTION "{pg_schema}".fa_message_id(BYTEA) CASCADE')
        async with PostgresMemory(PG_URL, "k", schema=pg_schema) as memory:
            await _saves_once(memory)

    asyncio.run(body())


@pytest.mark.redis
def test_redis_memory_without_the_id_set_gains_it(redis_prefix: str) -> None:
    import redis
    from stores_backends import REDIS_URL

    client = redis.Redis.from_url(REDIS_URL)
    try:

        async def body() -> None:
            async with RedisMemory(REDIS_URL, "k", prefix=redis_prefix) as memory:
                await memory.save(_ONCE[:2])
                client.delete(f"{redis_prefix}memids:k")  # a list of an earlier release
                await _saves_once(memory)
                assert client.smembers(f"{redis_prefix}memids:k") == {b"o0", b"o1", b"o2"}

        asyncio.run(body())
    finally:
        client.close()


# -- memories an earlier release wrote beside this one -------------------------------------


async def _agent_runs_after(memory: SqliteMemory | PostgresMemory, wipe: object) -> None:
    """Agent runs on ``memory`` around a clear made as the previous release made it.

    That clear deleted the rows and left the key's head (``first_seq``/``next_seq``)
    alone: ``unchanged()`` does not see it (documented), but the runs around it must
    keep working and store every turn once.
    """
    from framework_agents import Agent, FunctionModel, NullConversationManager

    agent = Agent(
        FunctionModel(lambda history, tools: f"answer {len(history)}"),
        memory=memory,
        conversation_manager=NullConversationManager(),
    )
    for i in range(4):  # a full window (max_messages=8)
        await agent.run(f"q{i}")
    await wipe()  # type: ignore[operator]
    for i in range(4, 7):
        await agent.run(f"q{i}")
    stored = await memory.load()
    questions = [m.text for m in stored if m.role == "user"]
    assert questions == ["q4", "q5", "q6"]  # each turn after the clear, once
    assert [m.role for m in stored] == ["user", "assistant"] * 3
    assert len({m.id for m in stored}) == len(stored)


def test_sqlite_memory_cleared_by_the_previous_release_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def wipe() -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM fa_memory_messages WHERE key = 'k'")

    async def body() -> None:
        async with SqliteMemory(path, "k", max_messages=8) as memory:
            await _agent_runs_after(memory, wipe)

    asyncio.run(body())


@pytest.mark.postgres
def test_postgres_memory_cleared_by_the_previous_release_keeps_working(pg_schema: str) -> None:
    import psycopg
    from stores_backends import PG_URL

    async def wipe() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            table = f'"{pg_schema}".fa_memory_messages'
            conn.execute(f"DELETE FROM {table} WHERE key = 'k'")

    async def body() -> None:
        async with PostgresMemory(PG_URL, "k", max_messages=8, schema=pg_schema) as memory:
            await _agent_runs_after(memory, wipe)

    asyncio.run(body())
