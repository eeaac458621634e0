"""A server with tenants records no token: in no span, no span event, no log line.

The app (``create_app(tokens=...)``) is driven in this process, with tracing on and
message content captured, over the JSON API and AG-UI by each tenant, with a wrong token
and on another tenant's thread; every log record the library and the server write (at
DEBUG) and every finished span are then searched for the tokens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import pytest

from framework_agents import Agent, FunctionModel, Message

from .conftest import Telemetry

pytest.importorskip("starlette", reason="needs the server extra")

import httpx

from framework_agents.server import create_app

TOKENS = {"otel-alpha-Vb71": "alpha", "otel-beta-Nc44": "beta"}
WRONG = "otel-wrong-Hh90"


def _echo(messages: list[Message], tools: list[Any]) -> Message:
    return Message(role="assistant", content=f"echo: {messages[-1].text}")


def _agent() -> Agent:
    return Agent(FunctionModel(_echo))


def _everything(value: Any) -> str:
    """``value`` (span attributes, events, links) as one string to search."""
    return json.dumps(value, default=str)


def test_no_token_reaches_a_span_or_a_log_line(
    otel: Telemetry,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    caplog.set_level(logging.DEBUG)
    app = create_app(_agent, store=str(tmp_path / "store"), tokens=TOKENS, console=False)

    async def drive() -> list[int]:
        statuses: list[int] = []
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for token, tenant in [*TOKENS.items(), (WRONG, "nobody")]:
                auth = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
                ran = await http.post(
                    "/api/threads/t1/runs", json={"prompt": f"{tenant} hi"}, headers=auth
                )
                statuses.append(ran.status_code)
                body = {
                    "threadId": "t2",
                    "runId": str(uuid.uuid4()),
                    "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "hey"}],
                    "state": {},
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
                statuses.append((await http.post("/agui", json=body, headers=auth)).status_code)
                missing = await http.get("/api/threads/never", headers=auth)
                statuses.append(missing.status_code)
                for answer in (ran, missing):
                    assert token not in answer.text
        return statuses

    statuses = asyncio.run(drive())
    assert statuses == [200, 200, 404, 200, 200, 404, 401, 401, 401]
    spans = otel.spans()
    assert spans, "tracing recorded nothing: the check below would prove nothing"
    assert any("alpha hi" in _everything(dict(s.attributes or {})) for s in spans)
    recorded = [
        _everything(
            {
                "name": span.name,
                "attributes": dict(span.attributes or {}),
                "events": [(e.name, dict(e.attributes or {})) for e in span.events],
                "status": str(span.status.description),
            }
        )
        for span in spans
    ]
    logged = [record.getMessage() for record in caplog.records]
    assert any("run" in line for line in logged)  # the server did log its runs
    for token in [*TOKENS, WRONG]:
        assert not [r for r in recorded if token in r]
        assert not [line for line in logged if token in line]
