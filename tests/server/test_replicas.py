"""Three ``framework-agents serve`` replicas on one store behind HAProxy, as in production.

Each replica is a real ``serve`` process on PostgreSQL (a scratch schema) or on Redis (a
scratch prefix); HAProxy, from Debian's package, balances them round robin on loopback
with no sticky sessions, so consecutive requests of one conversation land on different
replicas. Clients drive conversations whose second turn needs an approval; midway one
replica is SIGKILLed. Afterwards every conversation loads, holds each message once, and
its approved tool ran at most once (the tool appends one line per call to a log file);
every client got its answer or a coded error it could retry.

Marked ``slow`` (processes for tens of seconds); needs ``haproxy`` (``.ci/run`` installs
it) and the servers.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from processes import close_process

pytestmark = [pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")
PG_URL = os.environ.get("FA_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FA_REDIS_URL", "redis://127.0.0.1:6379/0")
JSON = {"Accept": "application/json"}
#: Seconds a dead or frozen replica keeps its threads.
LEASE = 2
#: Codes a client may meet while a replica dies, and retry.
RETRYABLE = {"THREAD_BUSY", "SHUTTING_DOWN", "BACKEND_UNAVAILABLE", "LOCK_TIMEOUT"}

APP = """
import os
from pathlib import Path
from framework_agents import Agent, FunctionModel, Message, ToolCall, tool

LOG = Path(os.environ["PUBLISH_LOG"])

@tool(requires_approval=True)
def publish(title: str) -> str:
    '''Publish a post (a human approves it).'''
    with LOG.open("a") as log:  # one line per call: a call run twice shows twice
        log.write(title + "\\n")
    return f"published {title}"

def answer(messages, tools):
    last = messages[-1]
    if last.role == "tool":
        return Message(role="assistant", content=f"done: {last.text}")
    turn = sum(1 for m in messages if m.role == "user")
    if last.text.startswith("publish "):
        call = ToolCall(f"p{turn}", "publish", {"title": last.text[8:]})
        return Message(role="assistant", tool_calls=[call])
    return Message(role="assistant", content=f"echo: {last.text}")

def factory():
    return Agent(FunctionModel(answer), tools=[publish])
"""

HAPROXY = """
global
    maxconn 512
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 20s
    option redispatch
    retries 2
frontend agents
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
{servers}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _reachable(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _start_replica(tmp_path: Path, store: str, port: int) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env["PUBLISH_LOG"] = str(tmp_path / "published.log")
    env.pop("FRAMEWORK_AGENTS_TOKEN", None)
    command = [sys.executable, "-m", "framework_agents.cli", "serve", "replicaapp:factory"]
    command += ["--store", store, "--port", str(port), "--no-console", "--lease", str(LEASE)]
    command += ["--allowed-host", "*"]
    process = subprocess.Popen(
        command, env=env, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "Application startup complete" in line:
            # drain the rest of its log so the pipe never fills
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process
    process.wait(10)
    pytest.fail("a replica did not start:\n" + "".join(seen))


@pytest.fixture(params=["postgres", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """A scratch PostgreSQL schema or Redis prefix, removed afterwards."""
    port = 5432 if request.param == "postgres" else 6379
    if not _reachable(port):
        pytest.skip(f"no {request.param} server on 127.0.0.1:{port}")
    scratch = f"h35rep_{uuid.uuid4().hex[:10]}"
    if request.param == "redis":
        yield f"{REDIS_URL}?prefix={scratch}:"
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(f"{scratch}:*"):
            client.delete(key)
        client.close()
        return
    yield f"{PG_URL}?schema={scratch}"
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {scratch} CASCADE")


@pytest.fixture
def cluster(tmp_path: Path, store: str) -> Iterator[tuple[str, list[subprocess.Popen[str]]]]:
    """Three replicas on ``store`` behind HAProxy: the proxy's URL and the replicas."""
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(haproxy).exists():
        pytest.skip("haproxy is not installed (apt-get install haproxy)")
    (tmp_path / "replicaapp.py").write_text(APP)
    (tmp_path / "published.log").write_text("")
    ports = [_free_port() for _ in range(3)]
    replicas: list[subprocess.Popen[str]] = []
    proxy: subprocess.Popen[str] | None = None
    try:
        for port in ports:
            replicas.append(_start_replica(tmp_path, store, port))
        front = _free_port()
        servers = "\n".join(
            f"    server r{i} 127.0.0.1:{port} check inter 500 fall 1 rise 2"
            for i, port in enumerate(ports)
        )
        config = tmp_path / "haproxy.cfg"
        config.write_text(HAPROXY.format(port=front, servers=servers))
        proxy = subprocess.Popen(
            [haproxy, "-db", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        url = f"http://127.0.0.1:{front}"
        with httpx.Client(timeout=5) as client:
            for _ in range(100):  # until the proxy listens and has its replicas up
                try:
                    if client.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                threading.Event().wait(0.1)
        yield url, replicas
    finally:
        for process in [*replicas, *([proxy] if proxy else [])]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*replicas, *([proxy] if proxy else [])]:
            try:
                process.wait(30)
            finally:
                close_process(process)


def _call(client: httpx.Client, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """One request, retried on a coded error meant for retrying or a dropped connection."""
    last: dict[str, Any] = {}
    for _ in range(40):
        try:
            answer = client.request(method, path, json=body, headers=JSON)
        except httpx.TransportError as exc:  # the replica died under the request
            last = {"error": {"code": "CONNECTION", "message": str(exc)}}
            if method != "GET":
                return last  # it may have run: the caller looks before sending it again
            continue
        try:
            data: dict[str, Any] = answer.json() if answer.content else {}
        except ValueError:  # the proxy's own 502/503 page: its replica just died
            last = {"error": {"code": f"PROXY_{answer.status_code}", "message": answer.text}}
            if method != "GET" and answer.status_code != 503:
                return last  # a 502 may come after the run started: look first
            threading.Event().wait(0.2)
            continue
        code = (data.get("error") or {}).get("code")
        if answer.status_code < 400 and code not in RETRYABLE:
            return data
        if code not in RETRYABLE:
            return data
        last = data
        threading.Event().wait(0.2)
    return last


def _landed(client: httpx.Client, thread_id: str, prompt: str, times: int) -> dict[str, Any]:
    """The thread once ``prompt`` was sent ``times`` times (a lost answer: look, don't resend)."""
    for _ in range(60):
        thread = _call(client, "GET", f"/api/threads/{thread_id}")
        users = [m["content"] for m in thread.get("messages", []) if m["role"] == "user"]
        if users.count(prompt) >= times and not thread.get("running"):
            return thread
        threading.Event().wait(0.25)  # the run may still be going on another replica
    return {}


def _send(client: httpx.Client, thread_id: str, prompt: str, times: int) -> str:
    """Run ``prompt`` once: its status, retried only when it surely did not run."""
    for _ in range(20):
        answer = _call(client, "POST", f"/api/threads/{thread_id}/runs", {"prompt": prompt})
        if "status" in answer:
            return str(answer["status"])
        code = (answer.get("error") or {}).get("code", "")
        if code not in ("CONNECTION", "PROXY_502", "CHECKPOINT_MISSING"):
            return f"error:{code}"
        thread = _landed(client, thread_id, prompt, times)
        if thread:  # it ran before its answer was lost
            return "interrupted" if thread.get("pending") else "completed"
    return "error:GAVE_UP"


def _conversation(url: str, thread_id: str) -> str:
    """Hello, then a publish that needs an approval, approved; what it ended with."""
    with httpx.Client(base_url=url, timeout=60) as client:
        hello = _send(client, thread_id, "hello", 1)
        if hello != "completed":
            return f"hello: {hello}"
        asked = _send(client, thread_id, f"publish {thread_id}", 1)
        if asked != "interrupted":
            return f"publish: {asked}"
        for _ in range(10):
            seen = _call(client, "GET", f"/api/threads/{thread_id}")
            pending = seen.get("pending")
            if not pending:  # approved and answered (a lost answer of a resume)
                return "completed" if seen.get("messages") else "error:LOST"
            decision = {pending["tool_call_id"]: "approve"}
            done = _call(
                client, "POST", f"/api/threads/{thread_id}/resume", {"decisions": decision}
            )
            if done.get("status") == "completed":
                return "completed"
            code = (done.get("error") or {}).get("code", "")
            if code not in ("CONNECTION", "PROXY_502"):
                return f"error:{code}" if code else f"resume: {done}"
        return "error:GAVE_UP"


def test_conversations_survive_a_replica_killed_behind_the_proxy(
    cluster: tuple[str, list[subprocess.Popen[str]]], tmp_path: Path
) -> None:
    url, replicas = cluster
    threads = [f"c{i:03d}" for i in range(60)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(_conversation, url, t) for t in threads]
        futures[len(futures) // 3].result()  # a third under way: one replica dies
        replicas[1].kill()
        futures[2 * len(futures) // 3].result()  # two thirds: another freezes past its lease
        replicas[2].send_signal(signal.SIGSTOP)
        threading.Event().wait(LEASE * 1.5)  # the lease is wall-clock time: let it run out
        replicas[2].send_signal(signal.SIGCONT)  # it wakes holding nothing it may write
        outcomes = {t: f.result() for t, f in zip(threads, futures, strict=True)}
    # Every client got its answer, or a coded error (the approval's outcome unknown after
    # the kill is settled by the next decision, not run again on its own).
    assert all(o == "completed" or o.startswith("error:") for o in outcomes.values()), outcomes
    completed = [t for t, o in outcomes.items() if o == "completed"]
    assert len(completed) >= len(threads) * 0.9, outcomes
    published = Counter((tmp_path / "published.log").read_text().split())
    assert all(n == 1 for n in published.values()), published  # at most once
    assert all(published[t] == 1 for t in completed)
    with httpx.Client(base_url=url, timeout=60) as client:
        for thread_id in threads:
            thread = _call(client, "GET", f"/api/threads/{thread_id}")
            ids = [m["id"] for m in thread["messages"]]
            assert len(ids) == len(set(ids)), thread_id  # no message twice
            users = [m["content"] for m in thread["messages"] if m["role"] == "user"]
            assert users.count("hello") == 1, (thread_id, users)
        listed: list[str] = []
        cursor = None
        while True:
            params = {"limit": "25", **({"cursor": cursor} if cursor else {})}
            page = client.get("/api/threads", params=params).json()
            listed += [t["thread_id"] for t in page["threads"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(listed) == threads  # each once, across replicas
