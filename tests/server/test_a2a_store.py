"""The A2A task store pages from its index names and reads only the page's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("a2a")

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format  # type: ignore[import-untyped]

from async_helper import arun
from framework_agents import InMemoryStorage, LocalFileStorage
from framework_agents.server._a2a_store import StorageTaskStore, sort_key

State = a2a_pb2.TaskState
Task = a2a_pb2.Task

SECOND = 1_000_000_000


class Named(User):
    """A user with a name (the owner scope of a task)."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def ctx(name: str = "") -> ServerCallContext:
    return ServerCallContext(user=Named(name))


class CountingStorage(InMemoryStorage):
    """Counts record reads (each parses a whole task) and every write."""

    def __init__(self) -> None:
        super().__init__()
        self.record_reads = 0
        self.puts = 0
        self.deletes = 0

    async def get(self, key: str) -> bytes | None:
        if key.startswith("a2a/tasks/"):
            self.record_reads += 1
        return await super().get(key)

    async def put(self, key: str, data: bytes) -> None:
        self.puts += 1
        await super().put(key, data)

    async def delete(self, key: str) -> None:
        self.deletes += 1
        await super().delete(key)

    def reset(self) -> None:
        self.record_reads = self.puts = self.deletes = 0


def task(
    task_id: str,
    context_id: str,
    state: int = State.TASK_STATE_COMPLETED,
    at: int | None = None,
    text: str = "",
) -> Task:
    made = Task(id=task_id, context_id=context_id)
    made.status.state = state  # type: ignore[assignment]
    if at is not None:
        made.status.timestamp.FromNanoseconds(at)
    if text:
        made.artifacts.add(artifact_id="answer").parts.add(text=text)
    return made


def many(count: int, contexts: int) -> list[Task]:
    """Tasks over ``contexts`` contexts, some sharing a timestamp, one without."""
    made = [
        task(f"t{i:03d}", f"ctx{i % contexts}", at=(i // 2) * SECOND, state=_state(i))
        for i in range(count - 1)
    ]
    made.append(task("tnone", "ctx0"))
    return made


def _state(i: int) -> int:
    return State.TASK_STATE_INPUT_REQUIRED if i % 5 == 0 else State.TASK_STATE_COMPLETED


async def all_pages(
    store: StorageTaskStore, request: a2a_pb2.ListTasksRequest, context: ServerCallContext
) -> list[a2a_pb2.ListTasksResponse]:
    pages = []
    while True:
        page = await store.list(request, context)
        pages.append(page)
        if not page.next_page_token:
            return pages
        request.page_token = page.next_page_token


def brute(tasks: list[Task], keep: object = None) -> list[str]:
    chosen = [t for t in tasks if keep is None or keep(t)]  # type: ignore[operator]
    return [t.id for t in sorted(chosen, key=sort_key, reverse=True)]


async def saved_many() -> tuple[CountingStorage, StorageTaskStore, list[Task]]:
    """120 tasks in 4 contexts saved by one owner; the storage's counters reset."""
    storage = CountingStorage()
    store = StorageTaskStore(storage)
    tasks = many(120, 4)
    for t in tasks:
        await store.save(t, ctx())
    storage.reset()
    return storage, store, tasks


def test_a_page_reads_only_its_records_and_pages_cover_every_task_once_in_order() -> None:
    async def body() -> None:
        storage, store, tasks = await saved_many()
        first = await store.list(a2a_pb2.ListTasksRequest(page_size=10), ctx())
        assert storage.record_reads == 10 and storage.puts == 0
        assert first.total_size == 120 and len(first.tasks) == 10
        pages = await all_pages(store, a2a_pb2.ListTasksRequest(page_size=10), ctx())
        listed = [t.id for p in pages for t in p.tasks]
        assert listed == brute(tasks)  # newest status first, ties by id, unstamped last
        assert listed[-1] == "tnone" and len(pages) == 12

    arun(body())


def test_filters_by_context_state_and_time_read_only_the_page() -> None:
    async def body() -> None:
        storage, store, tasks = await saved_many()
        request = a2a_pb2.ListTasksRequest(context_id="ctx1", page_size=7)
        page = await store.list(request, ctx())
        assert storage.record_reads == 7
        assert page.total_size == 30
        in_ctx1 = brute(tasks, lambda t: t.context_id == "ctx1")
        pages = await all_pages(
            store, a2a_pb2.ListTasksRequest(context_id="ctx1", page_size=7), ctx()
        )
        assert [t.id for p in pages for t in p.tasks] == in_ctx1

        storage.reset()
        waiting = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_INPUT_REQUIRED, page_size=5)
        page = await store.list(waiting, ctx())
        assert storage.record_reads == 5
        expected = brute(tasks, lambda t: t.status.state == State.TASK_STATE_INPUT_REQUIRED)
        assert page.total_size == len(expected) == 24
        assert [t.id for t in page.tasks] == expected[:5]

        recent = a2a_pb2.ListTasksRequest(page_size=100)
        recent.status_timestamp_after.FromNanoseconds(50 * SECOND)
        page = await store.list(recent, ctx())
        assert [t.id for t in page.tasks] == brute(
            tasks, lambda t: t.status.HasField("timestamp") and sort_key(t)[1] >= 50 * SECOND
        )

    arun(body())


def test_streaming_saves_write_only_the_record_and_a_status_change_moves_the_entries() -> None:
    async def body() -> None:
        storage = CountingStorage()
        store = StorageTaskStore(storage)
        await store.save(task("a", "c", State.TASK_STATE_WORKING, at=SECOND), ctx())
        storage.reset()
        for n in range(20):  # artifact chunks: same status
            await store.save(task("a", "c", State.TASK_STATE_WORKING, SECOND, "x" * n), ctx())
        assert (storage.puts, storage.deletes, storage.record_reads) == (20, 0, 0)
        storage.reset()
        await store.save(task("a", "c", State.TASK_STATE_COMPLETED, at=2 * SECOND), ctx())
        assert (storage.puts, storage.deletes) == (3, 2)  # record + owner and context entries
        names = await storage.list("a2a/owners/") + await storage.list("a2a/contexts/")
        assert len(names) == 2 and all(
            n.endswith(f".{State.TASK_STATE_COMPLETED}.a") for n in names
        )
        page = await store.list(a2a_pb2.ListTasksRequest(context_id="c"), ctx())
        assert [t.status.state for t in page.tasks] == [State.TASK_STATE_COMPLETED]

    arun(body())


def test_a_restarted_store_moves_the_entries_it_did_not_write(tmp_path: Path) -> None:
    async def body(root: Path) -> None:
        await StorageTaskStore(LocalFileStorage(root)).save(
            task("a", "c", State.TASK_STATE_INPUT_REQUIRED, at=SECOND), ctx()
        )
        storage = LocalFileStorage(root)
        again = StorageTaskStore(storage)  # a new process: nothing remembered
        await again.save(task("a", "c", State.TASK_STATE_COMPLETED, at=2 * SECOND), ctx())
        assert len(await storage.list("a2a/owners/")) == 1
        assert len(await storage.list("a2a/contexts/")) == 1
        page = await again.list(a2a_pb2.ListTasksRequest(), ctx())
        assert [(t.id, t.status.state) for t in page.tasks] == [("a", State.TASK_STATE_COMPLETED)]

    arun(body(tmp_path))


def test_two_replicas_leave_one_listing_per_task() -> None:
    async def body() -> None:
        storage = InMemoryStorage()
        one, two = StorageTaskStore(storage), StorageTaskStore(storage)
        await one.save(task("a", "c", State.TASK_STATE_WORKING, at=SECOND), ctx())
        await two.save(task("a", "c", State.TASK_STATE_INPUT_REQUIRED, at=2 * SECOND), ctx())
        # `one` still remembers the first entries: the second replica's stay behind.
        await one.save(task("a", "c", State.TASK_STATE_COMPLETED, at=3 * SECOND), ctx())
        assert len(await storage.list("a2a/owners/")) == 2
        page = await two.list(a2a_pb2.ListTasksRequest(), ctx())
        assert [(t.id, t.status.state) for t in page.tasks] == [("a", State.TASK_STATE_COMPLETED)]
        assert page.total_size == 1
        waiting = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_INPUT_REQUIRED)
        assert list((await two.list(waiting, ctx())).tasks) == []  # the record decides

    arun(body())


def test_records_of_the_older_layout_are_indexed_once() -> None:
    async def body() -> None:
        storage = CountingStorage()
        for i in range(30):
            old = task(f"old{i:02d}", "c", at=i * SECOND)
            record = {"owner": "", "task": json_format.MessageToDict(old)}
            await storage.put(f"a2a/tasks/old{i:02d}.json", json.dumps(record).encode())
        store = StorageTaskStore(storage)
        page = await store.list(a2a_pb2.ListTasksRequest(context_id="c", page_size=5), ctx())
        assert [t.id for t in page.tasks] == [f"old{i:02d}" for i in range(29, 24, -1)]
        assert page.total_size == 30
        storage.reset()
        await StorageTaskStore(storage).list(a2a_pb2.ListTasksRequest(page_size=5), ctx())
        assert storage.record_reads == 5 and storage.puts == 0

    arun(body())


def test_owners_are_apart_and_delete_drops_the_entries() -> None:
    async def body() -> None:
        storage = CountingStorage()
        store = StorageTaskStore(storage)
        for i in range(10):
            await store.save(task(f"b{i}", "c", at=i * SECOND), ctx("bob"))
        await store.save(task("a1", "c", at=SECOND), ctx("alice"))
        storage.reset()
        page = await store.list(a2a_pb2.ListTasksRequest(context_id="c"), ctx("alice"))
        assert [t.id for t in page.tasks] == ["a1"] and page.total_size == 1
        assert storage.record_reads == 1  # bob's records are not read
        await store.delete("b3", ctx("alice"))  # not alice's: nothing happens
        assert await store.get("b3", ctx("bob")) is not None
        await store.delete("b3", ctx("bob"))
        assert await store.get("b3", ctx("bob")) is None
        names = await storage.list("a2a/owners/") + await storage.list("a2a/contexts/")
        assert not [n for n in names if n.endswith(".b3")]
        page = await store.list(a2a_pb2.ListTasksRequest(), ctx("bob"))
        assert page.total_size == 9

    arun(body())


def test_an_entry_whose_record_was_never_written_is_skipped() -> None:
    async def body() -> None:
        storage = InMemoryStorage()
        store = StorageTaskStore(storage)
        for i in range(6):
            await store.save(task(f"t{i}", "c", at=i * SECOND), ctx())
        # A save cut short after its entries: the newest entry has no record.
        (name,) = [n for n in await storage.list("a2a/owners/") if n.endswith(".t5")]
        ghost = name.replace(".t5", ".t9").replace("00000000005", "00000000009")
        assert ghost > name
        await storage.put(ghost, b"")
        page = await store.list(a2a_pb2.ListTasksRequest(page_size=3), ctx())
        assert page.total_size == 6  # the ghost was read for the page: not counted
        assert [t.id for t in page.tasks] == ["t5", "t4", "t3"]
        rest = a2a_pb2.ListTasksRequest(page_size=3, page_token=page.next_page_token)
        assert [t.id for t in (await store.list(rest, ctx())).tasks] == ["t2", "t1", "t0"]

    arun(body())


def test_a_task_left_with_two_entries_counts_once_in_the_state_its_record_holds() -> None:
    """A save cut short between its new entry and dropping the old: the record decides."""

    async def body() -> None:
        storage = CountingStorage()
        store = StorageTaskStore(storage)
        for i in range(4):
            await store.save(task(f"t{i}", "c", State.TASK_STATE_WORKING, at=i * SECOND), ctx())
        done = task("t1", "c", at=9 * SECOND)
        names = await storage.list("a2a/owners/")
        await store.save(done, ctx())
        stale = [n for n in names if n.endswith(".t1")]
        for name in stale:  # the old entry, as if the save had died before dropping it
            await storage.put(name, b"")
        assert len([n for n in await storage.list("a2a/owners/") if n.endswith(".t1")]) == 2
        everything = await store.list(a2a_pb2.ListTasksRequest(page_size=10), ctx())
        assert everything.total_size == 4
        assert [t.id for t in everything.tasks] == ["t1", "t3", "t2", "t0"]
        working = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_WORKING, page_size=10)
        page = await store.list(working, ctx())
        assert page.total_size == 3 and [t.id for t in page.tasks] == ["t3", "t2", "t0"]
        completed = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_COMPLETED, page_size=10)
        page = await store.list(completed, ctx())
        assert page.total_size == 1 and [t.id for t in page.tasks] == ["t1"]

    arun(body())


def test_a_page_token_not_given_by_the_server_is_refused() -> None:
    async def body() -> None:
        store = StorageTaskStore(InMemoryStorage())
        with pytest.raises(InvalidParamsError):
            await store.list(a2a_pb2.ListTasksRequest(page_token="not-a-token!"), ctx())

    arun(body())
