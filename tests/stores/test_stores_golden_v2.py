"""What the v2 release wrote (``tests/fixtures/persisted/v2``) loads, on every backend, forever.

The corpus holds one memory (two saves: a document and a journal record, or rows), one
thread paused on an approval (a finished run, then the pause: ``checkpoint.json`` and a
journal delta) and one session (the latest snapshot and its log record, an immutable
snapshot), as each backend stores them:

* ``files/``: ``FileMemory``, ``FileCheckpointer`` and ``LocalFileStorage`` (the directory
  store of ``open_store``), byte for byte;
* ``stores.db``: the SQLite database;
* ``postgres.sql``: the PostgreSQL tables (DDL and INSERTs, ``{s}`` for the schema), loaded
  into a fresh schema;
* ``redis.json``: the Redis keys (``[key, type, value]``, the prefix left out), loaded
  under a fresh key prefix.

``tests/fixtures/persisted/make_v2.py`` wrote it (``PYTHONPATH=src python
tests/fixtures/persisted/make_v2.py``, with PostgreSQL and Redis running) and holds what
was written; it is deterministic (fixed ids, timestamps and journal token). Never
regenerate the corpus with a later release: its point is that a later release reads what
this one wrote. Each test reads a copy (files in a temporary directory, the database
dumps in a fresh namespace); PostgreSQL and Redis tests skip, saying why, when the server
is missing (``FA_TEST_POSTGRES``, ``FA_TEST_REDIS``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from stores_backends import PG_URL, REDIS_URL

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    FileMemory,
    FunctionModel,
    LocalFileStorage,
    Message,
    SessionManager,
    tool,
)
from framework_agents.models._base import ToolSpec
from framework_agents.stores import Store, open_store

CORPUS = Path(__file__).parents[1] / "fixtures" / "persisted" / "v2"
_SNAPSHOTS = "storage/session/s1/scopes/agent/default/snapshots"


def _make_v2() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_v2", CORPUS.parent / "make_v2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


V2 = _make_v2()


def _json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def _load_postgres(schema: str) -> str:
    import psycopg

    dump = (CORPUS / "postgres.sql").read_text(encoding="utf-8")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(dump.replace("{s}", f'"{schema}"'))
    return f"{PG_URL}?schema={schema}"


def _load_redis(prefix: str) -> str:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        for name, kind, value in json.loads((CORPUS / "redis.json").read_text("utf-8")):
            key = prefix + name
            if kind == "string":
                client.set(key, value)
            elif kind == "hash":
                client.hset(key, mapping=value)
            elif kind == "list":
                client.rpush(key, *value)
            elif kind == "set":
                client.sadd(key, *value)
            else:
                assert kind == "zset", kind
                client.zadd(key, {member: score for member, score in value})
    finally:
        client.close()
    return f"{REDIS_URL}?prefix={prefix}"


@pytest.fixture(
    params=[
        "files",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a store holding a copy of the corpus of one backend."""
    if request.param == "files":
        shutil.copytree(CORPUS / "files", tmp_path / "files")
        return str(tmp_path / "files")
    if request.param == "sqlite":
        shutil.copyfile(CORPUS / "stores.db", tmp_path / "stores.db")
        return f"sqlite:///{tmp_path / 'stores.db'}"
    if request.param == "postgres":
        return _load_postgres(request.getfixturevalue("pg_schema"))
    return _load_redis(request.getfixturevalue("redis_prefix"))


def test_the_corpus_is_format_v2_as_the_v2_stores_wrote_it(tmp_path: Path) -> None:
    files = CORPUS / "files"
    assert sorted(p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()) == [
        "memory/golden/memory.json",
        "memory/golden/memory.json.journal",
        f"{_SNAPSHOTS}/.snapshot_latest.json.log",
        f"{_SNAPSHOTS}/{V2.SNAPSHOT_ID}.json",
        f"{_SNAPSHOTS}/snapshot_latest.json",
        "threads/approval/checkpoint.journal",
        "threads/approval/checkpoint.json",
    ]
    assert _json(files / "memory/golden/memory.json")["version"] == 2
    assert _json(files / "threads/approval/checkpoint.json")["version"] == 2
    assert _json(files / _SNAPSHOTS / "snapshot_latest.json")["schema_version"] == 2
    with contextlib.closing(sqlite3.connect(CORPUS / "stores.db")) as conn:
        assert conn.execute("SELECT version FROM fa_schema").fetchall() == [(2,)]
    dump = (CORPUS / "postgres.sql").read_text(encoding="utf-8")
    assert "INSERT INTO {s}.fa_schema (id, version) VALUES (1, 2);" in dump.splitlines()

    async def classes() -> list[type]:
        async with open_store(str(tmp_path)) as store:
            return [
                type(store.memory(V2.MEMORY_KEY, 100)),
                type(store.checkpointer),
                type(store.storage),
            ]

    assert arun(classes()) == [FileMemory, FileCheckpointer, LocalFileStorage]


def test_v2_memory_loads(url: str) -> None:
    async def body() -> list[Message]:
        async with open_store(url) as store:
            return await store.memory(V2.MEMORY_KEY, 100).load()

    assert arun(body()) == [*V2.history(), *V2.follow_up()]


def test_v2_thread_paused_on_an_approval_loads(url: str) -> None:
    async def body() -> tuple[Any, list[str]]:
        async with open_store(url) as store:
            return await store.checkpointer.load(V2.THREAD), await store.checkpointer.list_threads()

    loaded, threads = arun(body())
    _, paused = V2.checkpoints(V2.history())
    assert threads == [V2.THREAD]
    assert loaded == paused  # every field: messages, state, pending approval, app data
    assert loaded.pending.name == "publish" and loaded.pending.args == {"doc": "d1", "to": "blog"}
    assert loaded.interrupt_id == V2.INTERRUPT_ID
    assert loaded.pending_turn == V2.ask()[1]
    assert loaded.finished is False and loaded.decisions == {}


def test_v2_session_snapshots_load(url: str) -> None:
    async def body() -> tuple[Any, list[str], Any]:
        async with open_store(url) as store:
            session = SessionManager(V2.SESSION, store.storage)
            latest = await session.load_latest()
            ids = await session.list_snapshot_ids()
            return latest, ids, await session.restore_snapshot(V2.SNAPSHOT_ID)

    latest, ids, kept = arun(body())
    _, second, expected_kept = V2.snapshots(V2.history())
    assert latest is not None
    assert latest.snapshot_id == V2.LATEST_ID and latest.created_at == second.created_at
    assert latest.data == second.data  # messages, state, system prompt: the log applied
    assert latest.app_data == {"ui": [1, "two", 3.0]}
    assert ids == [V2.SNAPSHOT_ID]
    assert kept.data == expected_kept.data and kept.created_at == V2.WHEN


def _publishing_agent(ran: list[dict[str, Any]]) -> Agent:
    @tool(requires_approval=True)
    def publish(doc: str, to: str) -> str:
        """Publish ``doc`` to ``to``."""
        ran.append({"doc": doc, "to": to})
        return f"published {doc} to {to}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"done: {messages[-1].text}"

    return Agent(FunctionModel(model), tools=[publish])


def test_v2_stores_take_new_writes_over_the_corpus(url: str) -> None:
    """The pending approval resumes as shown; memory and session saves extend the corpus."""
    ran: list[dict[str, Any]] = []
    extra = Message("user", "after the upgrade", id="v2-new")

    async def write(store: Store) -> str:
        agent = _publishing_agent(ran)
        approved = {V2.INTERRUPT_ID: "approve"}
        result = await agent.resume(
            V2.THREAD, approved, checkpointer=store.checkpointer, reissue=False
        )
        memory = store.memory(V2.MEMORY_KEY, 100)
        await memory.save([*await memory.load(), extra])
        session = SessionManager(V2.SESSION, store.storage)
        latest = some(await session.load_latest())
        data = latest.data.model_copy(update={"messages": [*(latest.data.messages or []), extra]})
        await session.save_latest(latest.model_copy(update={"data": data}))
        return result.text

    async def read(store: Store) -> tuple[Any, list[Message], Any]:
        session = SessionManager(V2.SESSION, store.storage)
        return (
            await store.checkpointer.load(V2.THREAD),
            await store.memory(V2.MEMORY_KEY, 100).load(),
            await session.load_latest(),
        )

    async def body() -> tuple[str, tuple[Any, list[Message], Any]]:
        async with open_store(url) as store:
            text = await write(store)
        async with open_store(url) as store:
            return text, await read(store)

    text, (thread, memory, latest) = arun(body())
    assert ran == [{"doc": "d1", "to": "blog"}]  # exactly the call that was shown
    assert text == "done: published d1 to blog"
    assert thread.pending is None and thread.finished is True
    assert thread.messages[: len(V2.history()) + 1] == [*V2.history(), V2.ask()[0]]
    assert memory == [*V2.history(), *V2.follow_up(), extra]
    assert latest.data.messages == [*V2.history(), *V2.follow_up(), extra]
