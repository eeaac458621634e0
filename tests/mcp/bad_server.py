"""An MCP server that breaks JSON-RPC on purpose, over stdio (newline-delimited JSON).

Run as ``python tests/mcp/bad_server.py MODE``. It speaks just enough of the protocol by
hand (no SDK: the SDK would not write what it writes) to pass the handshake
(``initialize``; ``server/discover`` is "method not found", so the client falls back to
it) and list one tool, ``go``; then each ``tools/call`` is answered as ``MODE`` says:

* ``garbage-once``: a line that is not JSON and no answer; later calls answer ``ok``;
* ``not-jsonrpc``: JSON that is no JSON-RPC message, and no answer;
* ``bad-error``: an error response whose ``error`` is not an error object;
* ``bad-result``: a result that is not a tool result;
* ``wrong-id``: the answer under another id (and nothing under the call's id);
* ``unknown-response``: first a response to a request never sent, then the answer;
* ``huge``: a 12 MB tool result (valid);
* ``huge-garbage``: a 12 MB line that is not JSON, and no answer.

Two more break earlier: ``garbage-handshake`` answers ``initialize`` with a line that is
not JSON; ``bad-list`` answers ``tools/list`` with a result that is not a tool list.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODE = sys.argv[1]
BIG = 12 * 1024 * 1024
TOOL = {"name": "go", "description": "Answers as the mode says.", "inputSchema": {"type": "object"}}


def send(message: Any) -> None:
    line = message if isinstance(message, str) else json.dumps(message)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def result(request_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def call(request_id: Any, calls: int) -> None:
    """Answer the ``calls``-th ``tools/call`` as ``MODE`` says."""
    if MODE == "garbage-once" and calls == 1:
        send("this is not JSON {")
    elif MODE == "not-jsonrpc":
        send({"hello": "world", "id": request_id})
    elif MODE == "bad-error":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": "x"}})
    elif MODE == "bad-result":
        send(result(request_id, {"content": "not a list"}))
    elif MODE == "wrong-id":
        send(result(f"{request_id}-wrong", text("for someone else")))
    elif MODE == "unknown-response":
        send(result(424242, text("nobody asked")))
        send(result(request_id, text("ok")))
    elif MODE == "huge":
        send(result(request_id, text("x" * BIG)))
    elif MODE == "huge-garbage":
        send("y" * BIG)
    else:
        send(result(request_id, text("ok")))


def main() -> None:
    calls = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:  # a notification
            continue
        if method == "initialize":
            if MODE == "garbage-handshake":
                send("<html>not an MCP server</html>")
                continue
            version = message["params"]["protocolVersion"]
            send(
                result(
                    request_id,
                    {
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "bad", "version": "0"},
                    },
                )
            )
        elif method == "tools/list":
            tools: Any = "not a list" if MODE == "bad-list" else [TOOL]
            send(result(request_id, {"tools": tools}))
        elif method == "tools/call":
            calls += 1
            call(request_id, calls)
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})


if __name__ == "__main__":
    main()
