"""A swarm thread on the database checkpointers (SQLite, PostgreSQL, Redis): the approval
inside billing, its resume, and the next run at the member that answered last.

Needs the stores package (issue 12): skipped where it is not in the tree; PostgreSQL and
Redis cases skip, saying why, when their server does not answer (``FA_TEST_POSTGRES``,
``FA_TEST_REDIS``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from swarm_scenario import effect_count, refund_swarm

from framework_agents import HitlInterrupt, is_well_formed
from framework_agents.swarm import SWARM_STATE_KEY

stores = pytest.importorskip(
    "framework_agents.stores", reason="the stores package (issue 12) is absent"
)

PG_URL = os.environ.get("FA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FA_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _answers(url: str, port: int) -> None:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or port), 2):
            return
    except OSError as exc:
        pytest.skip(f"{parts.hostname}:{parts.port or port} does not answer ({exc})")


@asynccontextmanager
async def _sqlite(tmp: Path) -> AsyncIterator[Any]:
    async with stores.SqliteCheckpointer(tmp / "swarm.db") as cp:
        yield cp


@asynccontextmanager
async def _postgres(tmp: Path) -> AsyncIterator[Any]:
    psycopg = pytest.importorskip("psycopg", reason="extra 'postgres' not installed")
    schema = "fa_swarm_" + uuid.uuid4().hex[:12]
    try:
        async with stores.PostgresCheckpointer(PG_URL, schema=schema) as cp:
            yield cp
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@asynccontextmanager
async def _redis(tmp: Path) -> AsyncIterator[Any]:
    redis = pytest.importorskip("redis", reason="extra 'redis' not installed")
    prefix = f"fa-swarm-{uuid.uuid4().hex[:12]}:"
    try:
        async with stores.RedisCheckpointer(REDIS_URL, prefix=prefix) as cp:
            yield cp
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


BACKENDS: dict[str, tuple[Callable[[Path], Any], Callable[[], None]]] = {
    "sqlite": (_sqlite, lambda: None),
    "postgres": (_postgres, lambda: _answers(PG_URL, 5432)),
    "redis": (_redis, lambda: _answers(REDIS_URL, 6379)),
}


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_a_swarm_thread_lives_in_a_database_checkpointer(tmp_path: Path, backend: str) -> None:
    open_cp, check = BACKENDS[backend]
    check()
    fx = tmp_path / "fx.txt"

    async def scenario() -> None:
        async with open_cp(tmp_path) as cp:  # a fresh Swarm per step, as a new process would
            with pytest.raises(HitlInterrupt) as caught:
                await refund_swarm(fx).run("refund", checkpointer=cp, thread_id="sw1")
            assert caught.value.agent == "billing"
            stored = await cp.load("sw1")
            assert stored.pending is not None
            assert stored.state[SWARM_STATE_KEY]["active"] == "billing"

            done = await refund_swarm(fx).resume("sw1", {"refund": "approve"}, checkpointer=cp)
            assert (done.status, done.agent, effect_count(fx)) == ("completed", "billing", 1)
            assert is_well_formed(done.messages)
            stored = await cp.load("sw1")
            assert stored.messages == done.messages and stored.pending is None
            assert stored.state[SWARM_STATE_KEY]["handoffs"][0]["to_agent"] == "billing"

            with pytest.raises(HitlInterrupt) as again:  # billing, not triage, takes the turn
                await refund_swarm(fx).run("another refund", checkpointer=cp, thread_id="sw1")
            assert again.value.agent == "billing"
            assert len((await cp.load("sw1")).state[SWARM_STATE_KEY]["handoffs"]) == 1

    asyncio.run(scenario())
