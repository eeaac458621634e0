"""``/readyz`` (the store answers, its schema is current) and a draining server's 503s."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from server_support import make_agent

from async_helper import arun
from framework_agents.server import create_app
from framework_agents.server._errors import STATUS_BY_CODE

JSON = {"Accept": "application/json"}


async def _get(app: object, path: str, **kwargs: object) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.get(path, **kwargs)  # type: ignore[arg-type]


def test_readyz_is_200_on_a_store_that_answers_and_open_without_the_token(
    tmp_path: Path,
) -> None:
    app = create_app(make_agent, store=f"sqlite:///{tmp_path / 'a.db'}", token="s3cret")
    ready = arun(_get(app, "/readyz"))
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert arun(_get(app, "/api/threads")).status_code == 401  # the rest still needs it
    arun(app.state.runner.aclose())


@pytest.mark.parametrize(
    "store", ["postgresql://postgres@127.0.0.1:1/test", "redis://127.0.0.1:1/0"]
)
def test_readyz_is_503_backend_unavailable_when_the_store_is_down(store: str) -> None:
    app = create_app(make_agent, store=store)
    answer = arun(_get(app, "/readyz"))
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "BACKEND_UNAVAILABLE"
    assert arun(_get(app, "/healthz")).status_code == 200  # alive, not ready
    arun(app.state.runner.aclose())


def test_readyz_refuses_a_schema_newer_than_the_code(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "a.db"
    app = create_app(make_agent, store=f"sqlite:///{path}")
    assert arun(_get(app, "/readyz")).status_code == 200
    arun(app.state.runner.aclose())
    with sqlite3.connect(path) as conn:  # a newer release migrated the file
        conn.execute("UPDATE fa_schema SET version = 9999 WHERE id = 1")
    conn.close()
    later = create_app(make_agent, store=f"sqlite:///{path}")
    answer = arun(_get(later, "/readyz"))
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "BACKEND_UNAVAILABLE"
    assert "newer than" in answer.json()["error"]["message"]
    arun(later.state.runner.aclose())


def test_a_draining_server_takes_no_run_and_is_not_ready(tmp_path: Path) -> None:
    app = create_app(make_agent, store=str(tmp_path / "s"), console=False)

    async def body() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            done = await client.post("/api/threads/t/runs", json={"prompt": "hi"}, headers=JSON)
            assert done.json()["status"] == "completed"
            app.state.runner.drain(5.0)
            refused = await client.post(
                "/api/threads/t/runs", json={"prompt": "again"}, headers=JSON
            )
            assert refused.status_code == 503
            assert refused.json()["error"]["code"] == "SHUTTING_DOWN"
            resumed = await client.post(
                "/api/threads/t/resume", json={"decisions": {"x": "approve"}}, headers=JSON
            )
            assert resumed.json()["error"]["code"] == "SHUTTING_DOWN"
            agui = await client.post(
                "/agui",
                json={
                    "threadId": "t",
                    "runId": "r",
                    "messages": [{"id": "m", "role": "user", "content": "x"}],
                    "tools": [],
                    "context": [],
                    "state": {},
                    "forwardedProps": {},
                },
            )
            assert "SHUTTING_DOWN" in agui.text
            ready = await client.get("/readyz")
            assert (ready.status_code, ready.json()["error"]["code"]) == (503, "SHUTTING_DOWN")
            assert (await client.get("/api/threads/t")).status_code == 200  # reads go on
            await app.state.runner.aclose()

    arun(body())
    assert STATUS_BY_CODE["SHUTTING_DOWN"] == 503
