"""Load on the server: runs per second and latency over AG-UI and A2A, against an echo floor.

Usage::

    PYTHONPATH=src python bench/server_load.py [--runs 256] [--clients 1,16,64]
    PYTHONPATH=src python bench/server_load.py --listing [--a2a] [--threads 100000]
        [--stores sqlite,postgres,redis]
    PYTHONPATH=src python bench/server_load.py --replicas 1,2,3 --store-url URL
        [--clients 16] [--runs 256] [--balance roundrobin,leastconn]

The server runs in a child process (uvicorn, one worker) with a scripted model that answers
at once, on a directory store, so what is measured is the framework: protocol parsing,
the thread's lock, the checkpoint writes, the event mapping and the SSE encoding. Every
client owns one thread (an AG-UI ``threadId`` / an A2A ``contextId``) and runs its share
of ``--runs`` one after another. The floor is a bare Starlette handler that echoes the
request body, served the same way: the ratio says what one agent run costs on top of an
HTTP round trip. Figures are printed, never asserted.

``--replicas 1,2,3`` serves the agent from that many processes on ``--store-url``
(PostgreSQL or Redis) behind HAProxy (Debian's package, loopback; round robin, then least
connections) and runs AG-UI turns through it, beside one replica reached directly (the
proxy's own hop is the difference) and the echo floor, in the same run. Every replica serves
a few untimed runs first: a replica's first runs import the agent's modules and open its
pool, and cold replicas met first by the 2- and 3-replica levels were their p99.

``--listing`` measures the thread list instead: ``--threads`` thread entries are written
through the server's own index (``ThreadIndex.enter_summary``, a fifth of them waiting for
an approval) on each store (on PostgreSQL the same rows in one ``COPY``: a put is a
transaction, 100k of them take minutes), then 50-item pages are read at random cursors, for all
threads and for one state, through ``ThreadRunner.list_threads`` (the route's work but
HTTP). The baseline, in the same run on the same data, is the listing before the keyset
index: every entry's key listed, then the page's 50 entries read.

``--listing --a2a`` measures A2A ListTasks the same way: ``--threads`` tasks of one owner
(the rows ``StorageTaskStore.save`` writes; on SQLite and PostgreSQL in one statement),
50-task pages at random cursors (with the token the server gives there), for all tasks
and for ``input-required``, and a walk's first page (which counts the total); the same
baseline: every index name of the owner listed, then the page's 50 records read.
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
from typing import Any

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


_HAPROXY = """
global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
frontend agents
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance {balance}
{servers}
"""


def _proxy(
    ports: list[int], tmp: str, balance: str = "roundrobin"
) -> tuple[subprocess.Popen[str], str]:
    """HAProxy (Debian's package) over ``ports`` on loopback, balanced by ``balance``; its URL."""
    import shutil
    import socket

    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        front = sock.getsockname()[1]
    servers = "\n".join(f"    server r{i} 127.0.0.1:{p}" for i, p in enumerate(ports))
    config = Path(tmp) / f"haproxy-{front}.cfg"
    config.write_text(_HAPROXY.format(port=front, servers=servers, balance=balance))
    child = subprocess.Popen(
        [haproxy, "-db", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = f"http://127.0.0.1:{front}"
    for _ in range(100):
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return child, url
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError("haproxy did not start")


def _replicas(
    store_url: str, counts: list[int], clients: int, runs: int, balances: list[str]
) -> None:
    """AG-UI runs through HAProxy to 1..3 replicas, beside one replica direct and the floor.

    Each of ``balances`` (HAProxy's ``roundrobin``, ``leastconn``) is measured in turn.
    """
    with tempfile.TemporaryDirectory() as tmp:
        children: list[subprocess.Popen[str]] = []
        try:
            echo, echo_url = _start("echo", tmp)
            children.append(echo)
            started = [_start("agent", store_url) for _ in range(max(counts))]
            children += [c for c, _ in started]
            ports = [int(u.rsplit(":", 1)[1]) for _, u in started]
            print(f"{runs} AG-UI runs, {clients} clients; store {store_url.split('?')[0]}")
            header = f"{'route':<8} {'clients':>4} {'runs':>6} {'runs/s':>9} {'p50 ms':>8}"
            print(f"{header} {'p99 ms':>8} {'errors':>6}  floor / rate")
            # Every replica serves a few runs before anything is timed: a replica's first
            # runs import the agent's modules, open its pool and build its models, and
            # 256 runs have a p99 of their third slowest, so two cold replicas met first
            # by the 2- and 3-replica levels would be that tail.
            for _, replica in started:
                asyncio.run(_level(replica, "agui", clients, 2 * clients))
            floor = asyncio.run(_level(echo_url, "echo", clients, runs))
            print(floor.line(None))
            direct = asyncio.run(_level(started[0][1], "agui", clients, runs))
            print(direct.line(floor).replace("agui    ", "direct  "))
            for balance in balances:
                print(f"balance {balance}")
                for count in counts:
                    proxy, url = _proxy(ports[:count], tmp, balance)
                    children.append(proxy)
                    result = asyncio.run(_level(url, "agui", clients, runs))
                    print(result.line(floor).replace("agui    ", f"proxy x{count}"))
        finally:
            for child in children:
                child.terminate()
                child.wait(30)


_LISTING_URLS = {
    "postgres": os.environ.get("FA_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    "redis": os.environ.get("FA_REDIS_URL", "redis://127.0.0.1:6379/0"),
}


def _listing_url(kind: str, scratch: str, tmp: str) -> str:
    if kind == "sqlite":
        fast = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tmp)
        return f"sqlite:///{fast / (scratch + '.db')}"
    if kind == "postgres":
        return f"{_LISTING_URLS['postgres']}?schema={scratch}"
    return f"{_LISTING_URLS['redis']}?prefix={scratch}:"


def _thread(i: int) -> tuple[str, object, dict[str, object]]:
    from datetime import UTC, datetime, timedelta

    saved = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
    summary: dict[str, object] = {
        "saved_at": saved.isoformat(),
        "title": f"question {i}",
        "message_count": 2,
        "pending": i % 5 == 0,
    }
    return f"t{i:07d}", saved, summary


async def _copy_seed(url: str, scratch: str, threads: int) -> list[str]:
    """PostgreSQL: the rows ``enter_summary`` writes, in one COPY (a put is a transaction).

    Same keys and values as the index writes (``_index``'s layout), so the timed pages
    read exactly what a served store holds; only the writing is batched.
    """
    import psycopg

    from framework_agents.server._index import BY_STATE, RECENT, _suffix, state_of
    from framework_agents.sessions._base import digest

    suffixes = []
    async with await psycopg.AsyncConnection.connect(_LISTING_URLS["postgres"]) as conn:
        copy_sql = f"COPY {scratch}.fa_kv (key, data, updated_at, digest) FROM STDIN"
        async with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for i in range(1, threads):
                thread_id, saved, summary = _thread(i)
                suffix = _suffix(saved, thread_id)  # type: ignore[arg-type]
                suffixes.append(suffix)
                state = state_of(summary)
                data = json.dumps({**summary, "state": state}).encode()
                keys = [f"{RECENT}{suffix}", f"{BY_STATE}{state}/{suffix}"]
                rows = [(k, data) for k in keys]
                rows.append((f"server/threads/{thread_id}/recent", "\n".join(keys).encode()))
                for key, value in rows:
                    await copy.write_row((key, value, time.time(), digest(value)))
        await conn.commit()
    return suffixes


async def _seed(index: object, threads: int, copy: tuple[str, str] | None = None) -> list[str]:
    """Enter ``threads`` threads through the index; their entries' suffixes, newest first."""
    from framework_agents.server._index import _suffix

    suffixes = []
    batch: list[object] = []
    for i in range(1 if copy else threads):
        thread_id, saved, summary = _thread(i)
        suffixes.append(_suffix(saved, thread_id))  # type: ignore[arg-type]
        batch.append(index.enter_summary(thread_id, saved, summary))  # type: ignore[attr-defined]
        if len(batch) == 64:
            await asyncio.gather(*batch)  # type: ignore[arg-type]
            batch = []
    await asyncio.gather(*batch)  # type: ignore[arg-type]
    if copy is not None:  # the schema exists now: the rest in one COPY
        suffixes += await _copy_seed(*copy, threads)
    return sorted(suffixes)


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _print_pages(timings: dict[str, list[float]], labels: tuple[str, ...], base: float) -> None:
    """One line per ``labels``: p50 and p99 in ms, and the baseline's p50 over this p50."""
    for label in labels:
        p50 = _p50(timings[label])
        p99 = statistics.quantiles(timings[label], n=100)[98] * 1000
        print(f"  {label:<9} p50 {p50:8.2f} ms  p99 {p99:8.2f} ms  baseline/p50 {base / p50:6.1f}x")


async def _listing(kind: str, threads: int, pages: int, tmp: str) -> None:
    """Seed one store, then time keyset pages against the list-every-key baseline."""
    import random

    from framework_agents import Agent, FunctionModel
    from framework_agents.server._index import RECENT, encode_cursor
    from framework_agents.server._runner import ThreadRunner
    from framework_agents.server._store import ServerStore
    from framework_agents.stores import open_store

    scratch = f"bench_list_{uuid.uuid4().hex[:8]}"
    url = _listing_url(kind, scratch, tmp)
    store = open_store(url)
    model = FunctionModel(lambda messages, tools: "ok")
    runner = ThreadRunner(
        lambda: Agent(model), ServerStore(store.checkpointer, store.storage, store.close)
    )
    runner.threads._reconciled[None] = time.monotonic()  # seeded entries only: no look for others
    try:
        started = time.perf_counter()
        copy = (url, scratch) if kind == "postgres" else None
        suffixes = await _seed(runner.index, threads, copy)
        seeded = time.perf_counter() - started
        rng = random.Random(7)
        cursors = [encode_cursor(rng.choice(suffixes)) for _ in range(pages)]
        timings: dict[str, list[float]] = {"page": [], "waiting": [], "baseline": []}
        for cursor in cursors:
            t0 = time.perf_counter()
            page, _ = await runner.list_threads(limit=50, cursor=cursor)
            t1 = time.perf_counter()
            await runner.list_threads(limit=50, cursor=cursor, state="waiting")
            t2 = time.perf_counter()
            keys = sorted(await store.storage.list(RECENT))  # the listing before the index
            after = RECENT + cursor_suffix(cursor)
            cut = [k for k in keys if k > after][:50]
            await asyncio.gather(*(store.storage.get(k) for k in cut))
            t3 = time.perf_counter()
            assert len(page) == len(cut) or len(page) < 50
            timings["page"].append(t1 - t0)
            timings["waiting"].append(t2 - t1)
            timings["baseline"].append(t3 - t2)
        base = _p50(timings["baseline"])
        print(f"{kind}: {threads} threads seeded in {seeded:.1f} s; {pages} pages of 50")
        _print_pages(timings, ("page", "waiting", "baseline"), base)
    finally:
        await runner.aclose()
        await _drop_scratch(kind, url, scratch)


def _a2a_task(i: int) -> Any:
    """Task ``i`` of the A2A listing: a context of 100 tasks, a fifth waiting for input."""
    from a2a.types import a2a_pb2

    made = a2a_pb2.Task(id=f"t{i:07d}", context_id=f"ctx{i // 100}")
    waiting = a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
    made.status.state = waiting if i % 5 == 0 else a2a_pb2.TaskState.TASK_STATE_COMPLETED
    made.status.timestamp.FromNanoseconds((1_767_225_600 + i) * 1_000_000_000)
    return made


def _a2a_rows(owner: str, first: int, tasks: int) -> Any:
    """The ``(key, value)`` rows ``StorageTaskStore.save`` writes for tasks ``first``..."""
    from google.protobuf import json_format  # type: ignore[import-untyped]

    from framework_agents.server._a2a_store import TASKS, _index_keys

    for i in range(first, tasks):
        made = _a2a_task(i)
        for key in _index_keys(owner, made):
            yield key, b""
        record = {"owner": owner, "task": json_format.MessageToDict(made)}
        yield f"{TASKS}{made.id}.json", json.dumps(record).encode()


async def _a2a_bulk_seed(kind: str, url: str, scratch: str, owner: str, tasks: int) -> None:
    """SQLite and PostgreSQL: the rows the saves write, in one statement (a put is a
    transaction: 100k tasks of them take minutes); the schema exists (one save made it)."""
    from framework_agents.sessions._base import digest

    now = time.time()
    rows = [(k, v, now, digest(v)) for k, v in _a2a_rows(owner, 1, tasks)]
    if kind == "sqlite":
        import sqlite3

        def insert() -> None:
            with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
                conn.executemany(
                    "INSERT INTO fa_kv (key, data, updated_at, digest) VALUES (?, ?, ?, ?)", rows
                )

        await asyncio.to_thread(insert)
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(_LISTING_URLS["postgres"]) as conn:
        copy_sql = f"COPY {scratch}.fa_kv (key, data, updated_at, digest) FROM STDIN"
        async with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for row in rows:
                await copy.write_row(row)
        await conn.commit()
        await conn.set_autocommit(True)
        await conn.execute(f"VACUUM ANALYZE {scratch}.fa_kv")  # what autovacuum does after


async def _a2a_listing(kind: str, tasks: int, pages: int, tmp: str) -> None:
    """Seed one owner's A2A tasks, then time ListTasks pages against the same baseline."""
    import random

    from a2a.auth.user import User
    from a2a.server.context import ServerCallContext
    from a2a.types import a2a_pb2
    from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor

    from framework_agents.server._a2a_store import StorageTaskStore, _list_prefix, _name
    from framework_agents.stores import open_store

    class Owner(User):
        @property
        def is_authenticated(self) -> bool:
            return True

        @property
        def user_name(self) -> str:
            return "bench"

    context = ServerCallContext(user=Owner())
    scratch = f"bench_a2a_{uuid.uuid4().hex[:8]}"
    url = _listing_url(kind, scratch, tmp)
    store = open_store(url)
    tasks_store = StorageTaskStore(store.storage)
    try:
        started = time.perf_counter()
        bulk = kind in ("sqlite", "postgres")
        await tasks_store.save(_a2a_task(0), context)  # the owner's scope, the schema
        if bulk:
            await _a2a_bulk_seed(kind, url, scratch, "bench", tasks)
        else:  # Redis: the same keys through the storage, 64 at a time
            batch: list[Any] = []
            for key, value in _a2a_rows("bench", 1, tasks):
                batch.append(store.storage.put(key, value))
                if len(batch) == 64:
                    await asyncio.gather(*batch)
                    batch = []
            await asyncio.gather(*batch)
        seeded = time.perf_counter() - started
        t0 = time.perf_counter()
        await tasks_store.list(a2a_pb2.ListTasksRequest(page_size=50), context)
        first_listing = time.perf_counter() - t0  # looks for records the index lacks
        rng = random.Random(7)
        chosen = [_a2a_task(rng.randrange(tasks)) for _ in range(pages)]
        prefix = _list_prefix("bench", "", 0)
        waiting = a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
        timings: dict[str, list[float]] = {"page": [], "waiting": [], "first": [], "baseline": []}
        for made in chosen:
            nanos = made.status.timestamp.ToNanoseconds()
            place = encode_list_tasks_cursor(ListTasksCursor(nanos, made.id))
            t0 = time.perf_counter()
            page = await tasks_store.list(  # the token the server gives at that place
                a2a_pb2.ListTasksRequest(page_size=50, page_token=_token(place, tasks, 0)),
                context,
            )
            t1 = time.perf_counter()
            token = _token(place, tasks // 5, int(waiting))
            await tasks_store.list(
                a2a_pb2.ListTasksRequest(page_size=50, page_token=token, status=waiting), context
            )
            t2 = time.perf_counter()
            first_page = await tasks_store.list(a2a_pb2.ListTasksRequest(page_size=50), context)
            t3 = time.perf_counter()
            names = sorted(await store.storage.list(prefix))  # the listing before the index
            after = prefix + _name(nanos, made.id)
            cut = [k for k in names if k > after][:50]
            records = [f"a2a/tasks/{_name_id(k)}.json" for k in cut]
            await asyncio.gather(*(store.storage.get(k) for k in records))
            t4 = time.perf_counter()
            assert first_page.total_size == tasks and len(page.tasks) == len(cut)
            for label, spent in (("page", t1 - t0), ("waiting", t2 - t1), ("first", t3 - t2)):
                timings[label].append(spent)
            timings["baseline"].append(t4 - t3)
        base = _p50(timings["baseline"])
        print(
            f"{kind}: {tasks} A2A tasks of one owner seeded in {seeded:.1f} s; first listing "
            f"{first_listing * 1000:.0f} ms; {pages} ListTasks pages of 50"
        )
        _print_pages(timings, ("page", "waiting", "first", "baseline"), base)
    finally:
        await store.close()
        await _drop_scratch(kind, url, scratch)


def _token(place: str, total: int, state: int) -> str:
    """The page token the server gives after ``place`` (the SDK's cursor), with its total."""
    from framework_agents.server._a2a_store import _digest, _list_prefix

    return f"{place}.{total}.{_digest(_list_prefix('bench', '', state))[:8]}"


def _name_id(key: str) -> str:
    """The task id an A2A index key names."""
    from framework_agents.server._a2a_store import _task_of

    task_id = _task_of(key)
    assert task_id is not None
    return task_id


def cursor_suffix(cursor: str) -> str:
    """The entry suffix a cursor names."""
    from framework_agents.server._index import decode_cursor

    return decode_cursor(cursor)


async def _drop_scratch(kind: str, url: str, scratch: str) -> None:
    if kind == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            path = Path(url.removeprefix("sqlite:///") + suffix)
            await asyncio.to_thread(path.unlink, missing_ok=True)
    elif kind == "postgres":
        import psycopg

        async with await psycopg.AsyncConnection.connect(
            _LISTING_URLS["postgres"], autocommit=True
        ) as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {scratch} CASCADE")
    else:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(_LISTING_URLS["redis"])
        async for key in client.scan_iter(f"{scratch}:*", count=1000):
            await client.delete(key)
        await client.aclose()


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
    parser.add_argument("--listing", action="store_true", help="measure the thread list")
    parser.add_argument("--threads", type=int, default=100_000, help="threads (--listing)")
    parser.add_argument("--pages", type=int, default=200, help="pages timed (--listing)")
    parser.add_argument("--stores", default="sqlite,postgres,redis", help="(--listing)")
    parser.add_argument(
        "--a2a", action="store_true", help="(--listing) A2A ListTasks instead of threads"
    )
    parser.add_argument(
        "--replicas", default=None, help="e.g. 1,2,3: AG-UI through HAProxy to that many"
    )
    parser.add_argument(
        "--balance",
        default="roundrobin,leastconn",
        help="(--replicas) HAProxy balance algorithms, each measured in turn",
    )
    parser.add_argument("--serve", choices=["agent", "echo"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.port, args.store)
        return
    if args.replicas:
        if not args.store_url:
            parser.error("--replicas needs a shared --store-url (postgresql://... or redis://...)")
        counts = [int(n) for n in args.replicas.split(",")]
        clients = int(args.clients.split(",")[-1])
        _replicas(args.store_url, counts, clients, args.runs, args.balance.split(","))
        return
    if args.listing:
        with tempfile.TemporaryDirectory() as tmp:
            for kind in args.stores.split(","):
                listing = _a2a_listing if args.a2a else _listing
                asyncio.run(listing(kind, args.threads, args.pages, tmp))
        print(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count()}))
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
