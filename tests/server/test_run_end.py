"""A run's end is seen once its thread is free; a DELETE cleans up while it holds the thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
from server_support import Served, make_agent, start_server

from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.server import create_app
from framework_agents.server._store import ServerStore
from framework_agents.sessions import InMemoryStorage

_JSON = {"accept": "application/json"}


def test_a_follow_up_sent_as_soon_as_the_end_is_read_finds_the_thread_free(
    served: Served,
) -> None:
    """The end event used to go out before the run let its thread go: a client that sent
    its next turn at once got 409 THREAD_BUSY (every time, over the JSON API and AG-UI)."""
    with httpx.Client(base_url=served.url, timeout=30) as client:
        for i in range(5):
            with client.stream(
                "POST", "/api/threads/quick/runs", json={"prompt": f"turn {i}"}
            ) as stream:
                for line in stream.iter_lines():
                    if line == "event: run_finished":
                        break
                else:
                    raise AssertionError("no run_finished event")
                answer = client.post(
                    "/api/threads/quick/runs", json={"prompt": f"next {i}"}, headers=_JSON
                )
                assert answer.status_code == 200, answer.text
                assert answer.json()["status"] == "completed"


class _GatedStorage(InMemoryStorage):
    """Its read of one key waits for ``go`` once armed (a slow remote store)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.armed = False
        self.entered = threading.Event()
        self.go = threading.Event()

    async def get(self, key: str) -> bytes | None:
        if self.armed and key == self.key:
            self.armed = False
            self.entered.set()
            await asyncio.to_thread(self.go.wait, 10)
        return await super().get(key)


def test_a_delete_cleans_up_before_it_lets_the_thread_go() -> None:
    """A run that started during a DELETE's clean-up lost its timeline to it; now the
    clean-up holds the thread (the run waits or is refused) and a later run keeps it."""
    storage = _GatedStorage("server/threads/t/recent")
    served = start_server(
        create_app(make_agent, store=ServerStore(InMemoryCheckpointer(), storage), console=False)
    )
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            first = client.post("/api/threads/t/runs", json={"prompt": "old"}, headers=_JSON)
            assert first.json()["status"] == "completed"
            storage.armed = True
            deleted: dict[str, Any] = {}
            deleting = threading.Thread(
                target=lambda: deleted.setdefault(
                    "status", httpx.delete(f"{served.url}/api/threads/t", timeout=30).status_code
                )
            )
            deleting.start()
            assert storage.entered.wait(10)  # the delete's clean-up is under way
            during = client.post("/api/threads/t/runs", json={"prompt": "new"}, headers=_JSON)
            assert during.status_code == 409, during.text
            assert during.json()["error"]["code"] == "THREAD_BUSY"
            storage.go.set()
            deleting.join(10)
            assert deleted["status"] in (200, 204)
            after = client.post("/api/threads/t/runs", json={"prompt": "new"}, headers=_JSON)
            assert after.json()["status"] == "completed"
            thread = client.get("/api/threads/t").json()
            assert [m["content"] for m in thread["messages"] if m["role"] == "user"] == ["new"]
            assert len(thread["timeline"]) == 1
    finally:
        storage.go.set()
        served.stop()
