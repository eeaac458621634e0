"""Hostile input the server must refuse at the door: reserved ids, malformed A2A bodies.

Each case was found by hostile testing and failed before its fix: a thread id the
thread-id rule accepted but storage refused (``CON``...) ran, then took the thread list
down for every client; A2A answered malformed JSON-RPC with -32603, Python's exception
text and a logged traceback.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import httpx
import pytest
from server_support import Served

from async_helper import arun
from framework_agents import InMemoryStorage, Message, ThreadCheckpoint
from framework_agents.server._index import ThreadIndex
from framework_agents.server._shapes import summary_json

JSON = {"Accept": "application/json"}
RESERVED = ["CON", "nul", "Aux", "com1", "LPT9", "con.txt", "trailing."]


@pytest.mark.parametrize("thread_id", RESERVED)
def test_a_reserved_thread_id_is_refused_on_every_route_and_the_list_stays_up(
    served: Served, thread_id: str
) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        run = client.post(f"/api/threads/{thread_id}/runs", json={"prompt": "hi"}, headers=JSON)
        assert run.status_code == 400, run.text
        assert run.json()["error"]["code"] == "THREAD_ID_INVALID"
        for answer in (
            client.get(f"/api/threads/{thread_id}"),
            client.delete(f"/api/threads/{thread_id}"),
        ):
            assert answer.json()["error"]["code"] == "THREAD_ID_INVALID", answer.text
        agui = client.post(
            "/agui",
            json={
                "threadId": thread_id,
                "runId": "r1",
                "messages": [{"id": "m1", "role": "user", "content": "hi"}],
                "tools": [],
                "context": [],
                "state": {},
                "forwardedProps": {},
            },
        )
        assert "THREAD_ID_INVALID" in agui.text
        ok = client.post("/api/threads/fine/runs", json={"prompt": "hi"}, headers=JSON)
        assert ok.status_code == 200
        listed = client.get("/api/threads")
        assert listed.status_code == 200, listed.text
        assert [t["thread_id"] for t in listed.json()["threads"]] == ["fine"]


def test_a2a_refuses_a_reserved_context_id(served: Served) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m1",
                "contextId": "CON",
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
            }
        },
    }
    with httpx.Client(base_url=served.url, timeout=30) as client:
        answer = client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
        assert "THREAD_ID_INVALID" in answer.text, answer.text
        listed = client.get("/api/threads")
        assert listed.status_code == 200 and listed.json()["threads"] == []


def test_a_thread_stored_under_an_id_the_rule_now_refuses_is_left_out_of_the_list(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store written before the rule: listing skips the thread, never fails for all."""

    def checkpoint(thread_id: str) -> ThreadCheckpoint:
        message = Message(role="user", content=f"about {thread_id}")
        # model_construct: the checkpoint an older release saved under that id
        return ThreadCheckpoint.model_construct(
            thread_id=thread_id,
            messages=[message],
            saved_at=datetime.now(UTC),
            pending=None,
        )

    stored = {"CON": checkpoint("CON"), "ok": checkpoint("ok")}

    async def load(thread_id: str) -> ThreadCheckpoint | None:
        return stored.get(thread_id)

    async def body() -> list[str]:
        index = ThreadIndex(InMemoryStorage(), summary_json)
        await index.reconcile(["CON", "ok"], load)
        rows, _ = await index.page(limit=10, after=None)
        return [str(r["thread_id"]) for r in rows]

    with caplog.at_level(logging.WARNING, logger="framework_agents.server._index"):
        assert arun(body()) == ["ok"]
    assert "leaving out thread 'CON'" in caplog.text


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\xff\xfe"}}',
        b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b', "method": "GetTask", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"n": ' + b"1" * 5000 + b"}}",
    ],
    ids=["invalid-utf8", "huge-id", "huge-param"],
)
def test_malformed_a2a_json_rpc_is_a_parse_error_without_a_traceback(
    served: Served, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            return await client.post("/a2a", content=body, headers=headers)

    with caplog.at_level(logging.DEBUG):
        answer = asyncio.run(post())
    error = answer.json()["error"]
    assert error["code"] == -32700, answer.text
    assert "Traceback" not in caplog.text and "exceeds the limit" not in answer.text.lower()
    assert not [r for r in caplog.records if r.exc_info], caplog.text


@pytest.mark.parametrize(
    "body",
    [b'{"message": {"messageId": "\xff"}}', b'{"message": {"n": ' + b"1" * 5000 + b"}}"],
    ids=["invalid-utf8", "huge-number"],
)
def test_malformed_a2a_rest_body_is_400_without_a_traceback(
    served: Served, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            return await client.post("/a2a/rest/message:send", content=body, headers=headers)

    with caplog.at_level(logging.DEBUG):
        answer = asyncio.run(post())
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert not [r for r in caplog.records if r.exc_info], caplog.text
