"""GraphMemory state carried in session snapshots' and thread checkpoints' app_data."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    FileCheckpointer,
    InMemoryMemory,
    LocalFileStorage,
    ScriptedModel,
    SessionManager,
    Snapshot,
    SnapshotData,
)
from framework_agents.errors import GraphStateError
from framework_agents.graph import (
    APP_DATA_KEY,
    GraphMemory,
    GraphStore,
    app_data_with_state,
    is_grounding,
    restore_state,
)

FACTS = [
    ("ex:Engineer", "rdfs:subClassOf", "ex:Person"),
    ("ex:alice", "rdf:type", "ex:Engineer"),
    ("ex:alice", "ex:worksFor", "ex:acme"),
]


async def _memory(**kwargs: Any) -> GraphMemory:
    memory = GraphMemory(GraphStore(), InMemoryMemory(), **kwargs)
    await memory.store.add_many(FACTS)
    return memory


def test_a_restored_session_keeps_its_long_term_memory(tmp_path: Path) -> None:
    """Saved with a file session in one 'process', restored into a fresh memory in another."""

    async def main() -> None:
        memory = await _memory()
        agent = Agent(ScriptedModel(["Noted."]), memory=memory, tools=memory.tools)
        await agent.run("Alice is an engineer at Acme.")
        manager = SessionManager("s1", LocalFileStorage(tmp_path / "sessions"))
        snapshot = agent.take_snapshot(app_data=app_data_with_state(memory, {"theme": "dark"}))
        await manager.save_latest(snapshot)

        fresh = GraphMemory(GraphStore(), InMemoryMemory())
        loaded = await SessionManager("s1", LocalFileStorage(tmp_path / "sessions")).load_latest()
        assert loaded is not None
        assert loaded.app_data["theme"] == "dark"  # the application's keys ride along
        assert await restore_state(fresh, loaded.app_data)
        model = ScriptedModel(["Alice is a person."])
        later = Agent(model, memory=fresh, tools=fresh.tools)
        await later.load_snapshot(loaded)
        await later.run("What do you know about Alice?")
        grounding = model.calls[0].messages[0]
        assert is_grounding(grounding)
        assert "ex:alice rdf:type ex:Person (inferred)" in grounding.text
        assert fresh.store.quads() == memory.store.quads()

    arun(main())


def test_the_state_is_json_and_the_application_data_is_not_changed() -> None:
    async def main() -> None:
        memory = await _memory()
        mine = {"theme": "dark", "nested": {"a": [1, 2]}}
        carried = app_data_with_state(memory, mine)
        assert mine == {"theme": "dark", "nested": {"a": [1, 2]}}  # copied, not changed
        assert carried[APP_DATA_KEY] == memory.export_state()
        assert json.loads(json.dumps(carried)) == carried
        assert app_data_with_state(memory, None) == {APP_DATA_KEY: memory.export_state()}
        snapshot = Snapshot(SnapshotData(messages=[]), app_data=carried)  # validated as JSON
        assert snapshot.app_data == carried

    arun(main())


def test_an_on_disk_store_is_not_carried_unless_asked(tmp_path: Path) -> None:
    async def main() -> None:
        on_disk = GraphMemory(GraphStore(tmp_path / "g"), InMemoryMemory())
        await on_disk.store.add_many(FACTS)
        assert not on_disk.carries_state
        assert app_data_with_state(on_disk, {"x": 1}) == {"x": 1}
        assert not await restore_state(on_disk, {APP_DATA_KEY: GraphStore().export_state()})
        assert on_disk.store.asserted_count == len(FACTS)  # an old copy never replaces it
        await on_disk.store.close()

        asked = GraphMemory(GraphStore(tmp_path / "h"), InMemoryMemory(), carry_state=True)
        assert asked.carries_state
        assert APP_DATA_KEY in app_data_with_state(asked, None)
        await asked.store.close()
        assert not (await _memory(carry_state=False)).carries_state

    arun(main())


def test_nothing_to_carry_or_restore_is_a_no_op(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        memory = await _memory()
        plain = InMemoryMemory()
        assert app_data_with_state(plain, {"x": 1}) == {"x": 1}
        assert not await restore_state(plain, {APP_DATA_KEY: memory.export_state()})
        assert not await restore_state(memory, None)
        assert not await restore_state(memory, {"theme": "dark"})
        assert memory.store.asserted_count == len(FACTS)
        with caplog.at_level(logging.WARNING):
            assert app_data_with_state(memory, ["not", "a", "dict"]) == ["not", "a", "dict"]
        assert "not carried" in caplog.text

    arun(main())


def test_a_malformed_carried_state_is_refused_and_changes_nothing() -> None:
    async def main() -> None:
        memory = await _memory()
        before = memory.export_state()
        bad = {**before, "quads": [["ex:a", "ex:p"]]}
        with pytest.raises(GraphStateError):
            await restore_state(memory, {APP_DATA_KEY: bad})
        assert memory.export_state() == before

    arun(main())


def test_bad_carry_state_is_invalid_argument() -> None:
    from framework_agents.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        GraphMemory(GraphStore(), InMemoryMemory(), carry_state="yes")  # type: ignore[arg-type]


def test_an_agent_with_a_session_carries_its_graph_without_help(tmp_path: Path) -> None:
    """The agent saves the graph with every session save and restores it on the first run."""

    async def main() -> None:
        memory = await _memory()
        storage = LocalFileStorage(tmp_path / "sessions")
        agent = Agent(
            ScriptedModel(["Noted."]),
            memory=memory,
            tools=memory.tools,
            session_manager=SessionManager("s1", storage),
        )
        await agent.run("Alice is an engineer at Acme.")

        fresh = GraphMemory(GraphStore(), InMemoryMemory())
        model = ScriptedModel(["Alice is a person."])
        later = Agent(
            model,
            memory=fresh,
            tools=fresh.tools,
            session_manager=SessionManager("s1", LocalFileStorage(tmp_path / "sessions")),
        )
        await later.run("What do you know about Alice?")
        assert fresh.store.quads() == memory.store.quads()
        grounding = model.calls[0].messages[0]
        assert is_grounding(grounding)
        assert "ex:alice rdf:type ex:Person (inferred)" in grounding.text

    arun(main())


@pytest.mark.parametrize("backend", ["file", "sqlite"])
def test_a_thread_checkpoint_carries_the_graph_to_another_process(
    tmp_path: Path, backend: str
) -> None:
    """A thread run on one agent, continued by a fresh agent and a fresh in-memory graph."""
    from framework_agents.stores import SqliteCheckpointer

    def checkpointer() -> Any:
        if backend == "file":
            return FileCheckpointer(tmp_path / "threads")
        return SqliteCheckpointer(tmp_path / "threads.db")

    async def main() -> None:
        memory = await _memory()
        first = checkpointer()
        agent = Agent(ScriptedModel(["Noted."]), memory=memory, tools=memory.tools)
        await agent.run("Alice is an engineer at Acme.", checkpointer=first, thread_id="t1")
        stored = await first.load("t1")
        assert stored is not None and stored.app_data is not None
        assert APP_DATA_KEY in stored.app_data

        fresh = GraphMemory(GraphStore(), InMemoryMemory())
        model = ScriptedModel(["Alice is a person."])
        later = Agent(model, memory=fresh, tools=fresh.tools)
        second = checkpointer()
        await later.run("What do you know about Alice?", checkpointer=second, thread_id="t1")
        assert fresh.store.quads() == memory.store.quads()
        grounding = model.calls[0].messages[0]
        assert is_grounding(grounding)
        assert "ex:alice rdf:type ex:Person (inferred)" in grounding.text
        for cp in (first, second):
            close = getattr(cp, "close", None)
            if close is not None:
                await close()

    arun(main())
