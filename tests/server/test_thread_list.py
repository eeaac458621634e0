"""The thread list pages newest first and reads only its page: no history is loaded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    InMemoryCheckpointer,
    InMemoryStorage,
    InvalidArgumentError,
    LocalFileStorage,
    Message,
    ScriptedModel,
    ThreadCheckpoint,
)
from framework_agents.server import _listing as listing_module
from framework_agents.server import _timeline as timeline_module
from framework_agents.server._runner import ThreadRunner
from framework_agents.server._store import ServerStore


class CountingCheckpointer(InMemoryCheckpointer):
    """Counts loads (each one parses a whole history)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        self.loads += 1
        return await super().load(thread_id)


def _runner(cp: CountingCheckpointer) -> ThreadRunner:
    return ThreadRunner(lambda: Agent(ScriptedModel(["ok"])), ServerStore(cp, InMemoryStorage()))


async def _run(runner: ThreadRunner, thread_id: str, prompt: str) -> None:
    handle = await runner.start_run(thread_id, prompt)
    assert handle.task is not None
    await handle.task


def test_pages_cover_every_thread_once_newest_first_without_loading_a_history() -> None:
    async def body() -> None:
        cp = CountingCheckpointer()
        runner = _runner(cp)
        for i in range(23):
            await _run(runner, f"t{i:02d}", f"question {i}")
        await _run(runner, "t05", "again")  # the newest now
        cp.loads = 0
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page, cursor = await runner.list_threads(limit=5, cursor=cursor)
            assert len(page) <= 5
            seen += [s.thread_id for s in page]
            if cursor is None:
                break
        assert cp.loads == 0  # summaries only
        assert seen[0] == "t05" and sorted(seen) == [f"t{i:02d}" for i in range(23)]
        assert seen[1:] == [f"t{i:02d}" for i in reversed(range(23)) if i != 5]
        (first,) = (await runner.list_threads(limit=1))[0]
        assert (first.title, first.message_count, first.pending) == ("question 5", 4, False)

    arun(body())


def test_a_search_a_deleted_thread_and_a_thread_written_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listing_module, "RECONCILE_SECONDS", 0.0)  # look on every first page

    async def body() -> None:
        cp = CountingCheckpointer()
        runner = _runner(cp)
        for name in ("apples", "pears", "apple-pie"):
            await _run(runner, name, f"tell me about {name}")
        found, more = await runner.list_threads(limit=10, query="APPLE")
        assert [s.thread_id for s in found] == ["apple-pie", "apples"] and more is None
        await runner.delete("pears")
        listed, _ = await runner.list_threads()
        assert [s.thread_id for s in listed] == ["apple-pie", "apples"]
        # A thread another tool wrote to the same checkpointer is entered once, then listed.
        await cp.save(ThreadCheckpoint("cli", None, [Message("user", "from the CLI")]))
        cp.loads = 0
        listed, _ = await runner.list_threads()
        assert listed[0].thread_id == "cli" and cp.loads == 1
        listed, _ = await runner.list_threads()
        assert cp.loads == 1

    arun(body())


def test_a_bad_cursor_or_limit_is_invalid_argument() -> None:
    async def body() -> list[Any]:
        runner = _runner(CountingCheckpointer())
        errors = []
        for kwargs in ({"cursor": "not-a-cursor"}, {"limit": 0}, {"limit": 501}):
            try:
                await runner.list_threads(**kwargs)
            except InvalidArgumentError as exc:
                errors.append(exc.code)
        return errors

    assert arun(body()) == ["INVALID_ARGUMENT"] * 3


def test_the_timeline_appends_entries_and_two_recorders_lose_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline_module, "_TIMELINE_FOLD", 4)

    async def body() -> None:
        storage = LocalFileStorage(tmp_path)
        cp = CountingCheckpointer()
        one = ThreadRunner(lambda: Agent(ScriptedModel(["ok"])), ServerStore(cp, storage))
        two = ThreadRunner(lambda: Agent(ScriptedModel(["ok"])), ServerStore(cp, storage))
        document = tmp_path / "server" / "threads" / "t" / "timeline.json"
        await one.record("t", "run", None)
        first = document.read_bytes()
        await one.record("t", "resume", "interrupted")
        assert document.read_bytes() == first  # the entry was appended, not rewritten
        await asyncio.gather(
            *(r.record("t", "edit", f"e{i}") for i, r in enumerate([one, two] * 4))
        )
        entries = await two.timeline("t")
        assert [e["rev"] for e in entries] == list(range(1, 11))  # none lost, none twice
        assert sorted(e["label"] for e in entries if e["kind"] == "edit") == [
            f"e{i}" for i in range(8)
        ]
        assert document.read_bytes() != first  # folded into the document meanwhile

    arun(body())
