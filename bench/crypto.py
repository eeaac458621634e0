"""Benchmark: encryption at rest (``cipher=``) against the same store without it (by hand).

For each backend (the directory store, SQLite; PostgreSQL with ``--pg``), in the same run,
one store opened with a ``Cipher`` and one without:

The conversation is ``bench/stores.py``'s (a user question and an assistant answer a
turn).

* save p50: a thread holding L messages (L = 10 and 1,000) gains one turn (two messages)
  per ``checkpointer.save``; a memory gains one turn per ``memory.save``; a session's
  ``save_latest`` gains one turn (an appended log record). Target: cipher/plain <= 1.3x.
* load of 10,000 messages: ``checkpointer.load`` of a thread, ``memory.load`` and
  ``load_latest`` of a session, each from a fresh store instance (nothing cached), the
  best of ``--loads`` runs. Target: cipher/plain <= 1.5x.

Usage: ``.venv/bin/python bench/crypto.py [--saves 200] [--loads 5] [--pg URL]
[--only directory,sqlite,postgres] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framework_agents import Cipher, ThreadCheckpoint
from framework_agents.sessions import SessionManager
from framework_agents.sessions.snapshot import Snapshot, SnapshotData
from framework_agents.stores import Store, open_store
from stores import _history, _timed, _turn  # the workload bench/stores.py times, and its timer

CIPHER = Cipher(keys={"bench": os.urandom(32)}, current="bench")


def _p50(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2] * 1000


async def _saves(store: Store, size: int, saves: int) -> dict[str, float]:
    """p50 (ms) of one-turn saves of a thread, a memory and a session holding ``size``."""
    tag = uuid.uuid4().hex[:8]
    history = _history(size)
    thread, memory = f"t{tag}", store.memory(f"m/{tag}", size + 2 * saves + 10)
    manager = SessionManager(f"s{tag}", store.storage)
    await store.checkpointer.save(ThreadCheckpoint(thread_id=thread, messages=history))
    await memory.save(history)
    await manager.save_latest(Snapshot(SnapshotData(messages=history)))
    out: dict[str, list[float]] = {"thread": [], "memory": [], "session": []}
    for i in range(saves):
        turn = _turn(size + i)
        history = [*history, *turn]
        checkpoint = ThreadCheckpoint(thread_id=thread, messages=history)
        await _timed(out["thread"], functools.partial(store.checkpointer.save, checkpoint))
        await _timed(out["memory"], functools.partial(memory.save, turn))
        snapshot = Snapshot(SnapshotData(messages=history))
        await _timed(out["session"], functools.partial(manager.save_latest, snapshot))
    return {name: _p50(samples) for name, samples in out.items()}


async def _loads(url: str, cipher: Cipher | None, loads: int) -> dict[str, float]:
    """Best time (ms) of loading 10,000 messages from a thread, a memory and a session."""
    history = _history(10_000)
    async with open_store(url, cipher=cipher) as store:
        await store.checkpointer.save(ThreadCheckpoint(thread_id="big", messages=history))
        memory = store.memory("big/mem", 10_000)
        for start in range(0, len(history), 50):
            await memory.save(history[start : start + 50])
        await SessionManager("big", store.storage).save_latest(
            Snapshot(SnapshotData(messages=history))
        )
    out: dict[str, list[float]] = {"thread": [], "memory": [], "session": []}
    for _ in range(loads):
        async with open_store(url, cipher=cipher) as store:
            await _timed(out["thread"], lambda: store.checkpointer.load("big"))
            await _timed(out["memory"], lambda: store.memory("big/mem", 10_000).load())
            manager = SessionManager("big", store.storage)
            await _timed(out["session"], manager.load_latest)
    return {name: min(samples) * 1000 for name, samples in out.items()}


async def _backend(url_of: Callable[[str], str], args: argparse.Namespace) -> dict[str, Any]:
    """Both stores, measured in turns (plain, cipher, plain, cipher): the best of each."""
    result: dict[str, Any] = {}
    for _round in range(2):
        for label, cipher in (("plain", None), ("cipher", CIPHER)):
            found: dict[str, dict[str, float]] = {}
            async with open_store(url_of(label), cipher=cipher) as store:
                for size in (10, 1_000):
                    found[f"{label} save L={size}"] = await _saves(store, size, args.saves)
            found[f"{label} load 10k"] = await _loads(url_of(label + "-load"), cipher, args.loads)
            for row, parts in found.items():
                best = result.setdefault(row, parts)
                for part, value in parts.items():
                    best[part] = min(best[part], value)
    return result


def _report(name: str, result: dict[str, Any]) -> list[str]:
    lines = [f"== {name}"]
    for row in ("save L=10", "save L=1000", "load 10k"):
        plain, sealed = result[f"plain {row}"], result[f"cipher {row}"]
        target = 1.5 if row.startswith("load") else 1.3
        for part in ("thread", "memory", "session"):
            ratio = sealed[part] / plain[part] if plain[part] else float("inf")
            mark = "ok" if ratio <= target else "OVER"
            lines.append(
                f"  {row:<12} {part:<8} plain {plain[part]:8.2f} ms  cipher "
                f"{sealed[part]:8.2f} ms  ratio {ratio:5.2f}x (target {target}x) {mark}"
            )
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--pg", default=None, help="a PostgreSQL URL (skipped without)")
    parser.add_argument("--only", default="directory,sqlite,postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    wanted = set(args.only.split(","))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "directory" in wanted:
            results["directory"] = await _backend(lambda x: str(root / uuid.uuid4().hex / x), args)
        if "sqlite" in wanted:
            results["sqlite"] = await _backend(
                lambda x: f"sqlite:///{root / uuid.uuid4().hex}-{x}.db", args
            )
    if "postgres" in wanted and args.pg:
        schemas: list[str] = []

        def pg_url(label: str) -> str:
            schemas.append(f"fa_bench_{uuid.uuid4().hex[:10]}")
            return f"{args.pg}?schema={schemas[-1]}"

        try:
            results["postgres"] = await _backend(pg_url, args)
        finally:
            import psycopg

            with psycopg.connect(args.pg, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, result in results.items():
        print("\n".join(_report(name, result)))


if __name__ == "__main__":
    asyncio.run(main())
