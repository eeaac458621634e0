"""Async paths never block the event loop: no SQLite I/O and no lock waits on the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from framework_agents import InMemoryMemory, Message
from framework_agents.graph import GraphMemory, GraphStore, _disk


@pytest.fixture
def io_threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every Disk method call, with the thread it ran on."""
    calls: list[tuple[str, int]] = []
    for name in ("open", "insert", "delete", "replace", "close"):
        original = getattr(_disk.Disk, name)

        def spy(self: Any, *args: Any, _name: str = name, _orig: Any = original) -> Any:
            calls.append((_name, threading.get_ident()))
            return _orig(self, *args)

        monkeypatch.setattr(_disk.Disk, name, spy)
    return calls


async def _seed(path: Path) -> None:
    store = GraphStore(path)
    await store.add_many(
        [("ex:Engineer", "rdfs:subClassOf", "ex:Person"), ("ex:alice", "rdf:type", "ex:Engineer")]
    )
    await store.close()


def _memory(path: Path) -> GraphMemory:
    return GraphMemory(GraphStore(path), InMemoryMemory())


Action = Callable[[GraphMemory], Awaitable[Any]]
ACTIONS: dict[str, Action] = {
    "load": lambda m: m.load(),
    "ground": lambda m: m.ground([Message("user", "alice?")], "who is alice"),
    "graph_query-text": lambda m: m.tools[1].invoke({"text": "alice"}),
    "graph_query-pattern": lambda m: m.tools[1].invoke({"subject": "ex:alice"}),
    "graph_add": lambda m: m.tools[0].invoke(
        {"subject": "ex:bob", "predicate": "rdf:type", "object": "ex:Engineer"}
    ),
    "import_state": lambda m: m.import_state(GraphStore().export_state()),
    "store.add": lambda m: m.store.add("ex:bob", "ex:p", "ex:c"),
    "store.clear": lambda m: m.store.clear(),
}


@pytest.mark.parametrize("name", sorted(ACTIONS), ids=sorted(ACTIONS))
def test_async_paths_do_their_sqlite_io_off_the_loop(
    tmp_path: Path, io_threads: list[tuple[str, int]], name: str
) -> None:
    asyncio.run(_seed(tmp_path / "g"))
    io_threads.clear()

    async def main() -> int:
        memory = _memory(tmp_path / "g")
        await memory.inner.save([Message("user", "Tell me about Alice")])
        await ACTIONS[name](memory)
        await memory.store.close()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert io_threads and io_threads[0][0] == "open"  # the store opened inside the action
    assert all(thread != loop_thread for _, thread in io_threads), io_threads


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (1, {"text": "alice"}),
        (1, {"subject": "ex:alice"}),
        (0, {"subject": "ex:alice", "predicate": "rdf:type", "object": "ex:Engineer"}),
    ],
    ids=["query-by-text", "query-by-pattern", "add"],
)
def test_graph_tools_wait_for_a_busy_store_off_the_loop(tool: int, args: dict[str, str]) -> None:
    """A query during a long mutation (the store lock held) leaves the loop free."""

    async def main() -> None:
        memory = GraphMemory(GraphStore(), InMemoryMemory())
        await memory.store.add("ex:alice", "rdf:type", "ex:Engineer")
        held, release = threading.Event(), threading.Event()

        def mutation() -> None:
            with memory.store._lock:  # what a long add/remove in a worker thread does
                held.set()
                release.wait(5)

        worker = threading.Thread(target=mutation)
        worker.start()
        held.wait()
        query = asyncio.create_task(memory.tools[tool].invoke(args))
        await asyncio.sleep(0)  # the query starts; it must not block the loop on the lock
        await asyncio.sleep(0)
        assert not query.done()
        release.set()  # only reachable while the loop runs
        assert "ex:alice rdf:type ex:Engineer" in await query
        assert release.is_set()
        await asyncio.to_thread(worker.join)

    asyncio.run(main())
