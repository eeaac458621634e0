"""``replace_history``: the agent's clear-then-save, atomic where the memory can do it."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

from framework_agents import Agent, FunctionModel, InMemoryMemory, Message, ScriptedModel, ToolSpec
from framework_agents.memory import Appended, ReplaceableMemory, replace_history


class AppendOnly:
    """A memory without ``replace()``: the fallback must clear, then save."""

    def __init__(self) -> None:
        self.stored: list[Message] = []
        self.calls: list[str] = []

    async def load(self) -> list[Message]:
        return list(self.stored)

    async def save(self, messages: Sequence[Message]) -> None:
        self.calls.append("save")
        self.stored.extend(messages)

    async def clear(self) -> None:
        self.calls.append("clear")
        self.stored = []


class Recording(InMemoryMemory):
    """An InMemoryMemory that records which write methods the agent used."""

    def __init__(self) -> None:
        super().__init__(max_messages=100)
        self.calls: list[str] = []

    async def save(self, messages: Sequence[Message]) -> None:
        self.calls.append("save")
        await super().save(messages)

    async def clear(self) -> None:
        self.calls.append("clear")
        await super().clear()

    async def replace(self, messages: Sequence[Message]) -> None:
        self.calls.append("replace")
        await super().replace(messages)

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        self.calls.append("commit")
        await super().commit(messages, base=base)

    async def save_if(self, messages: Sequence[Message], *, revision: int) -> Appended | None:
        self.calls.append("save_if")
        return await super().save_if(messages, revision=revision)


def test_fallback_clears_then_saves() -> None:
    memory = AppendOnly()
    memory.stored = [Message("user", "old")]
    asyncio.run(replace_history(memory, [Message("user", "new")]))
    assert memory.calls == ["clear", "save"]
    assert [m.text for m in memory.stored] == ["new"]
    assert not isinstance(memory, ReplaceableMemory)


def test_shipped_memories_replace_atomically() -> None:
    assert isinstance(InMemoryMemory(), ReplaceableMemory)


def test_agent_commits_with_one_atomic_write() -> None:
    # Each commit is one atomic call: an append of the run's messages while the memory
    # still holds what the agent read (never a clear followed by a save).
    memory = Recording()
    agent = Agent(ScriptedModel(["one", "two"]), memory=memory)
    asyncio.run(agent.run("first"))
    asyncio.run(agent.run("second"))
    assert memory.calls == ["save_if", "save_if"]
    assert [m.text for m in asyncio.run(memory.load())] == ["first", "one", "second", "two"]


def test_agent_merges_when_the_memory_changed_during_the_run() -> None:
    memory = Recording()

    async def answer(messages: list[Message], tools: list[ToolSpec]) -> Message:
        await memory.save([Message("user", "written meanwhile")])  # another writer
        return Message("assistant", "one")

    agent = Agent(FunctionModel(answer), memory=memory)
    asyncio.run(agent.run("first"))
    # The append is refused (the revision moved), so the run commits its history in one
    # atomic write that keeps what the other writer stored meanwhile, after it.
    assert memory.calls == ["save", "save_if", "commit"]
    assert [m.text for m in asyncio.run(memory.load())] == ["first", "one", "written meanwhile"]
