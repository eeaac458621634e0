"""Store factories of the tests, one per backend (imported by the store tests)."""

from __future__ import annotations

import functools
import os

from framework_agents.stores import open_store
from framework_agents.stores.postgres import postgres_store
from framework_agents.stores.redis import redis_store
from framework_agents.testing._corrupt import (
    FileCorrupter,
    PostgresCorrupter,
    RedisCorrupter,
    SqliteCorrupter,
)
from framework_agents.testing.conformance import StoreFactory

PG_URL = os.environ.get("FA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FA_TEST_REDIS", "redis://127.0.0.1:6379/0")
#: Seconds a dead holder keeps a thread in these tests (short: the kill tests wait it out).
LEASE = 1.5


def memory_factory() -> StoreFactory:
    """The in-process backend (no cross-process sharing, no corrupter)."""
    return StoreFactory(functools.partial(open_store, "memory:"), cross_process=False)


def file_factory(root: str) -> StoreFactory:
    """Files under ``root``."""
    return StoreFactory(
        functools.partial(open_store, root, lock_timeout=10.0),
        corrupter=FileCorrupter(root),
    )


def sqlite_factory(path: str) -> StoreFactory:
    """A SQLite file at ``path``."""
    return StoreFactory(
        functools.partial(open_store, f"sqlite:///{path}", lease=LEASE, lock_timeout=10.0),
        lease=LEASE,
        corrupter=SqliteCorrupter(path),
    )


def postgres_factory(schema: str) -> StoreFactory:
    """PostgreSQL, in ``schema``."""
    return StoreFactory(
        functools.partial(
            postgres_store, PG_URL, lease=LEASE, ttl=None, lock_timeout=10.0, schema=schema
        ),
        lease=LEASE,
        corrupter=PostgresCorrupter(PG_URL, schema),
    )


def redis_factory(prefix: str) -> StoreFactory:
    """Redis, under ``prefix``."""
    return StoreFactory(
        functools.partial(
            redis_store, REDIS_URL, lease=LEASE, ttl=None, lock_timeout=10.0, prefix=prefix
        ),
        lease=LEASE,
        corrupter=RedisCorrupter(REDIS_URL, prefix),
    )
