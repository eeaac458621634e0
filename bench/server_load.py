"""Load on the server: runs per second and latency over AG-UI and A2A, against an echo floor.

Usage::

    PYTHONPATH=src python bench/server_load.py [--runs 256] [--clients 1,16,64]

The server runs in a child process (uvicorn, one worker) with a scripted model that answers
at once, on a directory store, so what is measured is the framework: protocol parsing,
the thread's lock, the checkpoint writes, the event mapping and the SSE encoding. Every
client owns one thread (an AG-UI ``threadId`` / an A2A ``contextId``) and runs its share
of ``--runs`` one after another. The floor is a bare Starlette handler that echoes the
request body, served the same way: the ratio says what one agent run costs on top of an
HTTP round trip. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _serve(kind: str, port: int, store: str) -> None:
    """Child process: serve the scripted agent or the echo floor until killed."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from framework_agents import Agent, FunctionModel
    from framework_agents.server import create_app

    if kind == "echo":

        async def echo(request: Request) -> Response:
            return Response(await request.body(), media_type="application/json")

        app = Starlette(routes=[Route("/echo", echo, methods=["POST"])])
    else:
        model = FunctionModel(lambda messages, tools: "ok")
        app = create_app(lambda: Agent(model), store=store, console=False)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="info", access_log=False)


@dataclass
class Result:
    """One measured level."""

    label: str
    clients: int
    runs: int
    seconds: float
    latencies: list[float]
    errors: int

    def line(self, floor: Result | None) -> str:
        """One row of the report."""
        rate = self.runs / self.seconds
        lat = sorted(self.latencies) or [0.0]
        p50 = statistics.median(lat) * 1000
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        ratio = f"{(floor.runs / floor.seconds) / rate:6.1f}x" if floor else "   1.0x"
        return (
            f"{self.label:<8} {self.clients:>4} {self.runs:>6} {rate:>9.1f} "
            f"{p50:>8.1f} {p99:>8.1f} {self.errors:>6}  {ratio}"
        )


async def _agui_run(client: httpx.AsyncClient, thread: str) -> bool:
    body = {
        "threadId": thread,
        "runId": str(uuid.uuid4()),
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "hi"}],
    }
    response = await client.post("/agui", json=body)
    return response.status_code == 200 and '"type":"RUN_FINISHED"' in response.text


async def _a2a_run(client: httpx.AsyncClient, thread: str) -> bool:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "contextId": thread,
        "parts": [{"text": "hi"}],
    }
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    response = await client.post("/a2a", json=rpc, headers={"A2A-Version": "1.0"})
    if response.status_code != 200:
        return False
    task = response.json().get("result", {}).get("task", {})
    return bool(task.get("status", {}).get("state") == "TASK_STATE_COMPLETED")


async def _echo_run(client: httpx.AsyncClient, thread: str) -> bool:
    response = await client.post("/echo", json={"threadId": thread, "content": "hi"})
    return response.status_code == 200


RUNNERS = {"agui": _agui_run, "a2a": _a2a_run, "echo": _echo_run}


async def _level(url: str, label: str, clients: int, runs: int) -> Result:
    run = RUNNERS[label]
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def client(index: int, share: int) -> None:
            nonlocal errors
            thread = f"bench-{label}-{clients}-{index}-{uuid.uuid4().hex[:8]}"
            for _ in range(share):
                start = time.perf_counter()
                try:
                    ok = await run(http, thread)
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - start)
                errors += 0 if ok else 1

        shares = [runs // clients + (1 if i < runs % clients else 0) for i in range(clients)]
        began = time.perf_counter()
        await asyncio.gather(*(client(i, s) for i, s in enumerate(shares) if s))
        seconds = time.perf_counter() - began
    return Result(label, clients, runs, seconds, latencies, errors)


def _start(kind: str, store: str) -> tuple[subprocess.Popen[str], str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, __file__, "--serve", kind, "--port", str(port), "--store", store]
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    for line in child.stderr:
        if "Uvicorn running on" in line:
            return child, f"http://127.0.0.1:{port}"
    raise RuntimeError(f"the {kind} server did not start")


def main() -> None:
    """Measure every level and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=256, help="runs per level")
    parser.add_argument("--clients", default="1,16,64", help="concurrent clients per level")
    parser.add_argument(
        "--store-url",
        default=None,
        help="the agent server's store (default: a fresh directory; e.g. sqlite:///<path>)",
    )
    parser.add_argument("--serve", choices=["agent", "echo"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.port, args.store)
        return
    levels = [int(n) for n in args.clients.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        echo, echo_url = _start("echo", tmp)
        agent, agent_url = _start("agent", args.store_url or str(Path(tmp) / "store"))
        try:
            print(f"{args.runs} runs per level; floor: a bare Starlette echo; ratio: floor / rate")
            print(f"store: {args.store_url or 'a directory'}")
            print(
                f"{'route':<8} {'clients':>4} {'runs':>6} {'runs/s':>9} {'p50 ms':>8} "
                f"{'p99 ms':>8} {'errors':>6}  ratio"
            )
            for clients in levels:
                floor = asyncio.run(_level(echo_url, "echo", clients, args.runs))
                print(floor.line(None))
                for label in ("agui", "a2a"):
                    print(asyncio.run(_level(agent_url, label, clients, args.runs)).line(floor))
        finally:
            for child in (echo, agent):
                child.terminate()
                child.wait(30)
    print(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
