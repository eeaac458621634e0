"""InMemoryMemory: appends, windows between groups, repairs on load, hands out copies."""

from __future__ import annotations

import asyncio

import pytest

from framework_agents import (
    InMemoryMemory,
    InvalidArgumentError,
    Memory,
    Message,
    ToolCall,
    is_well_formed,
)


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def test_is_a_memory_with_default_window() -> None:
    memory = InMemoryMemory()
    assert isinstance(memory, Memory)
    assert memory.max_messages == 50


def test_save_appends_and_keeps_the_newest() -> None:
    async def main() -> None:
        memory = InMemoryMemory(max_messages=3)
        assert await memory.load() == []
        await memory.save([Message("user", "1"), Message("assistant", "2")])
        await memory.save([Message("user", "3")])
        assert _texts(await memory.load()) == ["1", "2", "3"]
        await memory.save([Message("assistant", "4"), Message("user", "5")])
        assert _texts(await memory.load()) == ["3", "4", "5"]

    asyncio.run(main())


def test_window_cuts_only_between_groups() -> None:
    async def main() -> None:
        memory = InMemoryMemory(max_messages=3)
        calls = [ToolCall("c1", "f", {}), ToolCall("c2", "f", {})]
        await memory.save(
            [
                Message("user", "q"),
                Message("assistant", "", tool_calls=calls),
                Message("tool", "r1", tool_call_id="c1", name="f"),
                Message("tool", "r2", tool_call_id="c2", name="f"),
                Message("assistant", "done"),
            ]
        )
        loaded = await memory.load()
        assert _texts(loaded) == ["done"]
        assert loaded[0].role == "assistant"

    asyncio.run(main())


def test_malformed_saves_are_stored_and_loaded_repaired() -> None:
    async def main() -> None:
        memory = InMemoryMemory()
        await memory.save(
            [
                Message("tool", "orphan", tool_call_id="ghost", name="f"),
                Message("user", "q"),
                Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})]),
            ]
        )
        loaded = await memory.load()
        assert is_well_formed(loaded)
        assert [m.role for m in loaded] == ["user", "assistant", "tool"]
        assert loaded[-1].kind == "interrupted"
        # The real result arriving in a later save answers the call (nothing was dropped).
        await memory.save([Message("tool", "r1", tool_call_id="c1", name="f")])
        loaded = await memory.load()
        assert _texts(loaded) == ["q", "", "r1"]
        assert is_well_formed(loaded)

    asyncio.run(main())


def test_load_stays_within_the_bound_after_repair() -> None:
    async def main() -> None:
        memory = InMemoryMemory(max_messages=3)
        calls = [ToolCall("c1", "f", {}), ToolCall("c2", "f", {})]
        await memory.save(
            [
                Message("user", "a"),
                Message("user", "b"),
                Message("assistant", "x", tool_calls=calls),
            ]
        )
        loaded = await memory.load()  # repair adds two results: 5 > 3, so it windows again
        assert len(loaded) <= 3
        assert is_well_formed(loaded)

    asyncio.run(main())


def test_copies_in_and_out() -> None:
    async def main() -> None:
        memory = InMemoryMemory()
        original = Message("user", "hello", metadata={"tags": ["a"]})
        await memory.save([original])
        original.metadata["tags"].append("changed-after-save")
        loaded = await memory.load()
        loaded[0].metadata["tags"].append("changed-after-load")
        loaded.append(Message("user", "extra"))
        again = await memory.load()
        assert len(again) == 1
        assert again[0].metadata == {"tags": ["a"]}
        assert again[0].id == original.id

    asyncio.run(main())


def test_replace_and_clear() -> None:
    async def main() -> None:
        memory = InMemoryMemory(max_messages=2)
        await memory.save([Message("user", "old")])
        await memory.replace(
            [Message("user", "1"), Message("assistant", "2"), Message("user", "3")]
        )
        assert _texts(await memory.load()) == ["2", "3"]
        await memory.clear()
        assert await memory.load() == []

    asyncio.run(main())


def test_bad_input_is_refused_and_changes_nothing() -> None:
    async def main() -> None:
        memory = InMemoryMemory()
        await memory.save([Message("user", "kept")])
        with pytest.raises(InvalidArgumentError):
            await memory.save([Message("user", "x"), "not a message"])  # type: ignore[list-item]
        assert _texts(await memory.load()) == ["kept"]

    asyncio.run(main())
    with pytest.raises(InvalidArgumentError):
        InMemoryMemory(max_messages=0)


def test_saves_are_idempotent_by_message_id() -> None:
    memory = InMemoryMemory(max_messages=4)
    a, b, c, d, e = (Message("user", f"m{i}", id=f"m{i}") for i in range(5))

    async def main() -> None:
        await memory.save([a, b])
        await memory.save([b, c, c])  # a retry of b, and c twice
        assert [m.id for m in await memory.load()] == ["m0", "m1", "m2"]
        revision = memory.revision
        assert await memory.save_if([c, d], revision=revision) is None  # c is stored
        assert await memory.save_if([d, d], revision=revision) is None
        assert memory.revision == revision  # nothing was written
        done = await memory.save_if([d, e], revision=revision)
        assert done is not None and done.dropped == 1
        assert [m.id for m in await memory.load()] == ["m1", "m2", "m3", "m4"]
        await memory.save([a])  # cut by the window: stored again, as any new message
        assert [m.id for m in await memory.load()] == ["m2", "m3", "m4", "m0"]

    asyncio.run(main())
