"""Replays recorded provider responses through the SDKs' own HTTP hook (test helper)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_bytes(name: str) -> bytes:
    """The bytes of a recorded body in ``fixtures/``."""
    return (FIXTURES / name).read_bytes()


def json_response(name: str, status: int = 200) -> httpx2.Response:
    """A recorded JSON body as an HTTP response."""
    return httpx2.Response(
        status, content=fixture_bytes(name), headers={"content-type": "application/json"}
    )


def sse_response(name: str) -> httpx2.Response:
    """A recorded server-sent-event body as a streaming HTTP response."""
    return httpx2.Response(
        200, content=fixture_bytes(name), headers={"content-type": "text/event-stream"}
    )


class Replay:
    """A MockTransport handler: answers with queued responses, records every request."""

    def __init__(self, *responses: httpx2.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if not self.responses:
            raise AssertionError(f"unexpected extra request {request.method} {request.url}")
        item = self.responses.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def body(self, index: int = -1) -> dict[str, Any]:
        """The JSON body of a recorded request."""
        value = json.loads(self.requests[index].content)
        assert isinstance(value, dict)
        return value

    def client(self) -> httpx2.AsyncClient:
        """An async HTTP client whose every request this replay answers."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))
