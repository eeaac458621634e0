"""Fixtures of the store tests: a fresh namespace per test on every backend.

PostgreSQL (``FA_TEST_POSTGRES``, default ``postgresql://postgres@127.0.0.1:5432/test``)
and Redis (``FA_TEST_REDIS``, default ``redis://127.0.0.1:6379/0``) tests skip, saying
why, when the server does not answer. Each PostgreSQL test gets its own schema and each
Redis test its own key prefix; both are removed afterwards.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from stores_backends import PG_URL, REDIS_URL


def _answers(url: str, default_port: int) -> str | None:
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 2
        ):
            return None
    except OSError as exc:
        return f"{parts.hostname}:{parts.port or default_port} does not answer ({exc})"


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh schema name, dropped afterwards (skips when PostgreSQL is missing)."""
    problem = _answers(PG_URL, 5432)
    if problem:
        pytest.skip(f"PostgreSQL server missing: {problem}")
    psycopg = pytest.importorskip("psycopg", reason="extra 'postgres' not installed")
    schema = "fa_test_" + uuid.uuid4().hex[:12]
    yield schema
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A fresh key prefix, its keys deleted afterwards (skips when Redis is missing)."""
    problem = _answers(REDIS_URL, 6379)
    if problem:
        pytest.skip(f"Redis server missing: {problem}")
    redis = pytest.importorskip("redis", reason="extra 'redis' not installed")
    prefix = f"fa-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def redis_available(request: pytest.FixtureRequest) -> None:
    """Skip a test parametrised with a Redis or PostgreSQL backend whose server is missing."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "redis" in callspec.id:
        problem = _answers(REDIS_URL, 6379)
        if problem:
            pytest.skip(f"Redis server missing: {problem}")
    if callspec is not None and "postgres" in callspec.id:
        problem = _answers(PG_URL, 5432)
        if problem:
            pytest.skip(f"PostgreSQL server missing: {problem}")
