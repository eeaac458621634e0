"""The agent's session side: no lost history before the first run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    FileMemory,
    FunctionModel,
    InMemoryMemory,
    InMemoryStorage,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
)
from framework_agents.errors import InvalidArgumentError


def echo_model() -> FunctionModel:
    return FunctionModel(lambda messages, tools: f"re: {messages[-1].text}")


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def _persisted(tmp_path: Path) -> list[str]:
    """A FileMemory left by an earlier process: two runs' worth of history."""
    earlier = Agent(echo_model(), memory=FileMemory(tmp_path))
    arun(earlier.run("one"))
    arun(earlier.run("two"))
    return texts(arun(FileMemory(tmp_path).load()))


def test_edit_before_the_first_run_edits_the_stored_memory_not_the_seed(
    tmp_path: Path,
) -> None:
    stored = _persisted(tmp_path)
    assert stored == ["one", "re: one", "two", "re: two"]
    model = echo_model()
    seed = [Message("user", "seed"), Message("assistant", "seed answer")]
    agent = Agent(model, memory=FileMemory(tmp_path), initial_messages=seed)
    # The first run would start from the stored memory (the seed only fills an empty
    # one), so an edit before it must edit that history and never overwrite it.
    arun(agent.edit_message(0, "ONE"))
    assert texts(arun(FileMemory(tmp_path).load())) == ["ONE", "re: one", "two", "re: two"]
    arun(agent.run("three"))
    assert texts(model.calls[0].messages) == ["ONE", "re: one", "two", "re: two", "three"]


def test_edit_by_id_before_the_first_run_finds_a_stored_message(tmp_path: Path) -> None:
    _persisted(tmp_path)
    target = arun(FileMemory(tmp_path).load())[2]
    agent = Agent(echo_model(), memory=FileMemory(tmp_path))
    edited = arun(agent.edit_message(target.id, "TWO"))
    assert edited.id == target.id
    assert texts(agent.messages) == ["one", "re: one", "TWO", "re: two"]


def test_load_snapshot_without_messages_before_the_first_run_saves_the_stored_history(
    tmp_path: Path,
) -> None:
    stored = _persisted(tmp_path)
    sm = SessionManager("s", InMemoryStorage())
    agent = Agent(
        echo_model(),
        memory=FileMemory(tmp_path),
        session_manager=sm,
        initial_messages=[Message("user", "seed")],
    )
    arun(agent.load_snapshot(Snapshot(SnapshotData(state={"k": 1}))))
    latest = arun(sm.load_latest())
    assert latest is not None
    assert texts(latest.data.messages or []) == stored
    assert texts(arun(FileMemory(tmp_path).load())) == stored


def test_repeated_edits_before_the_first_run_keep_the_whole_seed() -> None:
    # The memory window (2) is smaller than the seed (4): the second edit must still see
    # the seed, not the memory's window of it.
    seed = [Message("user", f"s{i}") for i in range(4)]
    model = echo_model()
    agent = Agent(model, memory=InMemoryMemory(max_messages=2), initial_messages=seed)
    arun(agent.edit_message(0, "S0"))
    arun(agent.edit_message(1, "S1"))
    assert texts(agent.messages) == ["S0", "S1", "s2", "s3"]


def test_a_loaded_empty_history_is_not_reseeded_by_the_first_run() -> None:
    model = echo_model()
    agent = Agent(model, initial_messages=[Message("user", "seed")])
    arun(agent.load_snapshot(Snapshot(SnapshotData(messages=[]))))
    assert agent.messages == []
    arun(agent.run("new"))
    # Like a session snapshot with an empty history, a loaded one wins over the seed.
    assert texts(model.calls[0].messages) == ["new"]


@pytest.mark.parametrize(
    "bad", ["user-42", object(), InMemoryStorage()], ids=["str", "obj", "storage"]
)
def test_a_session_manager_that_is_not_one_is_a_clear_error(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="session_manager"):
        Agent(echo_model(), session_manager=bad)  # type: ignore[arg-type]
    model = echo_model()
    agent = Agent(model)
    with pytest.raises(InvalidArgumentError, match="session_manager"):
        agent.session_manager = bad  # type: ignore[assignment]  # checked where it is set
    assert agent.session_manager is None
    arun(agent.run("hi"))
    assert len(model.calls) == 1
    arun(agent.load_snapshot(Snapshot(SnapshotData(state={}))))


def test_a_load_snapshot_whose_history_cannot_be_stored_changes_nothing(tmp_path: Path) -> None:
    sm = SessionManager("s", InMemoryStorage())
    agent = Agent(echo_model(), memory=FileMemory(tmp_path), session_manager=sm)
    agent.state["k"] = "before"
    arun(agent.run("hi"))
    before = (agent.messages, dict(agent.state), agent.system_prompt)
    # A lone surrogate: FileMemory refuses to store it (it would not read back).
    bad = Snapshot(SnapshotData([Message("user", "a\ud800")], {"k": "after"}, "new prompt"))
    with pytest.raises(InvalidArgumentError):
        arun(agent.load_snapshot(bad))
    assert (agent.messages, dict(agent.state), agent.system_prompt) == before
    latest = arun(sm.load_latest())
    assert latest is not None and latest.data.state == {"k": "before"}


class _GatedMemory(InMemoryMemory):
    """An InMemoryMemory whose load(), replace() and commit() wait for a gate (a slow disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.gated = True

    async def _pass(self) -> None:
        if self.gated:
            self.entered.set()
            await asyncio.wait_for(self.gate.wait(), timeout=10)

    async def load(self) -> list[Message]:
        await self._pass()
        return await super().load()

    async def replace(self, messages: Any) -> None:
        await self._pass()
        await super().replace(messages)

    async def commit(self, messages: Any, *, base: Any = None) -> None:
        await self._pass()
        await super().commit(messages, base=base)


def test_a_run_cannot_start_while_an_edit_is_in_flight() -> None:
    from framework_agents import AgentBusyError

    async def body() -> None:
        memory = _GatedMemory()
        memory.gated = False
        agent = Agent(echo_model(), memory=memory)
        await agent.run("one")
        memory.gated = True
        edit = asyncio.create_task(agent.edit_message(0, "ONE"))
        await asyncio.wait_for(memory.entered.wait(), timeout=10)
        # The edit holds the agent: a run now would commit a history without the edit
        # (or the edit would overwrite the run's turn), so it is refused.
        assert agent.running
        with pytest.raises(AgentBusyError):
            await asyncio.wait_for(agent.run("two"), timeout=10)
        memory.gate.set()
        await edit
        assert not agent.running
        memory.gated = False
        await agent.run("two")
        assert texts(agent.messages) == ["ONE", "re: one", "two", "re: two"]

    arun(body())


def test_load_snapshot_holds_the_agent_too() -> None:
    from framework_agents import AgentBusyError

    async def body() -> None:
        memory = _GatedMemory()
        agent = Agent(echo_model(), memory=memory)
        task = asyncio.create_task(agent.load_snapshot(Snapshot(SnapshotData(state={"k": 1}))))
        await asyncio.wait_for(memory.entered.wait(), timeout=10)
        with pytest.raises(AgentBusyError):
            await asyncio.wait_for(agent.edit_message(0, "x"), timeout=10)
        memory.gate.set()
        await task
        assert dict(agent.state) == {"k": 1}

    arun(body())
