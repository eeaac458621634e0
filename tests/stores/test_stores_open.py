"""open_store(url), the Store bundle, and failures: unreachable servers, newer schemas, extras."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest

from framework_agents import FileCheckpointer, InMemoryCheckpointer, LocalFileStorage, Message
from framework_agents.errors import AgentError
from framework_agents.stores import (
    PostgresStorage,
    RedisStorage,
    SqliteCheckpointer,
    SqliteStorage,
    Store,
    open_store,
)


def _code(coro: object) -> str:
    async def run() -> str:
        try:
            await coro  # type: ignore[misc]
        except AgentError as exc:
            return exc.code
        return "no error"

    return asyncio.run(run())


def test_memory_url_gives_in_process_backends() -> None:
    async def body() -> None:
        async with open_store("memory:") as store:
            assert isinstance(store.checkpointer, InMemoryCheckpointer)
            first = store.memory("k", max_messages=5)
            await first.save([Message("user", "hi")])
            assert [m.text for m in await store.memory("k", max_messages=5).load()] == ["hi"]

    asyncio.run(body())


def test_directory_gives_file_backends(tmp_path: Path) -> None:
    store = open_store(tmp_path / "data")
    assert isinstance(store.storage, LocalFileStorage)
    assert isinstance(store.checkpointer, FileCheckpointer)
    asyncio.run(store.close())


def test_sqlite_url_shares_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    async def body() -> None:
        async with open_store("sqlite:///./sub/agents.db") as store:
            assert isinstance(store, Store) and isinstance(store.storage, SqliteStorage)
            assert isinstance(store.checkpointer, SqliteCheckpointer)
            await store.storage.put("a", b"1")
            await store.memory("m").save([Message("user", "x")])
        async with open_store(f"sqlite:///{tmp_path}/sub/agents.db") as again:
            assert await again.storage.get("a") == b"1"
            assert [m.text for m in await again.memory("m").load()] == ["x"]

    asyncio.run(body())
    assert (tmp_path / "sub" / "agents.db").is_file()


@pytest.mark.parametrize("url", ["", "ftp://x", "sqlite://", "sqlite:///", "mongodb://h/db"])
def test_unknown_urls_are_invalid_arguments(url: str) -> None:
    with pytest.raises(AgentError) as info:
        open_store(url)
    assert info.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("lease", [0, -1, float("nan"), "1", 0.0005, 3e6, 1e17, float("inf")])
def test_bad_lease_is_an_invalid_argument(lease: object) -> None:
    """Out of what the backends take (PostgreSQL's idle_session_timeout: whole ms up to
    2**31 - 1): a raw driver error at the first lock before, or no timeout at all."""
    with pytest.raises(AgentError) as info:
        open_store("memory:", lease=lease)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("ttl", [0, -5, "1", 1e17])
def test_bad_ttl_is_an_invalid_argument(tmp_path: Path, ttl: object) -> None:
    """A Redis expiry overflowed past ~100 years (after the save had written)."""
    with pytest.raises(AgentError) as info:
        open_store(str(tmp_path), ttl=ttl)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
    assert open_store(str(tmp_path), ttl=float("inf")).storage is not None  # inf: no ttl


@pytest.mark.parametrize("max_messages", [0, 2**63, 10**20, True])
def test_bad_window_is_an_invalid_argument(tmp_path: Path, max_messages: object) -> None:
    """Past a BIGINT, PostgreSQL found no function for the argument (a raw error)."""
    with pytest.raises(AgentError) as info:
        open_store(str(tmp_path)).memory("k", max_messages)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"


def test_newer_sqlite_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    asyncio.run(_touch(SqliteStorage(path)))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE fa_schema SET version = 99")
    storage = SqliteStorage(path)
    assert _code(storage.get("a")) == "BACKEND_UNAVAILABLE"
    asyncio.run(storage.close())


async def _touch(storage: SqliteStorage) -> None:
    await storage.put("a", b"1")
    await storage.close()


def test_unreachable_postgres_is_backend_unavailable_with_password_redacted() -> None:
    pytest.importorskip("psycopg")
    url = "postgresql://user:s3cret@127.0.0.1:1/db"
    storage = PostgresStorage(url)

    async def body() -> AgentError:
        with pytest.raises(AgentError) as info:
            await storage.get("a")
        await storage.close()
        return info.value

    error = asyncio.run(body())
    assert error.code == "BACKEND_UNAVAILABLE"
    assert "s3cret" not in str(error) and "user:***@127.0.0.1:1" in str(error)


def test_unreachable_redis_is_backend_unavailable_with_password_redacted() -> None:
    pytest.importorskip("redis")
    storage = RedisStorage("redis://:s3cret@127.0.0.1:1/0")

    async def body() -> AgentError:
        with pytest.raises(AgentError) as info:
            await storage.get("a")
        await storage.close()
        return info.value

    error = asyncio.run(body())
    assert error.code == "BACKEND_UNAVAILABLE"
    assert "s3cret" not in str(error)


@pytest.mark.parametrize(
    ("module", "url", "hint"),
    [
        ("psycopg", "postgresql://127.0.0.1/x", "psycopg[binary]' psycopg-pool"),
        ("redis", "redis://127.0.0.1:1", "pip install redis"),
    ],
)
def test_missing_driver_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str, url: str, hint: str
) -> None:
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)
    store = open_store(url)  # nothing is imported or connected before the first use

    async def body() -> None:
        with pytest.raises(ImportError, match=hint.replace("[", r"\[").replace("]", r"\]")):
            await store.storage.get("a")

    asyncio.run(body())


def test_store_names_are_exported_at_the_top() -> None:
    import framework_agents

    for name in (
        "SqliteStorage",
        "SqliteCheckpointer",
        "SqliteMemory",
        "PostgresStorage",
        "PostgresCheckpointer",
        "PostgresMemory",
        "RedisStorage",
        "RedisCheckpointer",
        "RedisMemory",
        "open_store",
        "Store",
    ):
        assert name in framework_agents.__all__ and hasattr(framework_agents, name)


@pytest.mark.postgres
def test_newer_postgres_schema_is_refused(pg_schema: str) -> None:
    import psycopg
    from stores_backends import PG_URL

    async def body() -> str:
        storage = PostgresStorage(PG_URL, schema=pg_schema)
        await storage.put("a", b"1")
        await storage.close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'UPDATE "{pg_schema}".fa_schema SET version = 99')
        again = PostgresStorage(PG_URL, schema=pg_schema)
        try:
            await again.get("a")
        except AgentError as exc:
            return exc.code
        finally:
            await again.close()
        return "no error"

    assert asyncio.run(body()) == "BACKEND_UNAVAILABLE"


@pytest.mark.postgres
def test_postgres_url_names_its_schema(pg_schema: str) -> None:
    from stores_backends import PG_URL

    async def body() -> None:
        async with open_store(f"{PG_URL}?schema={pg_schema}") as store:
            await store.storage.put("a", b"1")
        async with PostgresStorage(PG_URL, schema=pg_schema) as storage:
            assert await storage.get("a") == b"1"

    asyncio.run(body())


@pytest.mark.redis
def test_redis_url_names_its_prefix(redis_prefix: str) -> None:
    from stores_backends import REDIS_URL

    async def body() -> None:
        async with open_store(f"{REDIS_URL}?prefix={redis_prefix}") as store:
            await store.storage.put("a", b"1")
        async with RedisStorage(REDIS_URL, prefix=redis_prefix) as storage:
            assert await storage.get("a") == b"1"

    asyncio.run(body())
