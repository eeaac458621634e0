"""A web page must not drive a local server: Host, Origin and Content-Type (over a real socket).

Without a token (the default on loopback) the server is reachable by any page the user
opens. The attacks, each of which ran the agent or approved its tool before the guard:

* a cross-origin ``POST`` with ``Content-Type: text/plain`` (a CORS "simple" request, sent
  without a preflight) to the JSON API or AG-UI runs the agent and approves its calls;
* DNS rebinding: a page whose own name now resolves to 127.0.0.1 is "same-origin" with the
  server, so it reads threads and drives A2A with any headers it likes; only ``Host``
  tells it apart.

Here the requests carry the headers a browser sends; ``test_cross_site_browser.py`` makes
a real Chromium send them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import PUBLISHED, Served, make_agent, start_server

from framework_agents.errors import InvalidArgumentError
from framework_agents.server import create_app

EVIL = "http://evil.example"
A2A = {"A2A-Version": "1.0"}
JSON = {"Content-Type": "application/json"}
SUMMARY = {"Accept": "application/json"}


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[Served]:
    """The test agent served without a token, as ``framework-agents serve`` does on loopback."""
    running = start_server(create_app(make_agent, store=str(tmp_path / "s")))
    yield running
    running.stop()


def _netloc(served: Served) -> str:
    return served.url.removeprefix("http://")


def _pending(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    """A thread whose ``publish`` call waits for a human (asked for as a real client does)."""
    asked = client.post(
        f"/api/threads/{thread_id}/runs", json={"prompt": f"publish {thread_id}"}, headers=SUMMARY
    )
    assert asked.json()["status"] == "interrupted", asked.text
    pending: dict[str, Any] = asked.json()["pending"]
    return pending


def _agui_run(thread_id: str, text: str = "", resume: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": text}] if text else [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body


def _a2a_send(text: str, context_id: str) -> dict[str, Any]:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "contextId": context_id,
        "parts": [{"text": text}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.json()["error"]["code"] == code
    assert "Traceback" not in response.text


def _untouched(client: httpx.Client, thread_id: str, pending: dict[str, Any] | None) -> None:
    """``thread_id`` never ran (``pending is None``) or still waits on the same approval."""
    got = client.get(f"/api/threads/{thread_id}")
    if pending is None:
        assert got.status_code == 404, got.text
        return
    assert got.json()["pending"]["interrupt_id"] == pending["interrupt_id"]
    assert [p for p in PUBLISHED if p["title"] == thread_id] == []


def test_a_cross_site_text_plain_post_runs_nothing_over_the_json_api(open_server: Served) -> None:
    simple = {"Content-Type": "text/plain;charset=UTF-8", "Origin": EVIL, **SUMMARY}
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        ran = client.post(
            "/api/threads/victim/runs", content=json.dumps({"prompt": "hi"}), headers=simple
        )
        _refused(ran, 403, "ORIGIN_NOT_ALLOWED")
        _untouched(client, "victim", None)
        pending = _pending(client, "waiting")
        decisions = json.dumps({"decisions": {"publish": "approve"}})
        approved = client.post("/api/threads/waiting/resume", content=decisions, headers=simple)
        _refused(approved, 403, "ORIGIN_NOT_ALLOWED")
        for method, path in [
            ("DELETE", "/api/threads/waiting"),
            ("POST", "/api/threads/waiting/branches"),
            ("PATCH", "/api/threads/waiting/messages/x"),
        ]:
            other = client.request(method, path, content=b"{}", headers=simple)
            _refused(other, 403, "ORIGIN_NOT_ALLOWED")
        _untouched(client, "waiting", pending)


def test_a_cross_site_post_to_agui_runs_and_approves_nothing(open_server: Served) -> None:
    simple = {"Content-Type": "text/plain", "Origin": EVIL}
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        run = json.dumps(_agui_run("agui-victim", "publish agui-victim"))
        _refused(client.post("/agui", content=run, headers=simple), 403, "ORIGIN_NOT_ALLOWED")
        _untouched(client, "agui-victim", None)
        pending = _pending(client, "agui-waiting")
        entry = {"interruptId": pending["interrupt_id"], "status": "resolved"}
        resume = _agui_run("agui-waiting", resume=[{**entry, "payload": {"approved": True}}])
        approved = client.post("/agui", content=json.dumps(resume), headers=simple)
        _refused(approved, 403, "ORIGIN_NOT_ALLOWED")
        _untouched(client, "agui-waiting", pending)


def test_a_cross_site_a2a_call_runs_nothing(open_server: Served) -> None:
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        body = _a2a_send("publish a2a-victim", "a2a-victim")
        for content_type in ("text/plain", "application/json"):
            sent = client.post(
                "/a2a", json=body, headers={**A2A, "Content-Type": content_type, "Origin": EVIL}
            )
            _refused(sent, 403, "ORIGIN_NOT_ALLOWED")
        rest = {"message": body["params"]["message"]}
        sent = client.post("/a2a/rest/message:send", json=rest, headers={**A2A, "Origin": EVIL})
        _refused(sent, 403, "ORIGIN_NOT_ALLOWED")
        _untouched(client, "a2a-victim", None)


def test_a_rebound_host_reads_and_runs_nothing_on_any_protocol(open_server: Served) -> None:
    """DNS rebinding: same-origin for the browser (no preflight, any header), foreign Host."""
    port = open_server.url.rsplit(":", 1)[1]
    rebound = {"Host": f"evil.example:{port}"}
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        pending = _pending(client, "rebound")
        reads = ["/api/threads", "/api/threads/rebound", "/a2a/rest/tasks", "/console/app.js"]
        for path in reads:
            _refused(client.get(path, headers=rebound), 400, "HOST_NOT_ALLOWED")
        page = client.get("/", headers=rebound)
        _refused(page, 400, "HOST_NOT_ALLOWED")
        a2a = client.post("/a2a", json=_a2a_send("publish r2", "r2"), headers={**rebound, **A2A})
        _refused(a2a, 400, "HOST_NOT_ALLOWED")
        agui = client.post("/agui", json=_agui_run("r3", "publish r3"), headers=rebound)
        _refused(agui, 400, "HOST_NOT_ALLOWED")
        resume = {"decisions": {"publish": "approve"}}
        approved = client.post("/api/threads/rebound/resume", json=resume, headers=rebound)
        _refused(approved, 400, "HOST_NOT_ALLOWED")
        _untouched(client, "r2", None)
        _untouched(client, "r3", None)
        _untouched(client, "rebound", pending)
        # /healthz says nothing about threads: a probe through a proxy may name any host
        assert client.get("/healthz", headers=rebound).status_code == 200


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "[::1]", "app.localhost", "x"]
)
def test_loopback_hosts_are_served_with_or_without_a_port(open_server: Served, host: str) -> None:
    port = open_server.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        for value in (host, f"{host}:{port}"):
            got = client.get("/api/threads", headers={"Host": value})
            if host == "x":
                _refused(got, 400, "HOST_NOT_ALLOWED")
            else:
                assert got.status_code == 200, (value, got.text)


def test_a_request_without_host_or_origin_is_a_plain_client(open_server: Served) -> None:
    """curl, SDK clients and proxies' probes: JSON with no Origin works (HTTP/1.0: no Host)."""
    import socket

    address, port = _netloc(open_server).split(":")
    with socket.create_connection((address, int(port))) as conn:
        conn.sendall(b"GET /api/threads HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        done = client.post("/api/threads/curl/runs", json={"prompt": "hi"}, headers=SUMMARY)
        assert done.json()["status"] == "completed"


def test_the_servers_own_origin_may_post(open_server: Served) -> None:
    netloc = _netloc(open_server)
    port = netloc.rsplit(":", 1)[1]
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        own = {"Origin": f"http://{netloc}", **SUMMARY}
        done = client.post("/api/threads/own/runs", json={"prompt": "hi"}, headers=own)
        assert done.json()["status"] == "completed", done.text
        # the same page reached as localhost: its Origin names the Host it sent
        named = {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}", **SUMMARY}
        done = client.post("/api/threads/own/runs", json={"prompt": "again"}, headers=named)
        assert done.json()["status"] == "completed", done.text
        for origin in (
            f"http://localhost:{port}",  # another loopback name is another origin
            f"http://{netloc.split(':')[0]}:1",  # another port is another origin
            "null",  # a sandboxed frame, a file:// page, a data: URL
        ):
            other = client.post(
                "/api/threads/own/runs", json={"prompt": "x"}, headers={"Origin": origin}
            )
            _refused(other, 403, "ORIGIN_NOT_ALLOWED")
        # A browser that sends Sec-Fetch-Site without Origin is still a cross-site page.
        fetched = client.post(
            "/api/threads/own/runs", json={"prompt": "x"}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        _refused(fetched, 403, "ORIGIN_NOT_ALLOWED")
        # Reads stay open to any origin: the browser keeps the answer from the page (no CORS).
        assert client.get("/api/threads", headers={"Origin": EVIL}).status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        None,
    ],
)
def test_json_bodies_come_only_as_application_json(
    open_server: Served, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        body = json.dumps({"prompt": "publish typed"}).encode()
        sent = client.post("/api/threads/typed/runs", content=body, headers=headers)
        _refused(sent, 415, "UNSUPPORTED_MEDIA_TYPE")
        agui = client.post("/agui", content=json.dumps(_agui_run("typed", "hi")), headers=headers)
        _refused(agui, 415, "UNSUPPORTED_MEDIA_TYPE")
        a2a = client.post("/a2a", content=json.dumps(_a2a_send("hi", "typed")), headers=headers)
        _refused(a2a, 415, "UNSUPPORTED_MEDIA_TYPE")
        _untouched(client, "typed", None)
        for accepted in ("application/json", "application/json; charset=utf-8", "APPLICATION/JSON"):
            done = client.post(
                "/api/threads/typed/runs",
                content=body,
                headers={"Content-Type": accepted, **SUMMARY},
            )
            assert done.json()["status"] == "interrupted", (accepted, done.text)
            client.delete("/api/threads/typed")


def test_operators_allow_a_host_and_an_origin_behind_a_proxy(tmp_path: Path) -> None:
    app = create_app(
        make_agent,
        store=str(tmp_path / "p"),
        console=False,
        allowed_hosts=["agents.example.com", "*.internal.example"],
        allowed_origins=["https://app.example.com"],
    )
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            for host in ("agents.example.com", "Agents.Example.com:443", "a.b.internal.example"):
                assert client.get("/api/threads", headers={"Host": host}).status_code == 200
            for host in ("internal.example", "agents.example.com.evil", "evil.example"):
                _refused(
                    client.get("/api/threads", headers={"Host": host}), 400, "HOST_NOT_ALLOWED"
                )
            # A TLS proxy: the page is https://agents.example.com, the hop to us is plain HTTP.
            proxied = {"Host": "agents.example.com", "Origin": "https://agents.example.com"}
            done = client.post(
                "/api/threads/p/runs", json={"prompt": "hi"}, headers={**proxied, **SUMMARY}
            )
            assert done.json()["status"] == "completed", done.text
            app_page = {"Host": "agents.example.com", "Origin": "https://app.example.com"}
            done = client.post(
                "/api/threads/p/runs", json={"prompt": "hi"}, headers={**app_page, **SUMMARY}
            )
            assert done.json()["status"] == "completed", done.text
            # its preflight is answered (allowed origins are CORS origins too)
            preflight = client.options(
                "/api/threads/p/runs",
                headers={
                    **app_page,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type",
                },
            )
            assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
            other = {"Host": "agents.example.com", "Origin": "https://evil.example"}
            sent = client.post("/api/threads/p/runs", json={"prompt": "x"}, headers=other)
            _refused(sent, 403, "ORIGIN_NOT_ALLOWED")
    finally:
        served.stop()


def test_a_wildcard_turns_each_check_off_for_a_proxy_that_does_it(tmp_path: Path) -> None:
    app = create_app(
        make_agent,
        store=str(tmp_path / "w"),
        console=False,
        token="t0ken",
        allowed_hosts=["*"],
        allowed_origins=["*"],
    )
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            headers = {"Host": "anything.example", "Origin": EVIL, "Authorization": "Bearer t0ken"}
            done = client.post(
                "/api/threads/w/runs", json={"prompt": "hi"}, headers={**headers, **SUMMARY}
            )
            assert done.json()["status"] == "completed", done.text
            # the token still guards, and a JSON body is still JSON
            del headers["Authorization"]
            _refused(client.get("/api/threads", headers=headers), 401, "UNAUTHORIZED")
            typed = client.post(
                "/api/threads/w/runs",
                content=b"{}",
                headers={"Content-Type": "text/plain", "Authorization": "Bearer t0ken"},
            )
            _refused(typed, 415, "UNSUPPORTED_MEDIA_TYPE")
    finally:
        served.stop()


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("allowed_hosts", "agents.example.com"),  # a string, not a list of them
        ("allowed_hosts", ["https://agents.example.com"]),
        ("allowed_hosts", ["agents.example.com/path"]),
        ("allowed_hosts", [""]),
        ("allowed_hosts", [5]),
        ("allowed_origins", ["app.example.com"]),
        ("allowed_origins", ["https://app.example.com/"]),
        ("allowed_origins", ["ftp://app.example.com"]),
        ("allowed_origins", "https://app.example.com"),
    ],
)
def test_a_malformed_host_or_origin_is_refused_when_the_app_is_made(
    tmp_path: Path, argument: str, value: Any
) -> None:
    with pytest.raises(InvalidArgumentError, match=argument):
        create_app(make_agent, store=str(tmp_path / "m"), **{argument: value})


def test_an_allowed_origin_in_another_spelling_is_answered_as_the_browser_spells_it(
    tmp_path: Path,
) -> None:
    """CORS compares strings: capitals or a default port in the list broke the preflight."""
    app = create_app(
        make_agent,
        store=str(tmp_path / "o"),
        console=False,
        allowed_origins=["HTTP://LOCALHOST:3000", "https://app.example:443", "http://[::1]:5173"],
    )
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            for origin in ("http://localhost:3000", "https://app.example", "http://[::1]:5173"):
                preflight = client.options(
                    "/api/threads/o/runs",
                    headers={
                        "Origin": origin,
                        "Access-Control-Request-Method": "POST",
                        "Access-Control-Request-Headers": "content-type",
                    },
                )
                assert preflight.status_code == 200, (origin, preflight.text)
                assert preflight.headers["access-control-allow-origin"] == origin
                done = client.post(
                    "/api/threads/o/runs",
                    json={"prompt": "hi"},
                    headers={"Origin": origin, **SUMMARY},
                )
                assert done.json()["status"] == "completed", done.text
    finally:
        served.stop()
