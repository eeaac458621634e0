"""Seeded single-bit flips of every file document and journal (layout v3).

Each store is saved into a state with a document and a journal of several records (the
last acknowledged state). Then, one flip at a time, a bit of one file is flipped and a
fresh instance loads: the outcome must be that last acknowledged state, or the store's
``*_CORRUPT`` code with every file byte-identical to what it was after the flip; never
an older (or altered) state without an error. ``make test`` flips :data:`QUICK` bits of
each file; ``make stress`` (mark ``slow``) flips :data:`FULL`.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    AgentError,
    FileCheckpointer,
    FileMemory,
    LocalFileStorage,
    Message,
    ToolCall,
)
from framework_agents.checkpoint import ThreadCheckpoint

QUICK = 100
FULL = 1500

_Load = Callable[[], Awaitable[Any]]


def _read(path: Path) -> bytes:
    """The bytes of a small file (blocking on purpose: the test's loop does nothing else)."""
    with open(path, "rb") as fh:
        return fh.read()


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def _bits(data: bytes, count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(len(data) * 8) for _ in range(count)]


async def _flip_each(
    target: Path, files: list[Path], load: _Load, expected: Any, code: str, count: int, seed: int
) -> dict[str, int]:
    """Flip ``count`` seeded bits of ``target`` one at a time; check each load (see above)."""
    original = _read(target)
    others = {p: _read(p) for p in files if p != target}
    outcomes = {"same": 0, "corrupt": 0}
    for bit in _bits(original, count, seed):
        flipped = bytearray(original)
        flipped[bit // 8] ^= 1 << (bit % 8)
        _write(target, bytes(flipped))
        try:
            got = await load()
        except AgentError as exc:
            assert exc.code == code, f"bit {bit}: {exc.code} ({exc})"
            assert _read(target) == flipped, f"bit {bit}: the damaged file was changed"
            assert {p: _read(p) for p in others} == others, f"bit {bit}: files changed"
            outcomes["corrupt"] += 1
        else:
            assert got == expected, f"bit {bit} of {target.name}: another state, no error"
            outcomes["same"] += 1
        finally:
            _write(target, original)
    assert sum(outcomes.values()) == count
    return outcomes


def _history(n: int, start: int = 0) -> list[Message]:
    out = []
    for i in range(start, start + n):
        out.append(Message("user", f"question {i} é😀", id=f"u{i}", metadata={"n": i}))
        calls = [ToolCall(f"c{i}", "look", {"q": i, "deep": [1.5, None]})] if i % 2 else []
        out.append(Message("assistant", f"answer {i}", tool_calls=calls, id=f"a{i}"))
        if calls:
            out.append(Message("tool", f"result {i}", tool_call_id=f"c{i}", id=f"t{i}"))
    return out


# -- FileMemory --------------------------------------------------------------------------


def _memory(directory: Path) -> tuple[list[Path], _Load, Any]:
    async def build() -> list[Message]:
        memory = FileMemory(directory, max_messages=200)
        await memory.save(_history(3))  # the first save publishes memory.json
        await memory.save(_history(2, 3))  # then each appends a journal record
        await memory.save(_history(2, 5))
        return await FileMemory(directory, max_messages=200).load()

    expected = arun(build())
    assert (directory / "memory.json.journal").exists()
    files = [directory / "memory.json", directory / "memory.json.journal"]
    return files, lambda: FileMemory(directory, max_messages=200).load(), expected


# -- FileCheckpointer --------------------------------------------------------------------


def _checkpointer(root: Path) -> tuple[list[Path], _Load, Any]:
    async def build() -> ThreadCheckpoint | None:
        cp = FileCheckpointer(root)
        history = _history(3)
        await cp.save(ThreadCheckpoint("t1", None, history, {"step": 1}))
        history = history + _history(2, 3)
        await cp.save(ThreadCheckpoint("t1", None, history, {"step": 2}))
        history = history + _history(2, 5)
        await cp.save(ThreadCheckpoint("t1", None, history, {"step": 3, "x": [1, 2]}))
        return await FileCheckpointer(root).load("t1")

    expected = arun(build())
    directory = root / "threads" / "t1"
    assert (directory / "checkpoint.journal").exists()
    files = [directory / "checkpoint.json", directory / "checkpoint.journal"]
    return files, lambda: FileCheckpointer(root).load("t1"), expected


# -- LocalFileStorage (a session's latest snapshot and its log) --------------------------

_KEY = "session/s1/scopes/agent/default/snapshots/snapshot_latest.json"


def _storage(root: Path) -> tuple[list[Path], _Load, Any]:
    async def build() -> tuple[bytes | None, list[bytes]]:
        storage = LocalFileStorage(root)
        await storage.put(_KEY, b'{"schema_version":2,"messages":[{"id":"m0"}],"state":{}}')
        tag = (await storage.read_logged(_KEY))[2]
        assert tag is not None
        for i in range(3):
            tag = await storage.append_logged(_KEY, b'{"append":[{"id":"m%d"}]}' % i, tag)
        value, records, _ = await LocalFileStorage(root).read_logged(_KEY)
        return value, records

    expected = arun(build())
    directory = root / _KEY.rsplit("/", 1)[0]
    files = [directory / "snapshot_latest.json", directory / ".snapshot_latest.json.log"]
    assert files[1].exists()

    async def load() -> tuple[bytes | None, list[bytes]]:
        value, records, _ = await LocalFileStorage(root).read_logged(_KEY)
        return value, records

    return files, load, expected


_STORES = {
    "memory": (_memory, "MEMORY_CORRUPT"),
    "checkpoint": (_checkpointer, "CHECKPOINT_CORRUPT"),
    "snapshot": (_storage, "SNAPSHOT_CORRUPT"),
}


def _run(tmp_path: Path, store: str, which: int, count: int) -> dict[str, int]:
    make, code = _STORES[store]
    files, load, expected = make(tmp_path / store)
    seed = 1000 * which + len(store)
    return arun(_flip_each(files[which], files, load, expected, code, count, seed))


@pytest.mark.parametrize("which", [0, 1], ids=["document", "journal"])
@pytest.mark.parametrize("store", sorted(_STORES))
def test_a_flipped_bit_is_the_last_acknowledged_state_or_corrupt(
    tmp_path: Path, store: str, which: int
) -> None:
    outcomes = _run(tmp_path, store, which, QUICK)
    # Every byte of a v3 document and journal is covered by a checksum.
    assert outcomes["corrupt"] == QUICK, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("which", [0, 1], ids=["document", "journal"])
@pytest.mark.parametrize("store", sorted(_STORES))
def test_1500_flipped_bits_are_each_the_last_acknowledged_state_or_corrupt(
    tmp_path: Path, store: str, which: int
) -> None:
    outcomes = _run(tmp_path, store, which, FULL)
    assert outcomes["corrupt"] == FULL, outcomes
