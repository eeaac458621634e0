"""The server logs one line per request and one per run (never configuring handlers)."""

from __future__ import annotations

import logging

import httpx
import pytest
from server_support import Served


def test_one_line_per_request_and_per_run(served: Served, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="framework_agents.server")
    with httpx.Client(base_url=served.url, timeout=30) as client:
        assert client.post("/api/threads/t1/runs", json={"prompt": "hello"}).status_code == 200
        assert client.get("/api/threads/t1").status_code == 200
        assert client.get("/api/threads/bad%20id").status_code == 400
    # A request's line is logged once its response is sent, so the client may read the last
    # response before the server thread logs it: stopping the server waits for that.
    served.stop()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("framework_agents.server")]
    requests = [line for line in lines if line.startswith(("GET ", "POST "))]
    assert any(line.startswith("POST /api/threads/t1/runs 200 ") for line in requests)
    assert any(line.startswith("GET /api/threads/t1 200 ") for line in requests)
    assert any(line.startswith("GET /api/threads/bad id 400 ") for line in requests)
    runs = [line for line in lines if line.startswith("run ")]
    assert len(runs) == 1 and " of thread t1: completed in " in runs[0]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.getMessage() in requests)
