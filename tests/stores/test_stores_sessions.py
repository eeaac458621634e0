"""Sessions shared by replicas: a stale ``save_latest`` is refused on every shared storage.

Two ``SessionManager`` instances (two replicas) over one SQLite file, PostgreSQL schema or
Redis prefix: once each has read the latest snapshot, the first save wins and the second,
which did not see it, gets ``CHECKPOINT_CONFLICT`` and writes nothing; after reading
again it saves. Agents on two replicas therefore never lose an acknowledged turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from stores_backends import PG_URL, REDIS_URL

from framework_agents import Agent, ScriptedModel, SessionManager, Snapshot, SnapshotData
from framework_agents.errors import CheckpointConflictError
from framework_agents.stores import PostgresStorage, RedisStorage, SqliteStorage

Factory = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def make_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """A factory of storages that share one namespace on the chosen backend."""
    if request.param == "sqlite":
        return lambda: SqliteStorage(tmp_path / "shared.db")
    if request.param == "postgres":
        schema = request.getfixturevalue("pg_schema")
        return lambda: PostgresStorage(PG_URL, schema=schema)
    prefix = request.getfixturevalue("redis_prefix")
    return lambda: RedisStorage(REDIS_URL, prefix=prefix)


def _run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(body())


def test_a_replica_that_did_not_see_the_latest_update_is_refused(make_storage: Factory) -> None:
    async def body() -> None:
        first, second = make_storage(), make_storage()
        try:
            one, two = SessionManager("s", first), SessionManager("s", second)
            await one.save_latest(Snapshot(SnapshotData(state={"n": 0})))
            assert (await one.load_latest()) is not None
            assert (await two.load_latest()) is not None
            await one.save_latest(Snapshot(SnapshotData(state={"n": 1})))
            with pytest.raises(CheckpointConflictError):
                await two.save_latest(Snapshot(SnapshotData(state={"n": 2})))
            latest = await two.load_latest()  # reading again makes the replica current
            assert latest is not None and latest.data.state == {"n": 1}
            await two.save_latest(Snapshot(SnapshotData(state={"n": 2})))
            again = await one.load_latest()
            assert again is not None and again.data.state == {"n": 2}
        finally:
            await first.close()
            await second.close()

    _run(body)


def test_two_replicas_running_one_session_lose_no_acknowledged_turn(
    make_storage: Factory,
) -> None:
    async def body() -> None:
        first, second = make_storage(), make_storage()
        try:
            a = Agent(ScriptedModel(["a1", "a2", "a3"]), session_manager=SessionManager("s", first))
            b = Agent(ScriptedModel(["b1"]), session_manager=SessionManager("s", second))
            await a.run("from a")
            await b.run("from b")  # restores a's turn first, then adds its own
            with pytest.raises(CheckpointConflictError):
                await a.run("a again")  # a never saw b's turn: refused, nothing written
            stored = await SessionManager("s", first).load_latest()
            assert stored is not None and stored.data.messages is not None
            assert [m.text for m in stored.data.messages] == ["from a", "a1", "from b", "b1"]
            # The refused replica is not stuck: its next run starts from the latest snapshot.
            await a.run("a once more")
            stored = await SessionManager("s", second).load_latest()
            assert stored is not None and stored.data.messages is not None
            assert [m.text for m in stored.data.messages] == [
                "from a",
                "a1",
                "from b",
                "b1",
                "a once more",
                "a3",
            ]
        finally:
            await first.close()
            await second.close()

    _run(body)
