"""Sessions shared by replicas, on every shared storage (API.md, *Sessions and snapshots*).

Two ``SessionManager`` instances (two replicas) over one SQLite file, PostgreSQL schema or
Redis prefix: the manager's ``save_latest`` is a compare-and-swap (a replica that did not
see the latest update gets ``CHECKPOINT_CONFLICT`` and writes nothing). Agents on two
replicas merge on top of it: their messages by id, their state key by key, so neither
loses a turn nor gets an error; only a state key both changed is refused.
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


def test_two_replicas_running_one_session_merge_their_turns(make_storage: Factory) -> None:
    async def body() -> None:
        first, second = make_storage(), make_storage()
        try:
            a = Agent(ScriptedModel(["a1", "a2", "a3"]), session_manager=SessionManager("s", first))
            b = Agent(ScriptedModel(["b1", "b2"]), session_manager=SessionManager("s", second))
            await a.run("from a")
            await b.run("from b")  # restores a's turn first, then adds its own
            result = await a.run("a again")  # a never saw b's turn: merged, no error
            assert result.text == "a2"
            stored = await SessionManager("s", first).load_latest()
            assert stored is not None and stored.data.messages is not None
            # b's turn was acknowledged first: a's follows it (appended to b's save).
            merged = ["from a", "a1", "from b", "b1", "a again", "a2"]
            assert [m.text for m in stored.data.messages] == merged
            assert [m.text for m in a.messages] == merged  # a's history holds b's turn now
            await b.run("b again")  # b never saw a's merged save: merged again
            stored = await SessionManager("s", second).load_latest()
            assert stored is not None and stored.data.messages is not None
            assert [m.text for m in stored.data.messages] == [*merged, "b again", "b2"]
            await a.run("a once more")  # and a goes on from there
            stored = await SessionManager("s", first).load_latest()
            assert stored is not None and stored.data.messages is not None
            texts = [m.text for m in stored.data.messages]
            assert sorted(texts) == sorted([*merged, "b again", "b2", "a once more", "a3"])
            assert len({m.id for m in stored.data.messages}) == len(texts)
        finally:
            await first.close()
            await second.close()

    _run(body)


def test_two_replicas_changing_one_state_key_are_refused(make_storage: Factory) -> None:
    async def body() -> None:
        first, second = make_storage(), make_storage()
        try:
            a = Agent(ScriptedModel(["a1", "a2", "a3"]), session_manager=SessionManager("s", first))
            b = Agent(ScriptedModel(["b1", "b2"]), session_manager=SessionManager("s", second))
            a.state["mood"] = "calm"
            a.state["a_only"] = 1
            await a.run("from a")
            await b.run("from b")
            b.state["mood"] = "busy"
            b.state["b_only"] = 2
            await b.run("b sets")
            a.state["mood"] = "sleepy"  # the same key b changed, to another value
            with pytest.raises(CheckpointConflictError):
                await a.run("a clashes")  # refused: nothing written
            stored = await SessionManager("s", first).load_latest()
            assert stored is not None and stored.data.state == {
                "mood": "busy",
                "a_only": 1,
                "b_only": 2,
            }
            assert "a clashes" not in [m.text for m in stored.data.messages or []]
            # What a caller does then: run again; the run restores the latest snapshot.
            await a.run("a retries")
            stored = await SessionManager("s", first).load_latest()
            assert stored is not None and stored.data.state is not None
            assert stored.data.state["mood"] == "busy"
            assert [m.text for m in stored.data.messages or []][-2:] == ["a retries", "a3"]
        finally:
            await first.close()
            await second.close()

    _run(body)
