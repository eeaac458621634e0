"""MCP, both ways: ``ask`` over ``/mcp`` beside the JSON API, and our client beside the SDK's.

Usage::

    PYTHONPATH=src python bench/mcp.py [--calls 300] [--rounds 5]

1. **Serving.** One server process (uvicorn, one worker, ``create_app(..., mcp=True)``, a
   scripted model that answers at once, a directory store) answers ``ask`` over ``/mcp``
   (the SDK's ``Client``, protocol 2026-07-28: one POST a call) and
   ``POST /api/threads/{id}/runs`` (httpx, ``Accept: application/json``). Every call runs
   on a thread of its own. The two alternate in rounds of ``--calls`` calls, one after
   another on one connection; the figure is the median latency of a call, client included.
2. **Calling tools.** One tool (``shout``: the text in capitals) of an SDK ``MCPServer``,
   over stdio (a child process per client) and streamable HTTP (one stateless server
   process): our ``MCPClient``'s tool (``tool.invoke(args)``, what an agent's call goes
   through, result conversion included) beside the bare SDK ``Client.call_tool`` in the
   same run, rounds alternating.

Figures are printed, never asserted; targets: ``ask`` within 1.5x of the JSON API, our
client within 1.2x of the SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, this file's directory leads sys.path, and this file's name would hide
# the ``mcp`` package it measures.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]


def _serve_agent(port: int, store: str) -> None:
    """Child process: the scripted agent with ``/mcp``, until killed."""
    import uvicorn

    from framework_agents import Agent, FunctionModel
    from framework_agents.server import create_app

    model = FunctionModel(lambda messages, tools: "ok")
    app = create_app(lambda: Agent(model), store=store, console=False, mcp=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _serve_tool(transport: str, port: int) -> None:
    """Child process: an SDK ``MCPServer`` with the tool ``shout``, until killed."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("shout")

    @server.tool()
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()

    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", port=port, stateless_http=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _child(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, __file__, *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _wait_port(port: int) -> None:
    """Wait until a server listens on ``port``."""
    for _ in range(600):
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"nothing listens on port {port}")


async def _timed(call: Callable[[int], Awaitable[Any]], start: int, count: int) -> list[float]:
    """Latencies of ``count`` calls made one after another."""
    latencies = []
    for i in range(start, start + count):
        began = time.perf_counter()
        await call(i)
        latencies.append(time.perf_counter() - began)
    return latencies


async def _alternate(
    calls: dict[str, Callable[[int], Awaitable[Any]]], count: int, rounds: int
) -> dict[str, float]:
    """Median latency (ms) of each kind of call, the kinds taking turns round by round."""
    for call in calls.values():  # warm both paths up (imports, connections, caches)
        await _timed(call, 10_000_000, 20)
    seen: dict[str, list[float]] = {name: [] for name in calls}
    offset = 0
    for _ in range(rounds):
        for name, call in calls.items():
            seen[name] += await _timed(call, offset, count)
            offset += count
    return {name: statistics.median(lat) * 1000 for name, lat in seen.items()}


def _report(title: str, medians: dict[str, float], base: str, target: float) -> None:
    print(title)
    for name, median in medians.items():
        ratio = median / medians[base]
        verdict = "met" if ratio <= target else "MISSED"
        mark = "" if name == base else f"  (target {target}x: {verdict})"
        print(f"  {name:<28} {median:8.3f} ms  {ratio:5.2f}x{mark}")


async def bench_serving(count: int, rounds: int) -> None:
    """``ask`` over /mcp beside the JSON API's run route on one server."""
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    port = _free_port()
    with tempfile.TemporaryDirectory() as store:
        child = _child("--serve-agent", str(port), store)
        try:
            url = f"http://127.0.0.1:{port}"
            await _wait_port(port)
            async with (
                httpx.AsyncClient(base_url=url, timeout=60) as http,
                Client(streamable_http_client(f"{url}/mcp")) as client,
            ):

                async def api(i: int) -> None:
                    response = await http.post(
                        f"/api/threads/api-{i}/runs",
                        json={"prompt": "hi"},
                        headers={"Accept": "application/json"},
                    )
                    assert response.json()["text"] == "ok"

                async def ask(i: int) -> None:
                    result = await client.call_tool("ask", {"thread_id": f"mcp-{i}", "text": "hi"})
                    assert not result.is_error

                medians = await _alternate(
                    {"JSON API run (httpx)": api, "MCP ask (SDK client)": ask}, count, rounds
                )
                protocol = client.protocol_version
        finally:
            child.kill()
            child.wait()
    _report(
        f"serving: one run, median of {count * rounds} calls (MCP protocol {protocol})",
        medians,
        "JSON API run (httpx)",
        1.5,
    )


async def bench_client(transport: str, count: int, rounds: int) -> None:
    """Our MCPClient's tool beside the SDK's ``call_tool``, one MCP server's ``shout``."""
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    from framework_agents.mcp import MCPClient
    from mcp import Client, StdioServerParameters

    env = {"PYTHONPATH": str(ROOT / "src")}
    child = None
    if transport == "stdio":
        ours = MCPClient.stdio(sys.executable, [__file__, "--serve-tool", "stdio", "0"], env=env)
        params = StdioServerParameters(
            command=sys.executable,
            args=[__file__, "--serve-tool", "stdio", "0"],
            env={**os.environ, **env},
        )
        bare_transport: Any = stdio_client(params)
    else:
        port = _free_port()
        child = _child("--serve-tool", "http", str(port))
        url = f"http://127.0.0.1:{port}/mcp"
        await _wait_port(port)
        ours = MCPClient.http(url)
        bare_transport = streamable_http_client(url)
    try:
        async with ours, Client(bare_transport) as bare:
            (tool,) = await ours.tools()

            async def through_ours(i: int) -> None:
                result = await tool.invoke({"text": "hi"})
                assert result.content == "HI", result

            async def through_sdk(i: int) -> None:
                result = await bare.call_tool("shout", {"text": "hi"})
                assert not result.is_error

            medians = await _alternate(
                {"SDK Client.call_tool": through_sdk, "MCPClient tool.invoke": through_ours},
                count,
                rounds,
            )
    finally:
        if child is not None:
            child.kill()
            child.wait()
    _report(
        f"tool call over {transport}: median of {count * rounds} calls",
        medians,
        "SDK Client.call_tool",
        1.2,
    )


async def main(count: int, rounds: int) -> None:
    """Every measurement, one after another."""
    await bench_serving(count, rounds)
    for transport in ("stdio", "http"):
        await bench_client(transport, count, rounds)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-agent":
        _serve_agent(int(sys.argv[2]), sys.argv[3])
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-tool":
        _serve_tool(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls of each kind a round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the kinds alternating")
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.rounds))
