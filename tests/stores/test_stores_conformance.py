"""The published conformance suite, run on all five backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from stores_backends import (
    file_factory,
    memory_factory,
    postgres_factory,
    redis_factory,
    sqlite_factory,
)

from framework_agents.testing.conformance import StoreConformance, StoreFactory


class TestInMemoryStore(StoreConformance):
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        return memory_factory()


class TestFileStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return file_factory(str(tmp_path / "store"))


class TestSqliteStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return sqlite_factory(str(tmp_path / "store.db"))


@pytest.mark.postgres
class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, pg_schema: str) -> StoreFactory:
        return postgres_factory(pg_schema)


@pytest.mark.redis
class TestRedisStore(StoreConformance):
    @pytest.fixture
    def store_factory(self, redis_prefix: str) -> StoreFactory:
        return redis_factory(redis_prefix)
