"""The server on the database stores: one conversation across two replicas sharing a store.

Needs ``framework_agents.stores``; PostgreSQL and Redis cases need their servers (skipped
with the reason when unreachable).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import PUBLISHED, Served, make_agent, start_server

from framework_agents.server import create_app

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("framework_agents.stores") is None,
    reason="needs framework_agents.stores (SQLite, PostgreSQL, Redis)",
)

PG_URL = os.environ.get("FA_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FA_REDIS_URL", "redis://127.0.0.1:6379/0")


def _reachable(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'agents.db'}"
    port = 5432 if request.param == "postgres" else 6379
    if not _reachable(port):
        pytest.skip(f"no {request.param} server on 127.0.0.1:{port}")
    return PG_URL if request.param == "postgres" else REDIS_URL


@pytest.fixture
def replicas(store_url: str) -> Iterator[tuple[Served, Served]]:
    """Two servers sharing ``store_url``."""
    PUBLISHED.clear()
    first = start_server(create_app(make_agent, store=store_url, console=False))
    second = start_server(create_app(make_agent, store=store_url, console=False))
    yield first, second
    first.stop()
    second.stop()


def test_interrupted_on_one_replica_approved_on_the_other(replicas: tuple[Served, Served]) -> None:
    first, second = replicas
    thread = f"shared-{uuid.uuid4().hex[:12]}"
    accept = {"Accept": "application/json"}
    with httpx.Client(timeout=60) as client:
        asked = client.post(
            f"{first.url}/api/threads/{thread}/runs", json={"prompt": "publish S"}, headers=accept
        ).json()
        assert asked["status"] == "interrupted"
        seen = client.get(f"{second.url}/api/threads/{thread}").json()
        assert seen["pending"]["args"] == {"title": "S", "copies": 3}
        done = client.post(
            f"{second.url}/api/threads/{thread}/resume",
            json={"decisions": {seen["pending"]["tool_call_id"]: "approve"}},
            headers=accept,
        ).json()
        assert done["status"] == "completed"
        assert PUBLISHED == [{"title": "S", "copies": 3}]
        final = client.get(f"{first.url}/api/threads/{thread}").json()
        assert [m["role"] for m in final["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert [e["kind"] for e in final["timeline"]] == ["run", "resume"]
