"""Properties of every memory: random histories saved in random chunks load well formed,
within the bound, in order, with the newest message kept; file and in-memory agree."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import (
    CompactedMemory,
    FileMemory,
    InMemoryMemory,
    Memory,
    Message,
    is_well_formed,
)

HistoryStrategy = Callable[..., st.SearchStrategy[list[Message]]]


@st.composite
def _chunks(draw: st.DrawFn, history: list[Message]) -> list[list[Message]]:
    cuts = sorted(draw(st.lists(st.integers(0, len(history)), max_size=5)))
    bounds = [0, *cuts, len(history)]
    return [history[a:b] for a, b in itertools.pairwise(bounds)]


def _synthesised(msg: Message) -> bool:
    return msg.kind in ("interrupted", "compaction")


def _check(loaded: Sequence[Message], saved: Sequence[Message], bound: int) -> None:
    assert is_well_formed(loaded)
    assert len(loaded) <= bound
    position = {m.id: i for i, m in enumerate(saved)}
    kept = [position[m.id] for m in loaded if not _synthesised(m)]
    assert kept == sorted(set(kept)), "order changed or a message was duplicated"
    last = saved[-1] if saved else None
    if last is not None and last.role != "tool" and not last.tool_calls:
        assert loaded[-1].id == last.id, "the newest message was lost"


async def _save_all(memory: Memory, chunks: list[list[Message]]) -> list[Message]:
    for chunk in chunks:
        await memory.save(chunk)
    return await memory.load()


@settings(max_examples=120, deadline=None)
@given(data=st.data(), bound=st.integers(1, 12))
def test_windowed_memories(
    history_strategy: HistoryStrategy, data: st.DataObject, bound: int
) -> None:
    history = data.draw(history_strategy(well_formed=False))
    chunks = data.draw(_chunks(history))
    with tempfile.TemporaryDirectory() as directory:
        in_memory = asyncio.run(_save_all(InMemoryMemory(bound), chunks))
        on_disk = asyncio.run(_save_all(FileMemory(directory, bound), chunks))
        reopened = asyncio.run(FileMemory(directory, bound).load())
    for loaded in (in_memory, on_disk):
        _check(loaded, history, bound)
    assert on_disk == in_memory  # the file's fragment cache windows exactly like the list
    assert reopened == on_disk


@settings(max_examples=120, deadline=None)
@given(data=st.data(), bound=st.integers(2, 12))
def test_compacted_memories(
    history_strategy: HistoryStrategy, data: st.DataObject, bound: int
) -> None:
    history = data.draw(history_strategy(well_formed=False))
    chunks = data.draw(_chunks(history))
    with tempfile.TemporaryDirectory() as directory:
        in_memory = asyncio.run(
            _save_all(CompactedMemory(InMemoryMemory(1000), max_messages=bound), chunks)
        )
        on_disk = asyncio.run(
            _save_all(CompactedMemory(FileMemory(directory, 1000), max_messages=bound), chunks)
        )
    for loaded in (in_memory, on_disk):
        _check(loaded, history, bound)
        kinds = [m.kind for m in loaded]
        assert "compaction" not in kinds[1:], "at most one boundary, and only at the start"
    assert on_disk == in_memory  # boundaries included: their ids derive from what they cover
