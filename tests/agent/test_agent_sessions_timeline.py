"""The agent's timeline saved and restored with its session (API.md, *Sessions and snapshots*).

A new agent over the same session sees the previous timeline and goes on at the next rev,
on every kind of storage; sessions stored before timelines were saved still load; two
agents on one session keep every entry once, revs growing; a save appends only the new
entries.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import (
    Agent,
    FunctionModel,
    InMemoryCheckpointer,
    InMemoryMemory,
    InMemoryStorage,
    LocalFileStorage,
    NullConversationManager,
    SessionManager,
    SlidingWindowConversationManager,
    Snapshot,
    SnapshotData,
    TimelineEntry,
)
from framework_agents.sessions import Storage
from framework_agents.stores import open_store

FIXTURES = Path(__file__).parents[1] / "fixtures" / "persisted"


def echo(**kwargs: Any) -> Callable[[SessionManager], Agent]:
    """Agents answering ``re: <prompt>`` over a session manager."""
    model = FunctionModel(lambda messages, tools: f"re: {messages[-1].text}")
    return lambda sm: Agent(model, session_manager=sm, **kwargs)


def kinds(timeline: list[TimelineEntry]) -> list[tuple[int, str, str | None]]:
    return [(e.rev, e.kind, e.label) for e in timeline]


@asynccontextmanager
async def storage_of(kind: str, root: Path) -> AsyncIterator[Storage]:
    """A storage of ``kind``: in memory, files, or a database's (``open_store``)."""
    if kind == "memory":
        yield InMemoryStorage()
    elif kind == "files":
        yield LocalFileStorage(root)
    else:
        async with open_store(f"sqlite:///{root / 'agents.db'}") as store:
            yield store.storage


@pytest.mark.parametrize("kind", ["memory", "files", "sqlite"])
def test_a_new_agent_on_the_session_sees_the_timeline_and_goes_on_at_the_next_rev(
    kind: str, tmp_path: Path
) -> None:
    agent = echo()

    async def main() -> None:
        async with storage_of(kind, tmp_path) as storage:
            first = agent(SessionManager("s", storage))
            await first.run("one")
            await first.edit_message(0, "one, edited")
            await first.run("two")
            edited = first.messages[0].id
            assert kinds(first.timeline) == [
                (1, "run", None),
                (2, "edit", edited),
                (3, "run", None),
            ]

            second = agent(SessionManager("s", storage))  # a restart: a new agent, a new manager
            await second.run("three")
            assert second.timeline[:3] == first.timeline  # every field, ``at`` included
            assert kinds(second.timeline)[3:] == [(4, "run", None)]

            stored = some(await SessionManager("s", storage).load_latest())
            assert stored.data.timeline == second.timeline
            assert stored.data.fields == {"messages", "state"}  # the presets' fields, as before

    arun(main())


@pytest.mark.parametrize(
    ("corpus", "root"),
    [("v1", "sessions"), ("v2", "files/storage")],
    ids=["v1-files", "v2-files"],
)
def test_a_session_stored_without_a_timeline_loads_and_starts_one(
    corpus: str, root: str, tmp_path: Path
) -> None:
    shutil.copytree(FIXTURES / corpus / root, tmp_path / "storage")
    storage = LocalFileStorage(tmp_path / "storage")
    old = some(arun(SessionManager("s1", storage).load_latest()))
    assert old.data.timeline is None and old.data.messages

    agent = echo()(SessionManager("s1", storage))
    arun(agent.run("and now?"))
    assert [m.id for m in agent.messages[: len(old.data.messages)]] == [
        m.id for m in old.data.messages
    ]
    assert kinds(agent.timeline) == [(1, "run", None)]  # the timeline starts with this run

    again = echo()(SessionManager("s1", storage))
    arun(again.run("still there?"))
    assert kinds(again.timeline) == [(1, "run", None), (2, "run", None)]


def test_a_database_session_stored_without_a_timeline_loads_and_starts_one(
    tmp_path: Path,
) -> None:
    shutil.copyfile(FIXTURES / "v2" / "stores.db", tmp_path / "stores.db")

    async def main() -> None:
        async with open_store(f"sqlite:///{tmp_path / 'stores.db'}") as store:
            agent = echo()(SessionManager("s1", store.storage))
            await agent.run("and now?")
            again = echo()(SessionManager("s1", store.storage))
            await again.run("still there?")
            assert kinds(again.timeline) == [(1, "run", None), (2, "run", None)]
            assert len(again.messages) == len(agent.messages) + 2

    arun(main())


def test_entries_recorded_before_the_first_run_follow_the_restored_ones() -> None:
    storage, agent = InMemoryStorage(), echo()
    first = agent(SessionManager("s", storage))
    arun(first.run("one"))
    arun(first.run("two"))

    second = agent(SessionManager("s", storage))
    snap = second.take_snapshot()  # before the first run: recorded as rev 1, not yet restored
    assert kinds(second.timeline) == [(1, "snapshot", f"take:{snap.snapshot_id}")]
    arun(second.run("three"))
    assert kinds(second.timeline) == [
        (1, "run", None),
        (2, "run", None),
        (3, "snapshot", f"take:{snap.snapshot_id}"),  # after the session's, renumbered
        (4, "run", None),
    ]
    assert second.timeline[:2] == first.timeline


def test_two_agents_on_one_session_keep_every_entry_once_revs_growing() -> None:
    storage, agent = InMemoryStorage(), echo()
    a, b = agent(SessionManager("s", storage)), agent(SessionManager("s", storage))
    arun(a.run("a1"))
    arun(b.run("b1"))  # restores a's entry, then adds its own
    assert kinds(b.timeline) == [(1, "run", None), (2, "run", None)]
    arun(a.run("a2"))  # a never saw b's save: merged, b's entry first, a's renumbered past it
    assert kinds(a.timeline) == [(1, "run", None), (2, "run", None), (3, "run", None)]
    assert a.timeline[:2] == b.timeline
    stored = some(arun(SessionManager("s", storage).load_latest()))
    assert stored.data.timeline == a.timeline

    arun(b.run("b2"))  # b never saw a's merged save: merged again
    revs = [e.rev for e in b.timeline]
    assert revs == [1, 2, 3, 4]  # a's three, then b2: none twice
    assert b.timeline[:3] == a.timeline
    assert len({(e.rev, e.at) for e in b.timeline}) == len(b.timeline)
    stored = some(arun(SessionManager("s", storage).load_latest()))
    assert stored.data.timeline == b.timeline


def test_load_snapshot_keeps_the_timeline_and_records_the_load() -> None:
    storage = InMemoryStorage()
    agent = echo()(SessionManager("s", storage))
    arun(agent.run("one"))
    before = agent.timeline
    foreign = [TimelineEntry(rev=7, kind="branch", label="elsewhere")]
    snap = Snapshot(SnapshotData(state={"n": 1}, timeline=foreign))
    arun(agent.load_snapshot(snap))
    assert agent.timeline[:1] == before
    assert kinds(agent.timeline)[1:] == [(2, "snapshot", f"load:{snap.snapshot_id}")]
    stored = some(arun(SessionManager("s", storage).load_latest()))
    assert stored.data.timeline == agent.timeline


def test_a_run_from_a_thread_carries_the_session_timeline() -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    first = echo()(SessionManager("s", storage))
    arun(first.run("without a thread"))
    second = echo()(SessionManager("s", storage))
    arun(second.run("on a thread", checkpointer=checkpointer, thread_id="t"))
    assert kinds(second.timeline) == [(1, "run", None), (2, "run", None)]
    stored = some(arun(SessionManager("s", storage).load_latest()))
    assert stored.data.timeline == second.timeline


def test_a_failed_run_is_saved_with_the_next_save() -> None:
    storage, calls = InMemoryStorage(), []

    def model(messages: Any, tools: Any) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("model down")
        return "ok"

    agent = Agent(FunctionModel(model), session_manager=SessionManager("s", storage))
    arun(agent.run("one"))
    with pytest.raises(RuntimeError):
        arun(agent.run("two"))
    arun(agent.run("three"))
    again = Agent(FunctionModel(model), session_manager=SessionManager("s", storage))
    arun(again.run("four"))
    assert kinds(again.timeline) == [
        (1, "run", None),
        (2, "run", "error:RuntimeError"),
        (3, "run", None),
        (4, "run", None),
    ]


class RecordingStorage(InMemoryStorage):
    """InMemoryStorage keeping each log record appended and each value stored."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[bytes] = []
        self.values: list[bytes] = []

    async def put(self, key: str, data: bytes) -> None:  # ``swap`` stores through it too
        self.values.append(data)
        await super().put(key, data)

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        self.records.append(record)
        return await super().append_logged(key, record, expected)


@pytest.mark.parametrize(
    "kwargs",
    [
        {
            "memory": InMemoryMemory(max_messages=1000),
            "conversation_manager": NullConversationManager(),
        },
        {"conversation_manager": SlidingWindowConversationManager(window_size=4)},
    ],
    ids=["growing", "window"],
)
def test_a_save_appends_only_the_new_entries(kwargs: dict[str, Any]) -> None:
    storage = RecordingStorage()
    agent = echo(**kwargs)(SessionManager("s", storage))

    async def runs(n: int) -> None:
        for i in range(n):
            await agent.run(f"question {i:04d}")

    arun(runs(400))
    # Each save appends one record holding what the run added: its two messages (a window
    # keeps the stored ones it did not drop) and its one entry. The whole timeline is
    # written again only when the log is folded.
    late = [json.loads(r.partition(b"\n")[2])["data"] for r in storage.records[-50:]]
    revs = [[e["rev"] for e in data["timeline"]] for data in late]
    assert all(len(one) == 1 for one in revs)
    assert [one[0] for one in revs] == sorted({one[0] for one in revs})  # a fold may skip one
    assert all(len(data["messages"]) == 2 for data in late)
    sizes = [len(r) for r in storage.records[-50:]]
    assert max(sizes) - min(sizes) < 16  # the same size whatever the timeline's length
    assert len(storage.values) < 40 < len(storage.records)
    stored = some(arun(SessionManager("s", storage).load_latest()))
    assert stored.data.timeline == agent.timeline and len(agent.timeline) == 400
    assert stored.data.messages == list(agent.messages)
