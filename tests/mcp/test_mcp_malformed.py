"""Malformed JSON-RPC from an MCP server, end to end: coded errors or tool errors, no hang.

Over stdio, ``tests/mcp/bad_server.py`` (JSON lines written by hand) breaks the protocol
one way per mode; over streamable HTTP, a small server of this module (the standard
library's HTTP server, in a thread) does the same with bodies and SSE events. Each call
goes through an agent with a scripted model: a broken answer is a tool error the model
reads (and the history stays well formed: every call answered), a broken handshake or
listing is ``BACKEND_UNAVAILABLE``; no raw SDK exception comes out. A server that answers
only under a wrong id is bounded by ``call_timeout`` (an answer under an unknown id is
dropped: it may be a late answer to a call that timed out).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun

pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")

from framework_agents import Agent, BackendUnavailableError, Message, ScriptedModel, ToolCall
from framework_agents.history import well_formed_problems
from framework_agents.mcp import MCPClient

BAD_SERVER = str(Path(__file__).with_name("bad_server.py"))
BIG = 12 * 1024 * 1024
NOT_JSON = "the MCP server sent a malformed message (a line that is not JSON)"
NOT_JSONRPC = (
    "the MCP server sent a malformed message (JSON that is not a JSON-RPC request, "
    "response or notification)"
)


async def answers(client: MCPClient, calls: int = 1, call_timeout: float | None = 20) -> list[Any]:
    """``calls`` calls of the server's ``go`` through an agent: (kind, text) of each result."""
    async with client:
        tools = await client.tools(call_timeout=call_timeout)
        turns = [
            Message("assistant", "", tool_calls=[ToolCall(f"c{i}", "go", {})]) for i in range(calls)
        ]
        result = await Agent(ScriptedModel([*turns, "done"]), tools=tools).run("go")
    assert well_formed_problems(result.messages) == []
    assert result.text == "done"
    return [(m.kind, m.text) for m in result.messages if m.role == "tool"]


def stdio(mode: str, start_timeout: float = 10) -> MCPClient:
    return MCPClient.stdio(sys.executable, [BAD_SERVER, mode], start_timeout=start_timeout)


def error(text: str) -> tuple[str, str]:
    return ("tool_error", f"Error: tool 'go' raised MCPToolError: {text}")


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("not-jsonrpc", [error(NOT_JSONRPC)]),
        ("bad-error", [error(NOT_JSONRPC)]),
        ("unknown-response", [(None, "ok")]),
    ],
)
def test_stdio_a_broken_answer_is_a_tool_error_the_model_sees(
    mode: str, expected: list[Any]
) -> None:
    assert arun(answers(stdio(mode)), timeout=60) == expected


def test_stdio_a_line_that_is_not_json_ends_the_running_call_and_the_next_call_works() -> None:
    assert arun(answers(stdio("garbage-once"), calls=2), timeout=60) == [
        error(NOT_JSON),
        (None, "ok"),
    ]


def test_stdio_a_result_that_is_not_a_tool_result_is_a_tool_error() -> None:
    ((kind, text),) = arun(answers(stdio("bad-result")), timeout=60)
    assert kind == "tool_error" and "the server's answer is malformed" in text


def test_stdio_an_answer_under_a_wrong_id_is_bounded_by_the_call_timeout() -> None:
    assert arun(answers(stdio("wrong-id"), call_timeout=1), timeout=60) == [
        error("no answer within 1 s")
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "huge",
            error(
                f"the result is {BIG} characters, over the limit of 1000000 "
                "(max_result_chars); ask for less"
            ),
        ),
        ("huge-garbage", error(NOT_JSON)),
    ],
)
def test_stdio_a_twelve_megabyte_message(mode: str, expected: Any) -> None:
    assert arun(answers(stdio(mode)), timeout=120) == [expected]


def test_stdio_a_handshake_answered_with_garbage_is_backend_unavailable_after_start_timeout() -> (
    None
):
    # The garbage comes back within milliseconds of the initialize; then only the start
    # timeout ends the wait (a second: what this costs the suite, with room for a slow start).
    with pytest.raises(BackendUnavailableError, match=r"did not answer within 1\.0 s") as info:
        arun(answers(stdio("garbage-handshake", start_timeout=1.0)), timeout=60)
    assert "garbage-handshake" in info.value.message


def test_stdio_a_malformed_tool_list_is_backend_unavailable() -> None:
    with pytest.raises(BackendUnavailableError, match="malformed tools/list answer"):
        arun(answers(stdio("bad-list")), timeout=60)


# -- streamable HTTP ------------------------------------------------------------------

TOOL = {"name": "go", "description": "Answers as the mode says.", "inputSchema": {"type": "object"}}


def _rpc(request_id: Any, result: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def _text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def _sse(*data: str) -> str:
    return "".join(f"event: message\ndata: {d}\n\n" for d in data)


#: What the HTTP server answers a ``tools/call`` with, by mode: (status, content type, body).
HTTP_CALLS: dict[str, Any] = {
    "garbage": lambda i: (200, "application/json", "not json {"),
    "wrong-id": lambda i: (200, "application/json", _rpc(f"{i}-wrong", _text("no"))),
    "sse-garbage": lambda i: (200, "text/event-stream", _sse("not json {")),
    "sse-unknown": lambda i: (
        200,
        "text/event-stream",
        _sse(_rpc(424242, _text("nobody asked")), _rpc(i, _text("ok"))),
    ),
    "html-500": lambda i: (500, "text/html", "<html>oops</html>"),
    "text-plain": lambda i: (200, "text/plain", "hello"),
    "huge": lambda i: (200, "application/json", _rpc(i, _text("x" * BIG))),
}


class _Handler(BaseHTTPRequestHandler):
    """Just enough MCP over HTTP for a handshake and a listing; calls as the mode says."""

    mode = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _reply(self, status: int, content_type: str, body: str) -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # a client that has gone (a notification)
            pass

    def do_GET(self) -> None:
        self._reply(405, "text/plain", "")

    def do_DELETE(self) -> None:
        self._reply(200, "text/plain", "")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            self._reply(202, "text/plain", "")
        elif method == "initialize":
            info = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bad", "version": "0"},
            }
            self._reply(200, "application/json", _rpc(request_id, info))
        elif method == "tools/list":
            self._reply(200, "application/json", _rpc(request_id, {"tools": [TOOL]}))
        elif method == "tools/call":
            self._reply(*HTTP_CALLS[self.mode](request_id))
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
            self._reply(200, "application/json", body)


@pytest.fixture
def http_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The bad HTTP server in ``request.param``'s mode: its /mcp URL."""
    handler = type("Handler", (_Handler,), {"mode": request.param})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits for serve_forever to notice it between two polls: at the default
    # interval (0.5 s) that was half a second of every test of this module's HTTP half.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize(
    ("http_server", "expected"),
    [
        ("garbage", "Failed to parse JSON response"),
        ("sse-garbage", "Failed to parse SSE message"),
        ("html-500", "Server returned an error response"),
        ("text-plain", "Unexpected content type: text/plain"),
        ("huge", f"the result is {BIG} characters, over the limit of 1000000"),
    ],
    indirect=["http_server"],
)
def test_http_a_broken_answer_is_a_tool_error_the_model_sees(
    http_server: str, expected: str
) -> None:
    ((kind, text),) = arun(answers(MCPClient.http(http_server)), timeout=60)
    assert kind == "tool_error" and expected in text, text
    assert "Traceback" not in text


@pytest.mark.parametrize("http_server", ["wrong-id"], indirect=True)
def test_http_an_answer_under_a_wrong_id_is_bounded_by_the_call_timeout(http_server: str) -> None:
    assert arun(answers(MCPClient.http(http_server), call_timeout=1), timeout=60) == [
        error("no answer within 1 s")
    ]


@pytest.mark.parametrize("http_server", ["sse-unknown"], indirect=True)
def test_http_the_first_response_on_a_calls_own_stream_answers_it(http_server: str) -> None:
    """The SDK takes a response on a POST's SSE stream as that request's, whatever its id."""
    assert arun(answers(MCPClient.http(http_server)), timeout=60) == [(None, "nobody asked")]
