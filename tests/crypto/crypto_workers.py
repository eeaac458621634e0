"""Processes of the rotation-under-load test: writers, and a rotator that stops half-way.

``writer <url> <name> <count>``: ``count`` saves of thread ``<name>`` (one more turn
each), of memory ``mem/<name>`` and of session ``<name>``, under the new key; prints
``step <i>`` after each and reads a line from stdin before each of the second half (the
test makes it write while the rotation is under way).

``rotator <url> <stop_after>``: ``store.rotate()`` that, after ``stop_after`` threads,
prints ``mid`` and waits forever: between two transactions (SQL), or holding the next
thread's write lock (directory). The test SIGKILLs it there.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from framework_agents import (
    Cipher,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
    ThreadCheckpoint,
    open_store,
)
from framework_agents.checkpoint import FileCheckpointer
from framework_agents.checkpoint._file_writer import FileWriter
from framework_agents.stores._sql import SqlCheckpointer

OLD = bytes(range(32))
NEW = bytes(range(100, 132))


def cipher(current: str) -> Cipher:
    return Cipher(keys={"old": OLD, "new": NEW}, current=current)


def turns(name: str, n: int) -> list[Message]:
    out = []
    for i in range(n):
        out.append(Message(role="user", content=f"{name} asks {i}", id=f"{name}-u{i}"))
        out.append(Message(role="assistant", content=f"{name} answers {i}", id=f"{name}-a{i}"))
    return out


async def seed(url: str, name: str, n: int, current: str) -> None:
    """Thread, memory and session ``name`` with ``n`` turns, sealed under ``current``."""
    async with open_store(url, cipher=cipher(current)) as store:
        await save(store, name, n)


async def save(store: Any, name: str, n: int) -> None:
    messages = turns(name, n)
    state = {"turns": n}
    await store.checkpointer.save(ThreadCheckpoint(thread_id=name, messages=messages, state=state))
    memory = store.memory(f"mem/{name}", 10_000)
    await memory.save(messages[-2:])
    manager = SessionManager(name, store.storage)
    await manager.load_latest()
    await manager.save_latest(Snapshot(SnapshotData(messages=messages, state={"turns": n})))


async def writer(url: str, name: str, count: int) -> None:
    async with open_store(url, cipher=cipher("new")) as store:
        for i in range(count):
            if i >= count // 2:
                sys.stdin.readline()
            await save(store, name, i + 1)
            print(f"step {i}", flush=True)


async def rotator(url: str, stop_after: int) -> None:
    done = 0
    original = SqlCheckpointer._rotate_one

    async def rotate_one(self: SqlCheckpointer, thread_id: str, migrate: bool) -> int:
        nonlocal done
        if done == stop_after:
            print("mid", flush=True)
            await asyncio.Event().wait()  # killed here, between two transactions
        done += 1
        return await original(self, thread_id, migrate)

    SqlCheckpointer._rotate_one = rotate_one  # type: ignore[method-assign]
    original_file = FileCheckpointer._rotate_sync

    def rotate_sync(self: FileWriter, thread_id: str, migrate: bool) -> int:
        nonlocal done
        if done == stop_after:
            print("mid", flush=True)
            threading.Event().wait()  # killed here, holding the thread's write lock
        done += 1
        return original_file(self, thread_id, migrate)

    FileCheckpointer._rotate_sync = rotate_sync  # type: ignore[method-assign]
    async with open_store(url, cipher=cipher("new")) as store:
        await store.rotate()
    print("finished", flush=True)


if __name__ == "__main__":
    mode, url, *rest = sys.argv[1:]
    if mode == "writer":
        asyncio.run(writer(url, rest[0], int(rest[1])))
    else:
        asyncio.run(rotator(url, int(rest[0])))
