"""Tenants on every database store: SQLite, PostgreSQL and Redis (their key-range listing).

The database stores page the thread list from a key index (``list_after``) and read many
values at once (``get_many``); the tenant's view passes both on under its prefix. Three
tenants, each with the same 6 ids and 6 of its own, page their lists 5 at a time and list
their A2A tasks; underneath, each thread is stored as ``<tenant>.<id>``. PostgreSQL and
Redis cases skip without their servers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_part
from a2a.types import a2a_pb2
from server_support import make_agent, scratch_store, start_server

from framework_agents.server import create_app, resolve_store

pytest.importorskip("framework_agents.stores", reason="needs the stores package")

TOKENS = {"st-alpha-1x": "alpha", "st-beta-2y": "beta", "st-gamma-3z": "gamma"}
TOKEN_OF = {tenant: token for token, tenant in TOKENS.items()}
TENANTS = sorted(TOKEN_OF)
JSON = {"Accept": "application/json"}


def own_ids(tenant: str) -> list[str]:
    """The 12 thread ids of ``tenant`` (6 every tenant uses)."""
    return [f"same-{i}" for i in range(6)] + [f"{tenant}-{i}" for i in range(6)]


# make test keeps the tenants apart on SQLite; PostgreSQL's and Redis's runs (a server
# on a fresh schema or prefix: seconds each) are in make stress.
@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow]),
        pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.slow]),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A scratch store of each kind (a PostgreSQL schema, a Redis prefix: removed after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agents.db'}"
        return
    with scratch_store(request.param, "h36ten") as url:
        yield url


def _paged(client: httpx.Client) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        params = {"limit": "5", **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/threads", params=params).json()
        ids += [t["thread_id"] for t in page["threads"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


def test_tenants_are_kept_apart_on_each_database_store(store_url: str) -> None:
    served = start_server(create_app(make_agent, store=store_url, tokens=TOKENS, console=False))
    try:
        for tenant in TENANTS:
            headers = {"Authorization": f"Bearer {TOKEN_OF[tenant]}"}
            with httpx.Client(base_url=served.url, headers=headers, timeout=60) as client:
                for thread_id in own_ids(tenant):
                    ran = client.post(
                        f"/api/threads/{thread_id}/runs",
                        json={"prompt": f"{tenant} on {thread_id}"},
                        headers=JSON,
                    )
                    assert ran.status_code == 200, ran.text
        for tenant in TENANTS:
            headers = {"Authorization": f"Bearer {TOKEN_OF[tenant]}"}
            with httpx.Client(base_url=served.url, headers=headers, timeout=60) as client:
                listed = _paged(client)
                assert sorted(listed) == sorted(own_ids(tenant))
                for thread_id in listed:
                    thread = client.get(f"/api/threads/{thread_id}").json()
                    assert thread["messages"][0]["content"] == f"{tenant} on {thread_id}"
                for other in TENANTS:
                    if other != tenant:
                        assert client.get(f"/api/threads/{other}-0").status_code == 404

        async def tasks() -> None:
            for tenant in TENANTS:
                http = httpx.AsyncClient(
                    headers={"Authorization": f"Bearer {TOKEN_OF[tenant]}"}, timeout=60
                )
                config = ClientConfig(streaming=False, httpx_client=http)
                client = await create_client(served.url, client_config=config)
                try:
                    for thread_id in own_ids(tenant)[:3]:
                        message = a2a_pb2.Message(
                            message_id=str(uuid.uuid4()),
                            role=a2a_pb2.Role.ROLE_USER,
                            parts=[new_text_part(f"{tenant} task")],
                            context_id=thread_id,
                        )
                        async for _ in client.send_message(
                            a2a_pb2.SendMessageRequest(message=message)
                        ):
                            pass
                    listed = await client.list_tasks(a2a_pb2.ListTasksRequest(page_size=2))
                    assert listed.total_size == 3
                finally:
                    await client.close()
                    await http.aclose()

        asyncio.run(tasks())
    finally:
        served.stop()

    async def stored() -> list[str]:
        store = resolve_store(store_url)
        try:
            threads: list[str] = await store.checkpointer.list_threads()
            return threads
        finally:
            await store.close()

    expected = [f"{tenant}.{thread_id}" for tenant in TENANTS for thread_id in own_ids(tenant)]
    assert sorted(asyncio.run(stored())) == sorted(expected)
