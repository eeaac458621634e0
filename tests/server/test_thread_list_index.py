"""The thread list's index: keyset pages by state and time that read O(page) on every store.

Runs on SQLite, PostgreSQL (a scratch schema) and Redis (a scratch prefix) through
``open_store``, and on the directory store. A counting wrapper around the storage shows
that a page after the first costs its own keys and entries: no listing of every key.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import PG_URL, REDIS_URL, Counting, make_agent, reachable, scratch_store

from async_helper import arun
from framework_agents import Agent, FunctionModel, Message, ToolCall, tool
from framework_agents.server import create_app
from framework_agents.server._runner import ThreadRunner
from framework_agents.server._store import ServerStore
from framework_agents.stores import open_store

JSON = {"Accept": "application/json"}


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("directory", id="directory"),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL of each kind (a scratch schema or prefix on the servers)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agents.db'}"
        return
    if request.param == "directory":
        yield str(tmp_path / "store")
        return
    with scratch_store(request.param, "h35list") as url:
        yield url


GATE: asyncio.Event | None = None
STARTED: asyncio.Event | None = None


@tool
async def hold() -> str:
    """Wait until the test lets the run go on."""
    assert GATE is not None and STARTED is not None
    STARTED.set()
    await GATE.wait()
    return "held"


@tool(requires_approval=True)
def publish(title: str) -> str:
    """Publish (needs an approval)."""
    return f"published {title}"


def _answer(messages: list[Message], tools: list[Any]) -> Message:
    last = messages[-1]
    if last.role == "tool":
        return Message("assistant", f"done: {last.text}")
    turn = sum(1 for m in messages if m.role == "user")
    if last.text == "hold":
        return Message("assistant", tool_calls=[ToolCall(f"h{turn}", "hold", {})])
    if last.text.startswith("publish "):
        call = ToolCall(f"p{turn}", "publish", {"title": last.text[8:]})
        return Message("assistant", tool_calls=[call])
    return Message("assistant", f"echo: {last.text}")


def _agent() -> Agent:
    return Agent(FunctionModel(_answer), tools=[hold, publish])


@contextlib.asynccontextmanager
async def _runner(url: str) -> AsyncIterator[tuple[ThreadRunner, Counting]]:
    store = open_store(url)
    counting = Counting(store.storage)
    runner = ThreadRunner(_agent, ServerStore(store.checkpointer, counting, store.close))
    try:
        yield runner, counting
    finally:
        await runner.aclose()


async def _run(runner: ThreadRunner, thread_id: str, prompt: str) -> None:
    handle = await runner.start_run(thread_id, prompt)
    await handle.wait()


def test_keyset_pages_by_state_and_time_read_only_their_page(store_url: str) -> None:
    async def body() -> None:
        global GATE, STARTED
        GATE, STARTED = asyncio.Event(), asyncio.Event()
        async with _runner(store_url) as (runner, counting):
            for i in range(12):
                await _run(runner, f"f{i:02d}", f"question {i}")
            middle = datetime.now(UTC)
            for i in range(5):
                await _run(runner, f"w{i}", f"publish post {i}")  # waits for an approval
            held = await runner.start_run("r0", "hold")
            assert STARTED is not None
            await STARTED.wait()  # the tool runs
            assert held.listing is not None
            await held.listing  # the write that lists it as running, beside the run
            every, _ = await runner.list_threads(limit=100)
            assert [s.thread_id for s in every][:6] == ["r0", "w4", "w3", "w2", "w1", "w0"]
            assert {s.thread_id: s.state for s in every}["f03"] == "finished"
            waiting: list[str] = []
            cursor: str | None = None
            while True:
                page, cursor = await runner.list_threads(limit=2, cursor=cursor, state="waiting")
                assert all(s.pending and s.state == "waiting" for s in page)
                waiting += [s.thread_id for s in page]
                if cursor is None:
                    break
            assert waiting == ["w4", "w3", "w2", "w1", "w0"]
            finished: list[str] = []
            counting.calls.clear()
            page, cursor = await runner.list_threads(limit=5, state="finished")
            while cursor is not None:
                finished += [s.thread_id for s in page]
                page, cursor = await runner.list_threads(limit=5, cursor=cursor, state="finished")
            finished += [s.thread_id for s in page]
            assert finished == [f"f{i:02d}" for i in reversed(range(12))]
            if hasattr(counting, "list_after"):  # the SQL and Redis stores: O(page)
                assert counting.calls.get("list", 0) == 0, counting.calls
                pages = counting.calls["list_after"]
                assert counting.calls["get_many"] == pages, counting.calls  # one read a page
                assert counting.calls.get("get", 0) == 0, counting.calls
            recent, _ = await runner.list_threads(updated_after=middle)
            assert [s.thread_id for s in recent] == ["r0", "w4", "w3", "w2", "w1", "w0"]
            older, _ = await runner.list_threads(updated_before=middle, limit=3)
            assert [s.thread_id for s in older] == ["f11", "f10", "f09"]
            GATE.set()
            await held.wait()
            running, _ = await runner.list_threads(state="running")
            assert running == []
            (top,), _ = await runner.list_threads(limit=1, state="finished")
            assert (top.thread_id, top.title) == ("r0", "hold")
            await runner.delete("f05")
            rest, _ = await runner.list_threads(limit=100, state="finished")
            assert "f05" not in [s.thread_id for s in rest]

    arun(body())


def test_the_json_api_clamps_the_limit_refuses_a_foreign_cursor_and_bad_filters(
    tmp_path: Path,
) -> None:
    app = create_app(make_agent, store=f"sqlite:///{tmp_path / 'a.db'}", console=False)

    async def body() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for i in range(3):
                await client.post(f"/api/threads/t{i}/runs", json={"prompt": "hi"}, headers=JSON)
            big = (await client.get("/api/threads", params={"limit": "1000"})).json()
            assert big["limit"] == 500 and "clamped to 500" in big["notice"]
            assert [t["thread_id"] for t in big["threads"]] == ["t2", "t1", "t0"]
            assert big["threads"][0]["state"] == "finished"
            first = (await client.get("/api/threads", params={"limit": "2"})).json()
            assert "notice" not in first and first["limit"] == 2
            second = await client.get(
                "/api/threads", params={"limit": "2", "cursor": first["next_cursor"]}
            )
            assert [t["thread_id"] for t in second.json()["threads"]] == ["t0"]
            for params in (
                {"cursor": "bm90LW91cnM"},  # base64 of "not-ours"
                {"cursor": "%%%"},
                {"state": "sleeping"},
                {"updated_after": "yesterday"},
                {"limit": "0"},
            ):
                refused = await client.get("/api/threads", params=params)
                assert refused.status_code == 400, (params, refused.text)
                assert refused.json()["error"]["code"] == "INVALID_ARGUMENT"
            await app.state.runner.aclose()

    arun(body())


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
def test_list_after_is_a_keyset_range_of_the_key_index(kind: str, tmp_path: Path) -> None:
    if kind != "sqlite" and not reachable(5432 if kind == "postgres" else 6379):
        pytest.skip(f"no {kind} server")
    scratch = f"h35ka_{uuid.uuid4().hex[:10]}"
    url = {
        "sqlite": f"sqlite:///{tmp_path / 'k.db'}",
        "postgres": f"{PG_URL}?schema={scratch}",
        "redis": f"{REDIS_URL}?prefix={scratch}:",
    }[kind]

    async def body() -> None:
        async with open_store(url) as store:
            storage: Any = store.storage
            for key in ("a/1", "a/2", "a/3", "a/30", "a/4", "b/1", "a0"):
                await storage.put(key, b"x")
            assert await storage.list_after("a/", None, 2) == ["a/1", "a/2"]
            assert await storage.list_after("a/", "a/2", 2) == ["a/3", "a/30"]
            assert await storage.list_after("a/", "a/30", 10) == ["a/4"]
            assert await storage.list_after("a/", "a/4", 10) == []
            assert await storage.list_after("a/", "0", 1) == ["a/1"]  # before the prefix
            for key in ("a/1", "a/2", "a/3", "a/30", "a/4", "b/1", "a0"):
                await storage.delete(key)

    try:
        arun(body())
    finally:
        if kind == "postgres":
            import psycopg

            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {scratch} CASCADE")


def test_a_waiting_list_shows_a_thread_a_dead_run_left_listed_running(tmp_path: Path) -> None:
    """A dead run's call shows as waiting in ``state=waiting`` alone, once its lock is free.

    Another replica died in an approved call: its line reads ``running``. While its lock
    is still held (a lease not yet run out) a first list leaves the line as it is; a
    list of waiting threads made after the lock is free must show the thread, although
    it reads only the waiting lines (the crash test's SQLite case raced on this).
    """
    from framework_agents import ThreadCheckpoint
    from framework_agents.checkpoint._base import thread_lock

    url = f"sqlite:///{tmp_path / 'agents.db'}"
    call = ToolCall("p1", "publish", {"title": "G"})
    turn = Message(role="assistant", tool_calls=[call])
    checkpoint = ThreadCheckpoint(
        "g1", None, [Message("user", "publish G")], {}, None, turn=turn, in_flight=[call]
    )  # approved, about to run: nothing pending

    async def body() -> None:
        async with open_store(url) as other, _runner(url) as (runner, _counting):
            await other.checkpointer.save(checkpoint)  # the dead replica's run, mid-call
            await runner.index.enter_running("g1", "publish G")
            async with thread_lock(other.checkpointer, "g1"):  # its lease not run out yet
                every, _ = await runner.list_threads()
                assert [(s.thread_id, s.state) for s in every] == [("g1", "running")]
            waiting, _ = await runner.list_threads(state="waiting")
            assert [(s.thread_id, s.pending) for s in waiting] == [("g1", True)]
            shown = await runner.load("g1")
            assert shown is not None and shown.outcome_unknown

    arun(body())


def test_a_reconcile_never_replaces_the_line_a_starting_run_wrote() -> None:
    """The index's reconcile read a thread's checkpoint while its run started: the line it
    wrote from that checkpoint replaced the run's ``running`` line (a tenants test saw a
    run never listed running). A thread running here is skipped; one entered meanwhile
    is left as entered."""
    from framework_agents import ThreadCheckpoint
    from framework_agents.server._index import ThreadIndex
    from framework_agents.server._shapes import summary_json
    from framework_agents.sessions import InMemoryStorage

    index = ThreadIndex(InMemoryStorage(), summary_json)

    async def body() -> list[str]:
        saved = ThreadCheckpoint(thread_id="t", messages=[Message("user", "hi", id="u1")])

        async def load(thread_id: str) -> ThreadCheckpoint | None:
            # The run starts while the reconcile reads: it lists the thread running.
            await index.enter_running(thread_id, "hi")
            return saved

        await index.reconcile(["t"], load)
        raced, _ = await index.page(limit=10, after=None, state="running")
        return [str(r["thread_id"]) for r in raced]

    async def skipping() -> list[str]:
        await index.reconcile(["u"], load_unused, running=lambda thread_id: True)
        listed, _ = await index.page(limit=10, after=None)
        return [str(r["thread_id"]) for r in listed]

    async def load_unused(thread_id: str) -> ThreadCheckpoint | None:
        raise AssertionError("a thread running here is not loaded")

    assert arun(body()) == ["t"]  # still listed running
    assert arun(skipping()) == ["t"]  # not entered from a checkpoint
