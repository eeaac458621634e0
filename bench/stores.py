"""Benchmark: the durable stores against the raw driver doing the same write (run by hand).

For each backend (SQLite, PostgreSQL, Redis; the file checkpointer for reference):

* per-turn save: a thread holding ``L`` messages (L = 10 and 1,000) gains one turn
  (two messages) per save; p50 and p99 of ``save()`` over ``--saves`` saves, beside the
  floor: the raw driver appending the same two rows (SQLite ``BEGIN IMMEDIATE`` +
  ``INSERT`` + ``COMMIT``, PostgreSQL one ``INSERT`` of two rows, Redis one ``RPUSH``).
  Target: within 2x of the floor, and flat in L (the save writes O(turn)).
* session save: ``SessionManager.save_latest`` of a snapshot that gained one turn, at
  10 and 1,000 messages (on these storages an appended record), beside the same floor.
* load of 10,000 messages (ms) from the checkpointer (a thread), a memory (filled by
  saves of 50) and a session (``load_latest``), beside the raw driver fetching the
  thread's rows and ``json.loads``-ing each (the peers' load: rows back as dicts).
* agent runs on the store's memory (``max_messages=5,000``, no conversation manager):
  ``Agent.run`` p50 with 10 and 1,000 messages stored, appending each run
  (``AppendableMemory.save_if``), and the same agent on the same memory seen through a
  wrapper without ``save_if`` (every run loads and replaces the window: what the
  database memories did before), beside the floor. Target: flat in the history.
* concurrency (PostgreSQL and Redis): N = 1, 8, 32 tasks, each running locked turns
  (``thread_lock`` + ``load`` + ``save``) on its own thread: turns per second, and the
  ratio to N = 1.

Usage: ``.venv/bin/python bench/stores.py [--saves 200] [--pg URL] [--redis URL]
[--only sqlite,postgres,redis,file] [--json]``. PostgreSQL uses a scratch schema and Redis
a scratch key prefix, both removed at the end; a backend whose server does not answer
is skipped with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    FunctionModel,
    Message,
    NullConversationManager,
    ThreadCheckpoint,
)
from framework_agents.checkpoint._base import thread_lock
from framework_agents.sessions import SessionManager
from framework_agents.sessions.snapshot import Snapshot, SnapshotData
from framework_agents.stores import Store, open_store
from framework_agents.stores.postgres import postgres_store
from framework_agents.stores.redis import redis_store


def _turn(i: int) -> list[Message]:
    return [
        Message("user", f"question {i}: what is the weather like in Paris today?"),
        Message("assistant", f"answer {i}: sunny, 21 degrees, light wind from the west."),
    ]


def _history(n: int) -> list[Message]:
    return [m for i in range(n // 2) for m in _turn(i)]


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _timed(samples: list[float], call: Callable[[], Awaitable[Any]]) -> None:
    start = time.perf_counter()
    await call()
    samples.append(time.perf_counter() - start)


async def bench_saves(
    store: Store, floor: Callable[[int], Awaitable[None]] | None, saves: int
) -> dict[str, Any]:
    """p50/p99 ms of save() of one turn onto threads of 10 and 1,000 messages, and of
    the raw driver's write, interleaved (one of each per round) so that load on the
    machine hits all three alike."""
    cp = store.checkpointer
    threads = {}
    for length in (10, 1000):
        tid = f"save-{length}-{uuid.uuid4().hex[:6]}"
        await cp.save(ThreadCheckpoint(tid, None, _history(length), {}))
        threads[length] = (tid, (await cp.load(tid)).messages)  # type: ignore[union-attr]
    samples: dict[str, list[float]] = {"floor": [], "10": [], "1000": []}
    for i in range(saves):
        if floor is not None:
            await _timed(samples["floor"], lambda i=i: floor(i))  # type: ignore[misc]
        for length, (tid, messages) in list(threads.items()):
            messages = messages + _turn(length + i)
            threads[length] = (tid, messages)
            checkpoint = ThreadCheckpoint(tid, None, messages, {"i": i})
            await _timed(samples[str(length)], lambda c=checkpoint: cp.save(c))  # type: ignore[misc]
    for tid, _ in threads.values():
        await cp.delete(tid)
    return {
        name: {"p50_ms": _pct(v, 0.5), "p99_ms": _pct(v, 0.99)} for name, v in samples.items() if v
    }


async def bench_session_saves(store: Store, saves: int) -> dict[str, Any]:
    """p50/p99 ms of ``SessionManager.save_latest`` gaining one turn, at 10 and 1,000."""
    managers = {}
    for length in (10, 1000):
        manager = SessionManager(f"bench-{length}-{uuid.uuid4().hex[:6]}", store.storage)
        messages = _history(length)
        await manager.save_latest(Snapshot(SnapshotData(messages=messages)))
        managers[length] = (manager, messages)
    samples: dict[str, list[float]] = {"10": [], "1000": []}
    for i in range(saves):
        for length, (manager, messages) in list(managers.items()):
            messages = messages + _turn(length + i)
            managers[length] = (manager, messages)
            snapshot = Snapshot(manager.snapshot_data(messages, {"i": i}))
            await _timed(samples[str(length)], lambda m=manager, s=snapshot: m.save_latest(s))  # type: ignore[misc]
    for manager, _ in managers.values():
        await store.storage.delete(manager.latest_key)
    return {name: {"p50_ms": _pct(v, 0.5), "p99_ms": _pct(v, 0.99)} for name, v in samples.items()}


class _ReplacingMemory:
    """The memory seen without ``save_if``: an agent loads and replaces it every run."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.max_messages = inner.max_messages

    async def load(self) -> list[Message]:
        return list(await self.inner.load())

    async def save(self, messages: list[Message]) -> None:
        await self.inner.save(messages)

    async def replace(self, messages: list[Message]) -> None:
        await self.inner.replace(messages)

    async def commit(self, messages: list[Message], *, base: Any = None) -> None:
        await self.inner.commit(messages, base=base)

    async def clear(self) -> None:
        await self.inner.clear()


async def bench_agent_runs(store: Store, runs: int) -> dict[str, Any]:
    """p50/p99 ms of ``Agent.run`` with 10 and 1,000 messages stored, appending and
    replacing (interleaved, one run of each per round)."""
    agents = {}
    for length in (10, 1000):
        for mode in ("append", "replace"):
            memory: Any = store.memory(f"agent-{mode}-{length}-{uuid.uuid4().hex[:6]}", 5000)
            await memory.save(_history(length))
            if mode == "replace":
                memory = _ReplacingMemory(memory)
            agent = Agent(
                FunctionModel(lambda history, tools: "sunny, 21 degrees, light wind"),
                memory=memory,
                conversation_manager=NullConversationManager(),
            )
            await agent.run("warm up")  # the first run loads what was stored
            agents[f"{mode}_{length}"] = agent
    samples: dict[str, list[float]] = {name: [] for name in agents}
    for i in range(runs):
        for name, agent in agents.items():
            await _timed(samples[name], lambda a=agent, i=i: a.run(f"question {i}"))  # type: ignore[misc]
    return {name: {"p50_ms": _pct(v, 0.5), "p99_ms": _pct(v, 0.99)} for name, v in samples.items()}


async def bench_load(
    store: Store, floor: Callable[[str], Awaitable[Any]] | None
) -> dict[str, float | None]:
    """ms to load 10,000 messages from the checkpointer, a memory and a session, and for
    the raw driver to read the thread's rows and ``json.loads`` each (best of 5 each,
    interleaved: one of each per round)."""
    cp = store.checkpointer
    tid = f"load-{uuid.uuid4().hex[:6]}"
    history = _history(10_000)
    await cp.save(ThreadCheckpoint(tid, None, history, {}))
    memory_key = f"load-{uuid.uuid4().hex[:6]}"  # a file store's memory has no ``key``
    memory = store.memory(memory_key, 10_000)
    for k in range(0, len(history), 50):  # saves of a few turns each, as a run makes them
        await memory.save(history[k : k + 50])
    session = SessionManager(f"load-{uuid.uuid4().hex[:6]}", store.storage)
    await session.save_latest(Snapshot(session.snapshot_data(history, {"k": 1})))
    loaders: dict[str, Callable[[], Awaitable[Any]]] = {
        "checkpointer": lambda: cp.load(tid),
        "memory": lambda: store.memory(memory_key, 10_000).load(),
        "session": lambda: SessionManager(session.session_id, store.storage).load_latest(),
    }
    if floor is not None:
        loaders["floor"] = lambda: floor(tid)
    samples: dict[str, list[float]] = {name: [] for name in loaders}
    for _ in range(5):
        for name, load in loaders.items():
            await _timed(samples[name], load)
    await cp.delete(tid)
    await memory.clear()
    await store.storage.delete(session.latest_key)
    return {name: min(v) * 1000 for name, v in samples.items()}


def load_floor_sqlite(path: Path) -> Callable[[str], Awaitable[Any]]:
    """The raw read: SELECT the thread's message rows, ``json.loads`` each (inline)."""

    async def read(thread_id: str) -> Any:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute(
                "SELECT body FROM fa_thread_messages WHERE thread_id = ? ORDER BY seq",
                (thread_id,),
            ).fetchall()
        finally:
            conn.close()
        return [json.loads(r[0]) for r in rows]

    return read


def load_floor_postgres(url: str, schema: str) -> Callable[[str], Awaitable[Any]]:
    """The raw read over one new autocommit connection, ``json.loads`` per row."""

    async def read(thread_id: str) -> Any:
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute(
                f'SELECT body FROM "{schema}".fa_thread_messages '  # type: ignore[arg-type]
                "WHERE thread_id = %s ORDER BY seq",
                (thread_id,),
            )
            rows = await cur.fetchall()
        return [json.loads(r[0]) for r in rows]

    return read


def load_floor_redis(url: str, prefix: str) -> Callable[[str], Awaitable[Any]]:
    """The raw read: one LRANGE of the thread's list, ``json.loads`` per element."""

    async def read(thread_id: str) -> Any:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url)
        try:
            rows = await client.lrange(f"{prefix}m:{thread_id}", 0, -1)
        finally:
            await client.aclose()
        return [json.loads(r) for r in rows]

    return read


async def bench_concurrency(open_: Callable[[], Store], n: int, turns: int) -> float:
    """Turns per second of ``n`` tasks running locked turns on their own threads."""
    store = open_()
    cp = store.checkpointer

    async def worker(k: int) -> None:
        tid = f"conc-{n}-{k}-{uuid.uuid4().hex[:6]}"
        for i in range(turns):
            async with thread_lock(cp, tid):
                base = await cp.load(tid)
                history = [] if base is None else base.messages
                await cp.save(ThreadCheckpoint(tid, None, history + _turn(i), {}))

    start = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(n)))
    elapsed = time.perf_counter() - start
    await store.close()
    return n * turns / elapsed


# -- floors: the raw driver doing the same write ------------------------------------------


def _bodies() -> list[bytes]:
    return [m.model_dump_json().encode() for m in _turn(0)]


async def floor_sqlite(path: Path) -> Callable[[int], Awaitable[None]]:
    """One raw write: BEGIN IMMEDIATE, INSERT two rows, COMMIT (inline, no thread)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS raw (t TEXT, seq INTEGER, body BLOB)")
    bodies = _bodies()

    async def write(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO raw VALUES (?, ?, ?)", [("t", 2 * i + j, b) for j, b in enumerate(bodies)]
        )
        conn.execute("COMMIT")

    return write


async def floor_postgres(url: str, schema: str) -> Callable[[int], Awaitable[None]]:
    """One raw write: an INSERT of two rows on an autocommit connection."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')  # type: ignore[arg-type]
    await conn.execute(f'CREATE TABLE "{schema}".raw (t TEXT, seq BIGINT, body BYTEA)')  # type: ignore[arg-type]
    bodies = _bodies()

    async def write(i: int) -> None:
        await conn.execute(
            f'INSERT INTO "{schema}".raw VALUES (%s, %s, %s), (%s, %s, %s)',  # type: ignore[arg-type]
            ("t", 2 * i, bodies[0], "t", 2 * i + 1, bodies[1]),
        )

    return write


async def floor_redis(url: str, prefix: str) -> Callable[[int], Awaitable[None]]:
    """One raw write: an RPUSH of two elements."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    bodies = _bodies()

    async def write(i: int) -> None:
        await client.rpush(f"{prefix}raw", *bodies)

    return write


# -- driver -------------------------------------------------------------------------------


async def run_backend(
    name: str,
    open_: Callable[[], Store],
    floor: Callable[[], Awaitable[Callable[[int], Awaitable[None]]]] | None,
    saves: int,
    concurrency: bool,
    load_floor: Callable[[str], Awaitable[Any]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    store = open_()
    try:
        raw = await floor() if floor is not None else None
        timings = await bench_saves(store, raw, saves)
        out["floor"] = timings.get("floor")
        out["save_at_10"], out["save_at_1000"] = timings["10"], timings["1000"]
        out["load_10k_ms"] = await bench_load(store, load_floor)
        out["session"] = await bench_session_saves(store, saves)
        out["agent"] = await bench_agent_runs(store, max(20, saves // 4))
    finally:
        await store.close()
    if concurrency:
        base = None
        for n in (1, 8, 32):
            rate = await bench_concurrency(open_, n, turns=max(5, 64 // n))
            base = base or rate
            out[f"turns_per_s_n{n}"] = {"rate": rate, "ratio_to_n1": rate / base}
    return out


def _report(name: str, r: dict[str, Any]) -> None:
    floor = r.get("floor")
    print(f"\n== {name}")
    for length in (10, 1000):
        s = r[f"save_at_{length}"]
        line = (
            f"  save one turn at {length:>5} messages: "
            f"p50 {s['p50_ms']:.2f} ms  p99 {s['p99_ms']:.2f} ms"
        )
        if floor:
            line += f"   (floor p50 {floor['p50_ms']:.2f} ms: {s['p50_ms'] / floor['p50_ms']:.2f}x)"
        print(line)
    flat = r["save_at_1000"]["p50_ms"] / r["save_at_10"]["p50_ms"]
    print(f"  p50 at 1,000 / p50 at 10: {flat:.2f}x")
    for length in ("10", "1000"):
        s = r["session"][length]
        line = (
            f"  session save_latest one turn at {length:>5} messages: "
            f"p50 {s['p50_ms']:.2f} ms  p99 {s['p99_ms']:.2f} ms"
        )
        if floor:
            line += f"   ({s['p50_ms'] / floor['p50_ms']:.2f}x floor)"
        print(line)
    for length in ("10", "1000"):
        a, b = r["agent"][f"append_{length}"], r["agent"][f"replace_{length}"]
        line = (
            f"  Agent.run at {length:>5} messages: append p50 {a['p50_ms']:.2f} ms"
            f" p99 {a['p99_ms']:.2f};  replace p50 {b['p50_ms']:.2f} ms p99 {b['p99_ms']:.2f}"
        )
        if floor:
            line += f"   (append {a['p50_ms'] / floor['p50_ms']:.2f}x floor)"
        print(line)
    growth = r["agent"]["append_1000"]["p50_ms"] / r["agent"]["append_10"]["p50_ms"]
    print(f"  Agent.run appending, p50 at 1,000 / p50 at 10: {growth:.2f}x")
    loads = r["load_10k_ms"]
    base = loads.get("floor")
    for what in ("checkpointer", "memory", "session"):
        line = f"  load 10,000 messages, {what:<12}: {loads[what]:6.1f} ms"
        if base:
            line += f"   (raw read + json.loads {base:.1f} ms: {loads[what] / base:.2f}x)"
        print(line)
    for n in (1, 8, 32):
        c = r.get(f"turns_per_s_n{n}")
        if c:
            print(
                f"  N={n:>2} locked turns: {c['rate']:.0f} turns/s ({c['ratio_to_n1']:.2f}x of N=1)"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--only", default="file,sqlite,postgres,redis")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    only = set(args.only.split(","))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "file" in only:
            results["file"] = await run_backend(
                "file", lambda: open_store(Path(tmp) / "files"), None, args.saves, False
            )
        if "sqlite" in only:
            db = Path(tmp) / "bench.db"
            results["sqlite"] = await run_backend(
                "sqlite",
                lambda: open_store(f"sqlite:///{db}"),
                lambda: floor_sqlite(Path(tmp) / "floor.db"),
                args.saves,
                False,
                load_floor_sqlite(db),
            )
    if "postgres" in only:
        results["postgres"] = await _postgres(args)
    if "redis" in only:
        results["redis"] = await _redis(args)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, r in results.items():
            if "skipped" in r:
                print(f"\n== {name}: skipped ({r['skipped']})")
            else:
                _report(name, r)


async def _postgres(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    schema = "fa_bench_" + uuid.uuid4().hex[:8]
    open_ = lambda: postgres_store(  # noqa: E731
        args.pg, lease=30, ttl=None, lock_timeout=30, schema=schema
    )
    try:
        return await run_backend(
            "postgres",
            open_,
            lambda: floor_postgres(args.pg, schema),
            args.saves,
            True,
            load_floor_postgres(args.pg, schema),
        )
    except Exception as exc:  # a missing server is reported, not raised
        return {"skipped": str(exc)}
    finally:
        try:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
        except psycopg.Error:
            pass


async def _redis(args: argparse.Namespace) -> dict[str, Any]:
    import redis

    prefix = f"fa-bench-{uuid.uuid4().hex[:8]}:"
    open_ = lambda: redis_store(  # noqa: E731
        args.redis, lease=30, ttl=None, lock_timeout=30, prefix=prefix
    )
    try:
        return await run_backend(
            "redis",
            open_,
            lambda: floor_redis(args.redis, prefix),
            args.saves,
            True,
            load_floor_redis(args.redis, prefix),
        )
    except Exception as exc:
        return {"skipped": str(exc)}
    finally:
        try:
            client = redis.Redis.from_url(args.redis)
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
        except redis.RedisError:
            pass


if __name__ == "__main__":
    asyncio.run(main())
