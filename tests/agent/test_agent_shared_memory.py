"""Agents sharing one memory object lose no turn, whatever the memory.

Each run starts from the stored history and commits its own; when another agent committed
meanwhile, the commit keeps that turn (after its own) instead of replacing it. The base of
that merge is the history the committing agent started from, so it holds also when both
agents use the very same memory object (two memory objects on one key are the stores'
conformance tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from framework_agents import FileMemory, InMemoryMemory
from framework_agents.memory import Memory
from framework_agents.stores import SqliteMemory
from framework_agents.testing.conformance import overlapping_agent_runs

MEMORIES: dict[str, Callable[[Path, int], Memory]] = {
    "in_memory": lambda d, n: InMemoryMemory(n),
    "file": lambda d, n: FileMemory(d / "memory", n),
    "sqlite": lambda d, n: SqliteMemory(d / "db.sqlite", "shared", n),
}


async def _overlapping_runs(memory: Memory, rounds: int) -> list[str]:
    await overlapping_agent_runs([memory, memory], rounds)  # one object, two agents
    return [m.text for m in await memory.load()]


@pytest.mark.parametrize("kind", list(MEMORIES))
def test_two_agents_on_one_memory_object_keep_every_turn(kind: str, tmp_path: Path) -> None:
    memory = MEMORIES[kind](tmp_path, 1000)
    texts = asyncio.run(_overlapping_runs(memory, 3))
    for i in range(3):
        for who in (0, 1):
            assert texts.count(f"{who} {i}") == 1, texts
            assert texts.count(f"answer to {who} {i}") == 1, texts
            prompt = texts.index(f"{who} {i}")
            assert texts[prompt + 1] == f"answer to {who} {i}"  # a turn is never split


@pytest.mark.parametrize("kind", list(MEMORIES))
def test_a_window_still_holds_when_turns_are_merged(kind: str, tmp_path: Path) -> None:
    # Merged turns are windowed like any other: the bound holds, nothing cut comes back.
    memory = MEMORIES[kind](tmp_path, 6)
    texts = asyncio.run(_overlapping_runs(memory, 4))
    assert len(texts) <= 6
    assert texts[-2:] in (["1 3", "answer to 1 3"], ["0 3", "answer to 0 3"])
    assert not any(t.endswith(" 0") or t.endswith(" 1") for t in texts), texts
