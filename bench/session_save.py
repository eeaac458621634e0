"""Benchmark: ``save_latest`` after every run of a 1000-run conversation.

Runs an ``Agent`` with a ``SessionManager`` for ``--runs`` runs (default 1000) under two
conversation managers: ``SlidingWindowConversationManager(window_size=40)`` and
``NullConversationManager()`` (the history grows without bound). Memory is an
``InMemoryMemory`` with a window larger than the conversation, so the manager alone
bounds what is saved. Each ``save_latest`` (an appended record of what the run added, or,
when the log has outgrown half the snapshot, the whole snapshot published again) is timed
and the bytes it hands the storage are counted; we print p50/p95/max per save, total bytes and the
final history length, for ``LocalFileStorage`` (in ``--dir``, default a temp directory;
its file system matters: fsync on tmpfs is free) and ``InMemoryStorage`` (serialisation
cost only). The session also carries the agent's timeline, one entry per run: the p50 and
the mean bytes of the first and of the last tenth of the saves (``early_*``, ``late_*``)
show whether a save grows with it.

Usage: ``.venv/bin/python bench/session_save.py [--runs 1000] [--dir PATH] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    InMemoryMemory,
    InMemoryStorage,
    LocalFileStorage,
    Message,
    NullConversationManager,
    SessionManager,
    SlidingWindowConversationManager,
    Snapshot,
)
from framework_agents.models._base import ToolSpec
from framework_agents.sessions import Storage


class CountingStorage:
    """Passes every call to ``inner`` (a logging storage) and counts the bytes written."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bytes_written = 0

    async def put(self, key: str, data: bytes) -> None:
        self.bytes_written += len(data)
        await self.inner.put(key, data)

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        self.bytes_written += len(data)
        await self.inner.swap(key, data, expected)

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        self.bytes_written += len(record)
        tag: str = await self.inner.append_logged(key, record, expected)
        return tag

    async def read_logged(self, key: str) -> Any:
        return await self.inner.read_logged(key)

    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self.inner.get(key)
        return value

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def list(self, prefix: str = "") -> list[str]:
        keys: list[str] = await self.inner.list(prefix)
        return keys


class MeasuredSessionManager(SessionManager):
    """A SessionManager that times every ``save_latest``; its storage counts the bytes."""

    def __init__(self, session_id: str, storage: CountingStorage) -> None:
        super().__init__(session_id, storage)
        self.counted = storage
        self.seconds: list[float] = []
        self.bytes: list[int] = []

    async def save_latest(self, snapshot: Snapshot) -> None:
        written = self.counted.bytes_written
        start = time.perf_counter()
        await super().save_latest(snapshot)
        self.seconds.append(time.perf_counter() - start)
        self.bytes.append(self.counted.bytes_written - written)


class ReplyModel:
    """A deterministic model that keeps no record of its calls.

    (``FunctionModel`` records every call's history; over 1000 runs of a growing
    conversation that retains ~10^6 messages and the garbage collector's pauses would
    dominate the figures.)
    """

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> Message:
        last = messages[-1].text if messages else ""
        return Message(
            "assistant", f"Noted: {last[:60]}. Here is a reply of ordinary length for a chat."
        )


async def _one(manager_name: str, storage: Storage, runs: int) -> dict[str, Any]:
    manager = (
        SlidingWindowConversationManager(window_size=40)
        if manager_name == "window40"
        else NullConversationManager()
    )
    sm = MeasuredSessionManager("bench", CountingStorage(storage))
    agent = Agent(
        ReplyModel(),
        memory=InMemoryMemory(max_messages=4 * runs + 10),
        conversation_manager=manager,
        session_manager=sm,
    )
    start = time.perf_counter()
    for i in range(runs):
        await agent.run(f"User message number {i}: please remember that item {i} is blue.")
    wall = time.perf_counter() - start
    ms = sorted(s * 1000 for s in sm.seconds)
    tenth = max(1, len(sm.seconds) // 10)
    early, late = slice(0, tenth), slice(len(sm.seconds) - tenth, None)
    return {
        "manager": manager_name,
        "saves": len(ms),
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
        "max_ms": round(ms[-1], 3),
        "early_p50_ms": round(statistics.median(sm.seconds[early]) * 1000, 3),
        "late_p50_ms": round(statistics.median(sm.seconds[late]) * 1000, 3),
        "early_bytes": round(statistics.mean(sm.bytes[early])),
        "late_bytes": round(statistics.mean(sm.bytes[late])),
        "total_bytes": sm.counted.bytes_written,
        "last_snapshot_bytes": len((await storage.get(sm.latest_key)) or b""),
        "final_messages": len(agent.messages),
        "wall_s": round(wall, 2),
    }


def _fs_type(path: Path) -> str:
    try:
        out = subprocess.run(
            ["df", "--output=fstype", str(path)], capture_output=True, text=True, check=True
        )
        return out.stdout.split()[-1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


async def main(runs: int, directory: Path | None) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        fs = _fs_type(Path(tmp))
        for manager_name in ("window40", "null"):
            for backend in ("local", "memory"):
                storage: Storage = (
                    LocalFileStorage(Path(tmp) / manager_name)
                    if backend == "local"
                    else InMemoryStorage()
                )
                row = await _one(manager_name, storage, runs)
                row["storage"] = f"LocalFileStorage ({fs})" if backend == "local" else "InMemory"
                results.append(row)
    return results


def _print(results: list[dict[str, Any]]) -> None:
    cols = ["manager", "storage", "saves", "p50_ms", "p95_ms", "max_ms", "early_p50_ms",
            "late_p50_ms", "early_bytes", "late_bytes", "total_bytes", "last_snapshot_bytes",
            "final_messages", "wall_s"]  # fmt: skip
    widths = [max(len(c), *(len(str(r[c])) for r in results)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in results:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="where LocalFileStorage writes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    rows = asyncio.run(main(args.runs, args.dir))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"python {'.'.join(map(str, sys.version_info[:3]))}, {args.runs} runs")
        _print(rows)
