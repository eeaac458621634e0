"""Two OS processes as two replicas of a server sharing one thread, or one session, over
PostgreSQL and Redis (and SQLite for the session)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from stores_backends import postgres_factory, redis_factory, sqlite_factory
from stores_replica_worker import replica, session_replica

from framework_agents.testing.conformance import StoreFactory

TURNS = 50


def _run_two(target: Callable[..., None], factory: StoreFactory) -> None:
    """Run ``target`` as replicas r0 and r1 in two processes; each must report ok."""
    ctx = multiprocessing.get_context("spawn")
    procs = []
    for who in ("r0", "r1"):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=target, args=(child, factory.open, "shared", who, TURNS))
        proc.start()
        child.close()
        procs.append((proc, parent))
    for proc, parent in procs:
        assert parent.poll(300), "a replica did not finish"
        status = parent.recv()
        assert status[0] == "ok", status
        proc.join(30)


def _check_turns(texts: list[str]) -> None:
    """Both replicas' turns, none lost or duplicated, each whole, each replica's in order."""
    assert len(texts) == 2 * 2 * TURNS
    pairs = list(zip(texts[::2], texts[1::2], strict=True))
    assert all(reply == f"ack {user}" for user, reply in pairs)  # no interleaved run
    users = [user for user, _ in pairs]
    for who in ("r0", "r1"):
        assert [u for u in users if u.startswith(who)] == [f"{who}-{i}" for i in range(TURNS)]


def _two_replicas(factory: StoreFactory) -> None:
    _run_two(replica, factory)

    async def check() -> None:
        store = factory.open()
        try:
            loaded = await store.checkpointer.load("shared")
        finally:
            await store.close()
        assert loaded is not None
        _check_turns([m.text for m in loaded.messages])

    asyncio.run(check())


@pytest.mark.slow
@pytest.mark.postgres
def test_two_replicas_share_a_thread_over_postgres(pg_schema: str) -> None:
    _two_replicas(postgres_factory(pg_schema))


@pytest.mark.slow
@pytest.mark.redis
def test_two_replicas_share_a_thread_over_redis(redis_prefix: str) -> None:
    _two_replicas(redis_factory(redis_prefix))


def _killed_holder(factory: StoreFactory) -> None:
    """Replica r0 is SIGKILLed inside its 6th run, holding the thread; r1 then runs 20
    turns: it takes the thread once r0's lease runs out, and every acknowledged turn of
    both is there exactly once."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    doomed = ctx.Process(target=replica, args=(child, factory.open, "shared", "r0", 50, 5))
    doomed.start()
    child.close()
    assert parent.poll(300) and parent.recv() == ("hanging", 5)
    os.kill(doomed.pid, signal.SIGKILL)  # type: ignore[arg-type]
    doomed.join(30)
    other, other_child = ctx.Pipe()
    survivor = ctx.Process(target=replica, args=(other_child, factory.open, "shared", "r1", 20))
    survivor.start()
    other_child.close()
    assert other.poll(300), "the survivor never finished"
    assert other.recv() == ("ok", 20)
    survivor.join(30)

    async def check() -> None:
        store = factory.open()
        try:
            loaded = await store.checkpointer.load("shared")
        finally:
            await store.close()
        assert loaded is not None
        users = [m.text for m in loaded.messages if m.role == "user"]
        assert users == [f"r0-{i}" for i in range(5)] + [f"r1-{i}" for i in range(20)]

    asyncio.run(check())


@pytest.mark.slow
@pytest.mark.postgres
def test_killed_replica_is_replaced_over_postgres(pg_schema: str) -> None:
    _killed_holder(postgres_factory(pg_schema))


@pytest.mark.slow
@pytest.mark.redis
def test_killed_replica_is_replaced_over_redis(redis_prefix: str) -> None:
    _killed_holder(redis_factory(redis_prefix))


def _two_session_replicas(factory: StoreFactory) -> None:
    _run_two(session_replica, factory)

    async def check() -> None:
        from framework_agents import SessionManager

        store = factory.open()
        try:
            loaded = await SessionManager("shared", store.storage).load_latest()
        finally:
            await store.close()
        assert loaded is not None and loaded.data.messages is not None
        _check_turns([m.text for m in loaded.data.messages])

    asyncio.run(check())


@pytest.mark.slow
@pytest.mark.postgres
def test_two_replicas_share_a_session_over_postgres(pg_schema: str) -> None:
    _two_session_replicas(postgres_factory(pg_schema))


@pytest.mark.slow
@pytest.mark.redis
def test_two_replicas_share_a_session_over_redis(redis_prefix: str) -> None:
    _two_session_replicas(redis_factory(redis_prefix))


@pytest.mark.slow
def test_two_replicas_share_a_session_over_sqlite(tmp_path: Path) -> None:
    _two_session_replicas(sqlite_factory(str(tmp_path / "shared.db")))
