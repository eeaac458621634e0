"""Properties of the database layouts: windows and deltas agree with the reference backends.

The SQL and Lua windowing must cut exactly where ``InMemoryMemory`` cuts, and a thread
saved as any sequence of grown, edited and shortened histories must load back as the last
one saved, while writing only the messages past the stored prefix.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stores_backends import PG_URL, REDIS_URL, postgres_factory, redis_factory, sqlite_factory

from framework_agents import InMemoryMemory, Message, ThreadCheckpoint
from framework_agents.stores import Store

_SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _sqlite_open() -> tuple[Callable[[], Store], Callable[[], None]]:
    directory = tempfile.TemporaryDirectory()
    factory = sqlite_factory(str(Path(directory.name) / "p.db"))
    return factory.open, directory.cleanup


def _redis_open() -> tuple[Callable[[], Store], Callable[[], None]]:
    import redis

    prefix = f"fa-prop-{uuid.uuid4().hex[:10]}:"
    factory = redis_factory(prefix)

    def cleanup() -> None:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()

    return factory.open, cleanup


def _postgres_open() -> tuple[Callable[[], Store], Callable[[], None]]:
    import psycopg

    schema = f"fa_prop_{uuid.uuid4().hex[:10]}"
    factory = postgres_factory(schema)

    def cleanup() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return factory.open, cleanup


def _backends() -> list[object]:
    # PostgreSQL costs about a quarter of a second per example (a schema each): its runs are
    # in make stress; make test runs the store conformance suite against it.
    return [
        pytest.param(_sqlite_open, id="sqlite"),
        pytest.param(_postgres_open, id="postgres", marks=[pytest.mark.postgres, pytest.mark.slow]),
        pytest.param(_redis_open, id="redis", marks=pytest.mark.redis),
    ]


def _chunks(history: list[Message], cuts: list[int]) -> list[list[Message]]:
    bounds = sorted({0, len(history), *(c % (len(history) + 1) for c in cuts)})
    return [history[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("backend", _backends())
@_SETTINGS
@given(data=st.data())
def test_memory_window_matches_in_memory_memory(
    backend: Callable[[], tuple[Callable[[], Store], Callable[[], None]]],
    history_strategy: Callable[..., st.SearchStrategy[list[Message]]],
    redis_available: None,
    data: st.DataObject,
) -> None:
    history = data.draw(history_strategy(well_formed=data.draw(st.booleans())))
    limit = data.draw(st.integers(1, 8))
    cuts = data.draw(st.lists(st.integers(0, 40), max_size=4))
    open_store, cleanup = backend()

    async def body() -> None:
        reference = InMemoryMemory(max_messages=limit)
        store = open_store()
        try:
            memory = store.memory("p", max_messages=limit)
            for chunk in _chunks(history, cuts):
                await memory.save(chunk)
                await reference.save(chunk)
            got = [m.model_dump_json() for m in await memory.load()]
            assert got == [m.model_dump_json() for m in await reference.load()]
        finally:
            await store.close()

    try:
        asyncio.run(body())
    finally:
        cleanup()


@st.composite
def _versions(draw: st.DrawFn) -> list[list[Message]]:
    """Successive histories of one thread: grown, edited in place, or shortened."""
    current: list[Message] = []
    out = []
    for _ in range(draw(st.integers(1, 6))):
        action = draw(st.sampled_from(["grow", "grow", "edit", "cut"]))
        if action == "grow" or not current:
            current = current + [
                Message("user", f"u{len(current)}-{i}") for i in range(draw(st.integers(0, 4)))
            ]
        elif action == "edit":
            i = draw(st.integers(0, len(current) - 1))
            current = [
                *current[:i],
                current[i].model_copy(update={"content": "edited"}),
                *current[i + 1 :],
            ]
        else:
            current = current[: draw(st.integers(0, len(current)))]
        out.append(list(current))
    return out


@pytest.mark.parametrize("backend", _backends())
@_SETTINGS
@given(versions=_versions(), reopen=st.booleans())
def test_thread_loads_back_the_last_history_saved(
    backend: Callable[[], tuple[Callable[[], Store], Callable[[], None]]],
    redis_available: None,
    versions: list[list[Message]],
    reopen: bool,
) -> None:
    open_store, cleanup = backend()

    async def body() -> None:
        store = open_store()
        try:
            for i, messages in enumerate(versions):
                await store.checkpointer.save(ThreadCheckpoint("t", None, messages, {"i": i}))
            reader = open_store() if reopen else store
            loaded = await reader.checkpointer.load("t")
            if reader is not store:
                await reader.close()
            assert loaded is not None and loaded.state == {"i": len(versions) - 1}
            assert [m.model_dump_json() for m in loaded.messages] == [
                m.model_dump_json() for m in versions[-1]
            ]
        finally:
            await store.close()

    try:
        asyncio.run(body())
    finally:
        cleanup()


def test_a_save_writes_only_the_new_messages(tmp_path: Path) -> None:
    """At 1,000 stored messages, a turn of two inserts two rows (a trigger counts them)."""
    path = tmp_path / "o.db"
    open_store = sqlite_factory(str(path)).open
    history = [Message("user" if i % 2 else "assistant", f"m{i}") for i in range(1000)]

    async def setup() -> None:
        store = open_store()
        await store.checkpointer.save(ThreadCheckpoint("t", None, history, {}))
        await store.close()

    asyncio.run(setup())
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE counter (n INTEGER); INSERT INTO counter VALUES (0);"
            "CREATE TRIGGER count_ins AFTER INSERT ON fa_thread_messages "
            "BEGIN UPDATE counter SET n = n + 1; END;"
            "CREATE TRIGGER count_del AFTER DELETE ON fa_thread_messages "
            "BEGIN UPDATE counter SET n = n + 1000000; END;"
        )

    async def turn() -> None:
        store = open_store()
        cp = store.checkpointer
        base = await cp.load("t")
        assert base is not None
        grown = [*base.messages, Message("user", "next"), Message("assistant", "reply")]
        await cp.save(ThreadCheckpoint("t", None, grown, {"turn": 1}))
        await cp.save(ThreadCheckpoint("t", None, grown, {"turn": 2}))  # state only: no row
        await store.close()

    asyncio.run(turn())
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT n FROM counter").fetchone() == (2,)
