"""Token, body bound and hostile ids over a real socket; loopback-only without a token."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Served, make_agent, start_server

from framework_agents.cli.serve import check_listen
from framework_agents.errors import InvalidArgumentError
from framework_agents.server import create_app

TOKEN = "s3cret-token"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Served]:
    """The test agent behind a token, with a small body bound."""
    app = create_app(make_agent, store=str(tmp_path / "s"), token=TOKEN, max_body=4096)
    running = start_server(app)
    yield running
    running.stop()


def test_every_route_but_the_card_health_and_console_needs_the_token(guarded: Served) -> None:
    agui_body = {"threadId": "t", "runId": "r", "messages": []}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        protected: list[tuple[str, str, Any]] = [
            ("GET", "/api/threads", None),
            ("GET", "/api/threads/t", None),
            ("POST", "/api/threads/t/runs", {"prompt": "hi"}),
            ("POST", "/api/threads/t/resume", {"decisions": {}}),
            ("DELETE", "/api/threads/t", None),
            ("POST", "/agui", agui_body),
            ("POST", "/a2a", rpc),
            ("GET", "/a2a/rest/tasks/x", None),
        ]
        for header in (None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"):
            headers = {"Authorization": header} if header else {}
            for method, path, body in protected:
                response = client.request(method, path, json=body, headers=headers)
                assert response.status_code == 401, (method, path, header)
                assert response.json()["error"]["code"] == "UNAUTHORIZED"
                assert response.headers["www-authenticate"] == "Bearer"
        assert client.get("/healthz").status_code == 200
        card = client.get("/.well-known/agent-card.json")
        assert card.status_code == 200
        assert card.json()["supportedInterfaces"][0]["url"] == f"{guarded.url}/a2a"
        assert client.get("/").status_code in (200, 404)  # the console page, once installed
        auth = {"Authorization": f"Bearer {TOKEN}"}
        ok = client.post(
            "/api/threads/t/runs",
            json={"prompt": "hi"},
            headers={**auth, "Accept": "application/json"},
        )
        assert ok.json()["status"] == "completed"
        assert client.get("/api/threads/t", headers=auth).status_code == 200


def test_oversize_bodies_are_refused_before_any_route(guarded: Served) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    big = {"prompt": "x" * 5000}
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        response = client.post("/api/threads/big/runs", json=big, headers=auth)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "BODY_TOO_LARGE"

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"prompt": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}'

        streamed = client.post("/api/threads/big/runs", content=chunks(), headers=auth)
        assert streamed.status_code == 413
        assert client.get("/api/threads/big", headers=auth).status_code == 404  # nothing ran


def test_hostile_thread_ids_never_reach_the_store(guarded: Served, tmp_path: Path) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=guarded.url, timeout=30) as client:
        for bad in ["..", "-x", "a%00", "a b", "%2e%2e", "x" * 200, "caf%C3%A9"]:
            response = client.post(f"/api/threads/{bad}/runs", json={"prompt": "x"}, headers=auth)
            assert response.status_code in (400, 404), bad
            assert response.json()["error"]["code"] in ("THREAD_ID_INVALID", "NOT_FOUND")
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        body["params"] = {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "contextId": "../../escape",
                "parts": [{"text": "hi"}],
            }
        }
        answer = client.post("/a2a", json=body, headers={**auth, "A2A-Version": "1.0"}).json()
        assert "Traceback" not in str(answer)
        assert "THREAD_ID_INVALID" in str(answer), answer
        for task_id in ("../../etc/passwd", "a/b", ".hidden", "x" * 300):
            rpc = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
            got = client.post("/a2a", json=rpc, headers={**auth, "A2A-Version": "1.0"}).json()
            assert "result" not in got and "Traceback" not in str(got), got
    outside = [p for p in tmp_path.rglob("*") if "escape" in p.name]
    assert outside == []


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_token(host: str) -> None:
    check_listen(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_other_addresses_need_a_token(host: str) -> None:
    with pytest.raises(InvalidArgumentError, match="--token"):
        check_listen(host, None)
    check_listen(host, "a-token")


def test_dot_segments_under_the_open_console_path_reach_no_protected_route(
    guarded: Served,
) -> None:
    host, port = guarded.url.removeprefix("http://").split(":")
    for path in ("/console/../api/threads", "/console/%2e%2e/api/threads", "/console/..%2fagui"):
        with socket.create_connection((host, int(port))) as conn:
            request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            conn.sendall(request.encode())
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        status = data.split(b"\r\n", 1)[0]
        assert status == b"HTTP/1.1 404 Not Found", (path, status)
        assert b'"threads"' not in data


def test_cors_preflight_passes_before_the_token_and_requests_still_need_it(
    tmp_path: Path,
) -> None:
    origin = "http://localhost:3000"
    app = create_app(
        make_agent, store=str(tmp_path / "c"), token=TOKEN, cors_origins=[origin], console=False
    )
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            preflight = client.options(
                "/agui",
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,content-type",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == origin
            denied = client.get("/api/threads", headers={"Origin": origin})
            assert denied.status_code == 401
            allowed = client.get(
                "/api/threads", headers={"Origin": origin, "Authorization": f"Bearer {TOKEN}"}
            )
            assert allowed.status_code == 200
            assert allowed.headers["access-control-allow-origin"] == origin
            other = client.options(
                "/agui",
                headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
            )
            assert "access-control-allow-origin" not in other.headers
    finally:
        served.stop()
