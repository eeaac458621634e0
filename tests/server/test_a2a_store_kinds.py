"""The A2A task store on every store kind: keyset pages, filters, tokens, counts.

SQLite, PostgreSQL (a scratch schema), Redis (a scratch prefix), the directory store and
memory. A counting wrapper shows what a page asks of the stores with range reads: one
``list_after``, one ``get_many``, one ``count_after``, and no listing of every name.
``count_after`` itself is checked on the database stores and through the tenant's and
the cipher's views of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")

from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor
from server_support import Counting, scratch_store
from test_a2a_store import SECOND, State, Task, all_pages, brute, ctx, task

from async_helper import arun
from framework_agents import Cipher, InMemoryStorage, LocalFileStorage
from framework_agents.server._a2a_store import StorageTaskStore, sort_key
from framework_agents.server._tenants import TenantStorage, serving_tenant
from framework_agents.stores import open_store


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
        pytest.param("directory", id="directory"),
        pytest.param("memory", id="memory"),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store of each kind (a scratch schema or prefix on the servers)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agents.db'}"
    elif request.param in ("directory", "memory"):
        yield f"{request.param}:{tmp_path / 'store'}"
    else:
        with scratch_store(request.param, "h35a2a") as url:
            yield url


async def _with_storage(url: str, body: Any) -> None:
    """Run ``body(storage)`` on the store ``url`` names (``memory:``: an in-memory one)."""
    if url.startswith("memory:"):
        await body(InMemoryStorage())
    elif url.startswith("directory:"):
        await body(LocalFileStorage(url.removeprefix("directory:")))
    else:
        async with open_store(url) as store:
            await body(store.storage)


def _tasks() -> list[Task]:
    """25 tasks in 3 contexts, two states, some sharing a time, one without a time."""
    made = [
        task(
            f"t{i:02d}",
            f"c{i % 3}",
            State.TASK_STATE_INPUT_REQUIRED if i % 4 == 0 else State.TASK_STATE_COMPLETED,
            at=(i // 2) * SECOND,
        )
        for i in range(24)
    ]
    made.append(task("tnone", "c0"))
    return made


def test_pages_filters_and_tokens_on_every_store(store_url: str) -> None:
    async def body(inner: Any) -> None:
        storage = Counting(inner)
        store = StorageTaskStore(storage)
        tasks = _tasks()
        for made in tasks:
            await store.save(made, ctx())
        ranged = hasattr(storage, "list_after")
        filters: list[tuple[a2a_pb2.ListTasksRequest, Any]] = [
            (a2a_pb2.ListTasksRequest(page_size=4), None),
            (
                a2a_pb2.ListTasksRequest(page_size=3, context_id="c1"),
                lambda t: t.context_id == "c1",
            ),
            (
                a2a_pb2.ListTasksRequest(page_size=2, status=State.TASK_STATE_INPUT_REQUIRED),
                lambda t: t.status.state == State.TASK_STATE_INPUT_REQUIRED,
            ),
            (
                a2a_pb2.ListTasksRequest(
                    page_size=2, context_id="c0", status=State.TASK_STATE_INPUT_REQUIRED
                ),
                lambda t: (
                    t.context_id == "c0" and t.status.state == State.TASK_STATE_INPUT_REQUIRED
                ),
            ),
        ]
        recent = a2a_pb2.ListTasksRequest(page_size=4, status=State.TASK_STATE_COMPLETED)
        recent.status_timestamp_after.FromNanoseconds(5 * SECOND)
        filters.append(
            (
                recent,
                lambda t: (
                    t.status.state == State.TASK_STATE_COMPLETED
                    and t.status.HasField("timestamp")
                    and sort_key(t)[1] >= 5 * SECOND
                ),
            )
        )
        await store.list(a2a_pb2.ListTasksRequest(page_size=1), ctx())  # the first look
        for request, keep in filters:
            storage.calls = {}
            pages = await all_pages(store, request, ctx())
            expected = brute(tasks, keep)
            assert [t.id for p in pages for t in p.tasks] == expected, request
            assert {p.total_size for p in pages} == {len(expected)}, request
            if ranged:  # each page: one range read, one read of records; the first a count
                n = len(pages)
                assert storage.calls == {"list_after": n, "get_many": n, "count_after": 1}
        unsafe = encode_list_tasks_cursor(ListTasksCursor(SECOND, "a/b"))
        cursor = encode_list_tasks_cursor(ListTasksCursor(SECOND, "t02"))
        for token in ("not-a-token!", unsafe, f"{cursor}.x.12345678", f"{cursor}.5"):
            with pytest.raises(InvalidParamsError):
                await store.list(a2a_pb2.ListTasksRequest(page_token=token), ctx())
        others = await store.list(a2a_pb2.ListTasksRequest(), ctx("someone else"))
        assert list(others.tasks) == [] and others.total_size == 0

    arun(_with_storage(store_url, body))


def test_paging_while_tasks_are_saved_lists_every_unchanged_task_once(store_url: str) -> None:
    """New tasks and streamed chunks meanwhile change nothing; a moved task moves.

    A task whose status changes during the walk goes to the front, before the cursor:
    the walk does not list it there (once listed, it is not listed again; not yet
    listed, it is not listed at all), as on the SDK's own stores.
    """

    async def body(storage: Any) -> None:
        store = StorageTaskStore(storage)
        tasks = _tasks()
        for made in tasks:
            await store.save(made, ctx())
        order = brute(tasks)
        moved_late = order[15]  # not yet listed when it moves
        moved_early = order[1]  # listed before it moves
        request = a2a_pb2.ListTasksRequest(page_size=4)
        listed: list[str] = []
        step = 0
        while True:
            page = await store.list(request, ctx())
            listed += [t.id for t in page.tasks]
            if not page.next_page_token:
                break
            request.page_token = page.next_page_token
            step += 1
            # Meanwhile: a new task (newest of all), chunks of an unlisted task.
            await store.save(task(f"new{step}", "c9", at=(100 + step) * SECOND), ctx())
            chunked = next(t for t in tasks if t.id == order[-2])
            chunked.artifacts.add(artifact_id=f"a{step}").parts.add(text="chunk")
            await store.save(chunked, ctx())
            if step == 2:
                for task_id in (moved_late, moved_early):
                    again = next(t for t in tasks if t.id == task_id)
                    again.status.timestamp.FromNanoseconds(200 * SECOND)
                    await store.save(again, ctx())
        assert listed == [t for t in order if t != moved_late]
        assert len(set(listed)) == len(listed)
        first = await store.list(a2a_pb2.ListTasksRequest(page_size=2), ctx())
        assert sorted(t.id for t in first.tasks) == sorted([moved_early, moved_late])
        assert first.total_size == len(tasks) + step

    arun(_with_storage(store_url, body))


@pytest.mark.parametrize(
    "kind",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_count_after_counts_a_key_range_also_through_tenants_and_a_cipher(
    kind: str, tmp_path: Path
) -> None:
    keys = ("a/1", "a/2", "a/3", "a/30", "a/4", "b/1", "a0")

    async def check(storage: Any) -> None:
        for key in keys:
            await storage.put(key, b"x")
        assert await storage.count_after("a/", None) == 5
        assert await storage.count_after("a/", "a/2") == 3
        assert await storage.count_after("a/", "a/2", "a/4") == 2
        assert await storage.count_after("a/", None, "a/30") == 3
        assert await storage.count_after("a/", "0", "z") == 5  # bounds outside the prefix
        assert await storage.count_after("a/", "a/4") == 0
        assert await storage.count_after("c/", None) == 0
        assert await storage.count_after("", None) == len(await storage.list(""))

    async def body(url: str) -> None:
        async with open_store(url) as store:
            await check(store.storage)
            with serving_tenant(f"ten{uuid.uuid4().hex[:6]}"):
                tenant: Any = TenantStorage(store.storage)
                await check(tenant)
                assert await tenant.count_after("", None) == len(keys)
        cipher = Cipher(keys={"k1": bytes(range(32))}, current="k1")
        async with open_store(url, cipher=cipher) as sealed:
            sealed_storage: Any = sealed.storage
            assert type(sealed_storage).__name__ == "SealedStorage"
            assert await sealed_storage.count_after("a/", "a/2", "a/4") == 2
            # The cipher's own keys are not counted where they could be in range.
            everything = await sealed_storage.list("")
            assert await sealed_storage.count_after("", None) == len(everything)

    if kind == "sqlite":
        arun(body(f"sqlite:///{tmp_path / 'k.db'}"))
        return
    with scratch_store(kind, "h35cnt") as url:
        arun(body(url))
