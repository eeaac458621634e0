"""Properties of every memory: random histories saved in random chunks load well formed,
within the bound, in order, with the newest message kept; file and in-memory agree."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Sequence

from hypothesis import example, given, settings
from hypothesis import strategies as st

from framework_agents import (
    CompactedMemory,
    FileMemory,
    InMemoryMemory,
    Memory,
    Message,
    ToolCall,
    is_well_formed,
)
from history_strategies import HistoryStrategy, histories
from property_budget import examples


@st.composite
def _chunks(draw: st.DrawFn, history: list[Message]) -> list[list[Message]]:
    cuts = sorted(draw(st.lists(st.integers(0, len(history)), max_size=5)))
    bounds = [0, *cuts, len(history)]
    return [history[a:b] for a, b in itertools.pairwise(bounds)]


#: A history saved in chunks (each chunk one save).
_saves = histories(well_formed=False).flatmap(_chunks)


def _calls(index: int, call_id: str) -> Message:
    return Message("assistant", tool_calls=[ToolCall(call_id, "lookup", {"n": 0})], id=f"m{index}")


#: The window of 2 cuts everything at the second save (two call-only turns); the third
#: save's call-only turn is then all the memory holds (FileMemory kept nothing, as if the
#: cut went on into later saves, until every memory windowed after each save).
_CUT_TO_NOTHING = [
    [Message("user", id="m0")],
    [_calls(1, "c0"), _calls(2, "c0")],
    [_calls(3, "c3")],
]


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


@settings(max_examples=examples(120), deadline=None)
@given(chunks=_saves, bound=st.integers(1, 12))
@example(chunks=_CUT_TO_NOTHING, bound=2)
def test_windowed_memories(chunks: list[list[Message]], bound: int) -> None:
    history = [m for chunk in chunks for m in chunk]
    with tempfile.TemporaryDirectory() as directory:
        in_memory = asyncio.run(_save_all(InMemoryMemory(bound), chunks))
        on_disk = asyncio.run(_save_all(FileMemory(directory, bound), chunks))
        reopened = asyncio.run(FileMemory(directory, bound).load())
    for loaded in (in_memory, on_disk):
        _check(loaded, history, bound)
    assert on_disk == in_memory  # the file's fragment cache windows exactly like the list
    assert reopened == on_disk


@settings(max_examples=examples(120), deadline=None)
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


def _user(i: int) -> Message:
    return Message("user" if i % 2 == 0 else "assistant", f"t{i}", id=f"m{i}")


def test_a_message_the_window_cut_is_stored_again_by_every_memory() -> None:
    # Saves are idempotent by id among what the memory holds: once the window cut a
    # message, saving it again appends it (the file's journal still holds the cut one).
    chunks = [[_user(0)], [_user(1), _user(2), _user(3)], [_user(0)]]
    with tempfile.TemporaryDirectory() as directory:
        in_memory = asyncio.run(_save_all(InMemoryMemory(2), chunks))
        on_disk = asyncio.run(_save_all(FileMemory(directory, 2), chunks))
        reopened = asyncio.run(FileMemory(directory, 2).load())
    assert [m.id for m in in_memory] == ["m3", "m0"]
    assert on_disk == reopened == in_memory


def test_what_a_file_memory_holds_does_not_depend_on_when_it_folds() -> None:
    # A first save publishes a document (a fold), later ones append to the journal: the
    # same history gives the same memory whichever saves folded.
    cut, last = _CUT_TO_NOTHING[0] + _CUT_TO_NOTHING[1], _CUT_TO_NOTHING[2]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        folded = asyncio.run(_save_all(FileMemory(a, 2), [cut, last]))
        journaled = asyncio.run(_save_all(FileMemory(b, 2), _CUT_TO_NOTHING))
    expected = asyncio.run(_save_all(InMemoryMemory(2), _CUT_TO_NOTHING))
    assert [m.id for m in expected] == ["m3", "interrupted-m3-c3"]
    assert folded == journaled == expected
