"""The A2A task store pages from its index names and reads only the page's records.

A page is one keyset read of names from the cursor on and one read of its records, and a
count of the names in range: the same calls and names whether the owner has 10 tasks or
1,000. The store kinds (SQLite, PostgreSQL, Redis, directory) are in
``test_a2a_store_kinds.py``.
"""

from __future__ import annotations

import bisect
import builtins
import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("a2a")

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor
from google.protobuf import json_format  # type: ignore[import-untyped]

from async_helper import arun
from framework_agents import InMemoryStorage, LocalFileStorage
from framework_agents.server._a2a_store import StorageTaskStore, _name, sort_key

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


class RangedStorage(CountingStorage):
    """In memory, with the SQL and Redis stores' range reads; counts calls and names.

    ``list_after``, ``count_after`` and ``get_many`` answer as those stores do; what a
    listing costs there is what it asks for: ``calls`` and ``names`` (keys sent back).
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}
        self.names = 0

    def count(self, call: str) -> None:
        self.calls[call] = self.calls.get(call, 0) + 1

    def _range(self, prefix: str, after: str | None, before: str | None) -> list[str]:
        keys = sorted(k for k in self._data if k.startswith(prefix))
        low = 0 if after is None else bisect.bisect_right(keys, after)
        high = len(keys) if before is None else bisect.bisect_left(keys, before)
        return keys[low:high]

    async def list(self, prefix: str = "") -> builtins.list[str]:
        self.count("list")
        keys = await super().list(prefix)
        self.names += len(keys)
        return keys

    async def list_after(self, prefix: str, after: str | None, limit: int) -> builtins.list[str]:
        self.count("list_after")
        keys = self._range(prefix, after, None)[:limit]
        self.names += len(keys)
        return keys

    async def count_after(self, prefix: str, after: str | None, before: str | None) -> int:
        self.count("count_after")
        return len(self._range(prefix, after, before))

    async def get_many(self, keys: builtins.list[str]) -> dict[str, bytes]:
        self.count("get_many")
        self.record_reads += sum(k.startswith("a2a/tasks/") for k in keys)
        return {k: self._data[k] for k in keys if k in self._data}

    def reset(self) -> None:
        super().reset()
        self.calls = {}
        self.names = 0


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


async def saved_many(
    storage: CountingStorage | None = None, count: int = 120
) -> tuple[CountingStorage, StorageTaskStore, list[Task]]:
    """``count`` tasks in 4 contexts saved by one owner; the storage's counters reset."""
    storage = storage if storage is not None else CountingStorage()
    store = StorageTaskStore(storage)
    tasks = many(count, 4)
    for t in tasks:
        await store.save(t, ctx())
    await store.list(a2a_pb2.ListTasksRequest(page_size=1), ctx())  # the first listing's look
    storage.reset()
    return storage, store, tasks


def index_names(storage: InMemoryStorage, task_id: str = "") -> list[str]:
    """The index names (of one task, or all) in ``storage``."""
    names = [k for k in storage._data if k.startswith("a2a/index/")]
    if task_id:
        names = [n for n in names if n.endswith("." + _name(None, task_id).split(".", 1)[1])]
    return sorted(names)


def test_a_page_reads_only_its_records_and_pages_cover_every_task_once_in_order() -> None:
    async def body() -> None:
        storage, store, tasks = await saved_many()
        first = await store.list(a2a_pb2.ListTasksRequest(page_size=10), ctx())
        # The page's records and the one after it (is there a next page?); no writes.
        assert storage.record_reads == 11 and storage.puts == 0
        assert first.total_size == 120 and len(first.tasks) == 10
        pages = await all_pages(store, a2a_pb2.ListTasksRequest(page_size=10), ctx())
        listed = [t.id for p in pages for t in p.tasks]
        assert listed == brute(tasks)  # newest status first, ties by id, unstamped last
        assert listed[-1] == "tnone" and len(pages) == 12

    arun(body())


@pytest.mark.parametrize("count", [20, 1000])
def test_a_page_costs_the_same_calls_and_names_with_20_or_1000_tasks(count: int) -> None:
    """On a store with range reads a page never lists the owner's names."""

    async def body() -> None:
        storage, store, tasks = await saved_many(RangedStorage(), count)
        assert isinstance(storage, RangedStorage)
        page = await store.list(a2a_pb2.ListTasksRequest(page_size=5), ctx())
        assert page.total_size == count
        assert storage.calls == {"list_after": 1, "get_many": 1, "count_after": 1}
        assert storage.names == 6 and storage.record_reads == 6  # the page and one more
        storage.reset()
        again = a2a_pb2.ListTasksRequest(page_size=5, page_token=page.next_page_token)
        assert (await store.list(again, ctx())).total_size == count  # carried by the token
        assert storage.calls == {"list_after": 1, "get_many": 1}
        assert storage.names == 6 and storage.record_reads == 6
        storage.reset()
        # Other filters: the token's place holds, its total is counted again.
        request = a2a_pb2.ListTasksRequest(
            page_size=5, page_token=page.next_page_token, status=State.TASK_STATE_COMPLETED
        )
        request.status_timestamp_after.FromNanoseconds(0)
        second = await store.list(request, ctx())
        assert storage.calls == {"list_after": 1, "get_many": 1, "count_after": 1}
        assert storage.names == 6 and storage.record_reads == 6
        completed = brute(
            tasks,
            lambda t: (
                t.status.state == State.TASK_STATE_COMPLETED and t.status.HasField("timestamp")
            ),
        )
        everything = brute(tasks)
        after = everything[everything.index(page.tasks[-1].id) + 1 :]
        assert [t.id for t in second.tasks] == [i for i in after if i in completed][:5]
        assert second.total_size == len(completed)

    arun(body())


def test_filters_by_context_state_and_time_read_only_the_page() -> None:
    async def body() -> None:
        storage, store, tasks = await saved_many()
        request = a2a_pb2.ListTasksRequest(context_id="ctx1", page_size=7)
        page = await store.list(request, ctx())
        assert storage.record_reads == 8
        assert page.total_size == 30
        in_ctx1 = brute(tasks, lambda t: t.context_id == "ctx1")
        pages = await all_pages(
            store, a2a_pb2.ListTasksRequest(context_id="ctx1", page_size=7), ctx()
        )
        assert [t.id for p in pages for t in p.tasks] == in_ctx1

        storage.reset()
        waiting = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_INPUT_REQUIRED, page_size=5)
        page = await store.list(waiting, ctx())
        assert storage.record_reads == 6
        expected = brute(tasks, lambda t: t.status.state == State.TASK_STATE_INPUT_REQUIRED)
        assert page.total_size == len(expected) == 24
        assert [t.id for t in page.tasks] == expected[:5]
        pages = await all_pages(store, waiting, ctx())
        assert [t.id for p in pages for t in p.tasks] == expected

        both = a2a_pb2.ListTasksRequest(
            context_id="ctx0", status=State.TASK_STATE_INPUT_REQUIRED, page_size=4
        )
        expected = brute(
            tasks,
            lambda t: t.context_id == "ctx0" and t.status.state == State.TASK_STATE_INPUT_REQUIRED,
        )
        pages = await all_pages(store, both, ctx())
        assert [t.id for p in pages for t in p.tasks] == expected
        assert pages[0].total_size == len(expected) == 6

        for after in (50 * SECOND, 50 * SECOND + 1, 0, 2 * 10**11 * SECOND):
            recent = a2a_pb2.ListTasksRequest(page_size=9)
            recent.status_timestamp_after.FromNanoseconds(after)
            expected = brute(
                tasks,
                lambda t, at=after: t.status.HasField("timestamp") and sort_key(t)[1] >= at,
            )
            pages = await all_pages(store, recent, ctx())
            assert [t.id for p in pages for t in p.tasks] == expected, after
            assert pages[0].total_size == len(expected)

    arun(body())


def test_streaming_saves_write_only_the_record_and_a_status_change_moves_the_entries() -> None:
    async def body() -> None:
        storage = CountingStorage()
        store = StorageTaskStore(storage)
        await store.save(task("a", "c", State.TASK_STATE_WORKING, at=SECOND), ctx())
        storage.reset()
        for n in range(20):  # artifact chunks: same status
            await store.save(task("a", "c", State.TASK_STATE_WORKING, SECOND, "x" * n), ctx())
        # Each reads the stored record (another replica may have moved the entries).
        assert (storage.puts, storage.deletes, storage.record_reads) == (20, 0, 20)
        storage.reset()
        await store.save(task("a", "c", State.TASK_STATE_COMPLETED, at=2 * SECOND), ctx())
        # The record, and the owner's, state's, context's and context-state's entries.
        assert (storage.puts, storage.deletes) == (5, 4)
        names = index_names(storage)
        assert len(names) == 4 and all(n.endswith(_name(2 * SECOND, "a")) for n in names)
        assert sum(f"/{State.TASK_STATE_COMPLETED}/" in n for n in names) == 2
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
        names = await storage.list("a2a/index/")
        assert len(names) == 4 and all(n.endswith(_name(2 * SECOND, "a")) for n in names)
        page = await again.list(a2a_pb2.ListTasksRequest(), ctx())
        assert [(t.id, t.status.state) for t in page.tasks] == [("a", State.TASK_STATE_COMPLETED)]

    arun(body(tmp_path))


def test_two_replicas_leave_one_listing_per_task() -> None:
    async def body() -> None:
        storage = InMemoryStorage()
        one, two = StorageTaskStore(storage), StorageTaskStore(storage)
        await one.save(task("a", "c", State.TASK_STATE_WORKING, at=SECOND), ctx())
        await two.save(task("a", "c", State.TASK_STATE_INPUT_REQUIRED, at=2 * SECOND), ctx())
        await one.save(task("a", "c", State.TASK_STATE_COMPLETED, at=3 * SECOND), ctx())
        assert len(await storage.list("a2a/index/all/")) == 1
        page = await two.list(a2a_pb2.ListTasksRequest(), ctx())
        assert [(t.id, t.status.state) for t in page.tasks] == [("a", State.TASK_STATE_COMPLETED)]
        assert page.total_size == 1
        waiting = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_INPUT_REQUIRED)
        page = await two.list(waiting, ctx())
        assert list(page.tasks) == [] and page.total_size == 0

    arun(body())


def test_a_replica_saving_its_earlier_status_again_keeps_the_task_listed() -> None:
    # One replica streams chunks of a working task; another moves the task meanwhile (and
    # drops the working entries); the first then saves a chunk with the status it had.
    async def body() -> None:
        storage = InMemoryStorage()
        one, two = StorageTaskStore(storage), StorageTaskStore(storage)
        working = task("a", "c", State.TASK_STATE_WORKING, at=SECOND)
        await one.save(working, ctx())
        await two.save(task("a", "c", State.TASK_STATE_INPUT_REQUIRED, at=2 * SECOND), ctx())
        await one.save(working, ctx())
        for request in (
            a2a_pb2.ListTasksRequest(),
            a2a_pb2.ListTasksRequest(context_id="c"),
            a2a_pb2.ListTasksRequest(status=State.TASK_STATE_WORKING),
            a2a_pb2.ListTasksRequest(context_id="c", status=State.TASK_STATE_WORKING),
        ):
            page = await two.list(request, ctx())
            assert [(t.id, t.status.state) for t in page.tasks] == [
                ("a", State.TASK_STATE_WORKING)
            ], request
            assert page.total_size == 1

    arun(body())


def _old_layout(storage: InMemoryStorage, owner: str, made: Task, state: int) -> list[str]:
    """Write ``made``'s names as the previous layout did (``<stamp>.<state>.<id>``)."""

    def digest(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    stamped, nanos, task_id = sort_key(made)
    name = f"{nanos:020d}.{state}.{task_id}" if stamped else f"none.{state}.{task_id}"
    return [
        f"a2a/owners/{digest(owner)}/{name}",
        f"a2a/contexts/{digest(owner)}/{digest(made.context_id)}/{name}",
    ]


def test_records_of_the_older_layouts_are_indexed_once_and_old_names_removed() -> None:
    async def body() -> None:
        storage = CountingStorage()
        for i in range(30):  # before any index: a record only
            old = task(f"old{i:02d}", "c", at=i * SECOND)
            record = {"owner": "", "task": json_format.MessageToDict(old)}
            await storage.put(f"a2a/tasks/old{i:02d}.json", json.dumps(record).encode())
        for i in range(10):  # the previous index: names carrying the state
            old = task(f"prev{i}", "d", at=(100 + i) * SECOND)
            record = {"owner": "", "task": json_format.MessageToDict(old)}
            await storage.put(f"a2a/tasks/prev{i}.json", json.dumps(record).encode())
            for name in _old_layout(storage, "", old, State.TASK_STATE_COMPLETED):
                await storage.put(name, b"")
        # A task the previous code moved after this code entered it: its record decides.
        store = StorageTaskStore(storage)
        await store.save(task("moved", "d", State.TASK_STATE_WORKING, at=SECOND), ctx())
        later = task("moved", "d", at=500 * SECOND)
        await storage.put(
            "a2a/tasks/moved.json",
            json.dumps({"owner": "", "task": json_format.MessageToDict(later)}).encode(),
        )
        for name in _old_layout(storage, "", later, State.TASK_STATE_COMPLETED):
            await storage.put(name, b"")

        page = await store.list(a2a_pb2.ListTasksRequest(context_id="c", page_size=5), ctx())
        assert [t.id for t in page.tasks] == [f"old{i:02d}" for i in range(29, 24, -1)]
        assert page.total_size == 30
        assert await storage.list("a2a/owners/") == await storage.list("a2a/contexts/") == []
        page = await store.list(a2a_pb2.ListTasksRequest(context_id="d", page_size=20), ctx())
        assert [t.id for t in page.tasks] == ["moved"] + [f"prev{i}" for i in range(9, -1, -1)]
        assert page.total_size == 11  # the stale entry of "moved" was met: not counted
        storage.reset()
        await StorageTaskStore(storage).list(a2a_pb2.ListTasksRequest(page_size=5), ctx())
        assert storage.record_reads == 6 and storage.puts == 0  # entered once: no more

    arun(body())


def test_owners_are_apart_and_delete_drops_the_entries() -> None:
    async def body() -> None:
        storage = CountingStorage()
        store = StorageTaskStore(storage)
        for i in range(10):
            await store.save(task(f"b{i}", "c", at=i * SECOND), ctx("bob"))
        await store.save(task("a1", "c", at=SECOND), ctx("alice"))
        await store.list(a2a_pb2.ListTasksRequest(page_size=1), ctx("alice"))
        storage.reset()
        page = await store.list(a2a_pb2.ListTasksRequest(context_id="c"), ctx("alice"))
        assert [t.id for t in page.tasks] == ["a1"] and page.total_size == 1
        assert storage.record_reads == 1  # bob's records are not read
        await store.delete("b3", ctx("alice"))  # not alice's: nothing happens
        assert await store.get("b3", ctx("bob")) is not None
        await store.delete("b3", ctx("bob"))
        assert await store.get("b3", ctx("bob")) is None
        assert index_names(storage, "b3") == []
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
        (name,) = [
            n for n in await storage.list("a2a/index/all/") if n.endswith(_name(0, "t5")[23:])
        ]
        ghost = name.rsplit("/", 1)[0] + "/" + _name(9 * SECOND, "t9")
        assert ghost < name  # listed first
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
        before = index_names(storage, "t1")
        await store.save(done, ctx())
        for name in before:  # the old entries, as if the save had died before dropping them
            await storage.put(name, b"")
        assert len(index_names(storage, "t1")) == 8
        everything = await store.list(a2a_pb2.ListTasksRequest(page_size=10), ctx())
        assert everything.total_size == 4  # the stale entry was met on the page
        assert [t.id for t in everything.tasks] == ["t1", "t3", "t2", "t0"]
        working = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_WORKING, page_size=10)
        page = await store.list(working, ctx())
        assert page.total_size == 3 and [t.id for t in page.tasks] == ["t3", "t2", "t0"]
        completed = a2a_pb2.ListTasksRequest(status=State.TASK_STATE_COMPLETED, page_size=10)
        page = await store.list(completed, ctx())
        assert page.total_size == 1 and [t.id for t in page.tasks] == ["t1"]
        one = await store.list(a2a_pb2.ListTasksRequest(page_size=1), ctx())
        assert one.total_size == 5  # a stale entry past the page is counted until read

    arun(body())


def test_stale_entries_do_not_shorten_a_page() -> None:
    async def body() -> None:
        storage = RangedStorage()
        store = StorageTaskStore(storage)
        for i in range(12):
            await store.save(task(f"t{i:02d}", "c", at=i * SECOND), ctx())
        await store.list(a2a_pb2.ListTasksRequest(page_size=1), ctx())  # the first look
        owner_index = (await storage.list("a2a/index/all/"))[0].rsplit("/", 1)[0]
        for i in range(8):  # entries newer than every task, whose records never came
            await storage.put(f"{owner_index}/{_name((50 + i) * SECOND, f'g{i}')}", b"")
        storage.reset()
        page = await store.list(a2a_pb2.ListTasksRequest(page_size=5), ctx())
        assert [t.id for t in page.tasks] == ["t11", "t10", "t09", "t08", "t07"]
        assert page.total_size == 12 and page.next_page_token
        # 6 names, all stale; 6 more (2 stale); 2 more (the last and one after it).
        assert storage.calls["list_after"] == 3 and storage.names == 14

    arun(body())


def test_a_page_token_not_given_by_the_server_is_refused() -> None:
    async def body() -> None:
        store = StorageTaskStore(InMemoryStorage())
        await store.save(task("a", "c", at=SECOND), ctx())
        unsafe = encode_list_tasks_cursor(ListTasksCursor(SECOND, "../x"))
        for token in ("not-a-token!", "eyJ0cyI6MX0", unsafe, "%%%"):
            with pytest.raises(InvalidParamsError):
                await store.list(a2a_pb2.ListTasksRequest(page_token=token), ctx())
        # The SDK's cursor of a task that is gone still names a place: the tasks after it
        # (a token of the previous release: the cursor alone, its total counted).
        gone = encode_list_tasks_cursor(ListTasksCursor(2 * SECOND, "zz"))
        page = await store.list(a2a_pb2.ListTasksRequest(page_token=gone), ctx())
        assert [t.id for t in page.tasks] == ["a"] and page.total_size == 1
        for bad in (f"{gone}.1", f"{gone}.1.zzzzzzzz", f"{gone}.12345678901.0123abcd", "."):
            with pytest.raises(InvalidParamsError):
                await store.list(a2a_pb2.ListTasksRequest(page_token=bad), ctx())

    arun(body())


def _put_record(made: Task) -> tuple[str, bytes]:
    record = {"owner": "", "task": json_format.MessageToDict(made)}
    return f"a2a/tasks/{made.id}.json", json.dumps(record).encode()


def test_every_tenant_s_older_records_are_entered_under_one_store() -> None:
    from framework_agents.server._tenants import TenantStorage, serving_tenant

    async def body() -> None:
        inner = InMemoryStorage()
        for tenant in ("a", "b"):
            for i in range(3):
                key, raw = _put_record(task(f"{tenant}{i}", "c", at=i * SECOND))
                await inner.put(f"tenants/{tenant}/{key}", raw)
        store = StorageTaskStore(TenantStorage(inner))  # as the server builds it
        for tenant in ("a", "b"):
            with serving_tenant(tenant):
                page = await store.list(a2a_pb2.ListTasksRequest(), ctx())
            assert [t.id for t in page.tasks] == [f"{tenant}2", f"{tenant}1", f"{tenant}0"]
            assert page.total_size == 3

    arun(body())


def test_an_older_replica_s_state_change_at_the_same_time_is_entered_in_every_index() -> None:
    async def body() -> None:
        storage = InMemoryStorage()
        await StorageTaskStore(storage).save(
            task("t", "c", State.TASK_STATE_WORKING, SECOND), ctx()
        )
        # A replica of the previous release completes it, same status time: the owner's
        # entry (no state in it) stays right, the state's entries are its old layout's.
        done = task("t", "c", State.TASK_STATE_COMPLETED, at=SECOND)
        await storage.put(*_put_record(done))
        for name in _old_layout(storage, "", done, State.TASK_STATE_COMPLETED):
            await storage.put(name, b"")
        store = StorageTaskStore(storage)  # a restarted process
        for state, listed in (
            (State.TASK_STATE_COMPLETED, ["t"]),
            (State.TASK_STATE_WORKING, []),
        ):
            for context_id in ("", "c"):
                request = a2a_pb2.ListTasksRequest(status=state, context_id=context_id)
                page = await store.list(request, ctx())
                assert [t.id for t in page.tasks] == listed, (state, context_id)
                assert page.total_size == len(listed)

    arun(body())


def test_a_token_carrying_a_total_past_int32_is_refused() -> None:
    async def body() -> None:
        store = StorageTaskStore(InMemoryStorage())
        for i in range(3):
            await store.save(task(f"t{i}", "c", at=i * SECOND), ctx())
        first = await store.list(a2a_pb2.ListTasksRequest(page_size=1), ctx())
        cursor, _, scope = first.next_page_token.rsplit(".", 2)
        forged = a2a_pb2.ListTasksRequest(page_size=1, page_token=f"{cursor}.9999999999.{scope}")
        with pytest.raises(InvalidParamsError):
            await store.list(forged, ctx())

    arun(body())
