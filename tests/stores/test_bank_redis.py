"""The memory bank over Redis: ``open_store("redis://...?prefix=...").bank()``.

Skips, saying why, when Redis does not answer (``FA_TEST_REDIS``, default
``redis://127.0.0.1:6379/0``). Every test has its own key prefix (``redis_prefix``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import bank_redis_workers as workers
import pytest
from stores_backends import REDIS_URL

from async_helper import arun
from framework_agents import Message
from framework_agents.bank import MemoryBank
from framework_agents.bank import bank as bank_module
from framework_agents.bank._backend import Job, Revision
from framework_agents.bank._records import Row, new_record_id
from framework_agents.errors import (
    BackendUnavailableError,
    InvalidArgumentError,
    MemoryCorruptError,
    MemoryNotFoundError,
)
from framework_agents.stores import Store, open_store
from framework_agents.stores._bank_redis import RedisBankBackend

NS = ("user-1",)

#: A test body: it gets the store and a plain Redis client.
Body = Callable[[Store, Any], Awaitable[None]]


def _url(prefix: str) -> str:
    return f"{REDIS_URL}?prefix={prefix}"


@pytest.fixture
def run(redis_prefix: str) -> Callable[[Body], None]:
    """Run a test body with a store under the test's prefix and a plain Redis client."""
    import redis.asyncio as aioredis

    def go(body: Body) -> None:
        async def main() -> None:
            store = open_store(_url(redis_prefix))
            raw = aioredis.Redis.from_url(REDIS_URL)  # the commands no store would send
            try:
                await body(store, raw)
            finally:
                await store.close()
                await raw.aclose()

        arun(main(), timeout=60)

    return go


async def _snapshot(raw: Any, prefix: str) -> dict[bytes, tuple[str, Any]]:
    """Every key under ``prefix``: its Redis type and its content (by value, not layout)."""
    out: dict[bytes, tuple[str, Any]] = {}
    async for key in raw.scan_iter(match=f"{prefix}*"):
        kind = (await raw.type(key)).decode()
        if kind == "string":
            content: Any = await raw.get(key)
        elif kind == "hash":
            content = await raw.hgetall(key)
        elif kind == "set":
            content = await raw.smembers(key)
        elif kind == "list":
            content = await raw.lrange(key, 0, -1)
        elif kind == "zset":
            content = await raw.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            content = await raw.xrange(key)
        else:
            raise AssertionError(f"{key!r} is a {kind}")
        out[key] = (kind, content)
    return out


def _every_byte(snapshot: dict[bytes, tuple[str, Any]]) -> bytes:
    """The names and values of every key of a snapshot, as one byte string."""
    out: list[bytes] = []

    def walk(value: Any) -> None:
        if isinstance(value, bytes):
            out.append(value)
        elif isinstance(value, dict):
            for item in value.items():
                walk(item)
        elif isinstance(value, list | tuple | set):
            for item in value:
                walk(item)

    for key, (_, content) in snapshot.items():
        out.append(key)
        walk(content)
    return b"\n".join(out)


# -- the bank's operations ---------------------------------------------------------------


def test_remember_search_get_update_revisions_list_forget(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        paris = await bank.remember("Alice lives in Paris", namespace=NS, metadata={"src": "chat"})
        tea = await bank.remember(
            "Alice prefers green tea", namespace=(*NS, "food"), kind="preference"
        )
        await bank.remember("Bob lives in Oslo", namespace=("user-2",))

        hits = await bank.search("where does Alice live", namespace=NS)
        assert [h.record.id for h in hits][:1] == [paris.id]
        assert {h.record.id for h in hits} <= {paris.id, tea.id}
        assert [
            h.record.id for h in await bank.search("tea", namespace=NS, kinds=["preference"])
        ] == [tea.id]
        assert [
            h.record.id for h in await bank.search("Alice", namespace=NS, where={"src": "chat"})
        ] == [paris.id]

        assert await bank.get(paris.id) == paris
        assert await bank.get(new_record_id()) is None

        moved = await bank.update(paris.id, text="Alice lives in Lyon", metadata={"src": "fix"})
        assert (moved.revision, moved.text, moved.metadata) == (
            2,
            "Alice lives in Lyon",
            {"src": "fix"},
        )
        renamed = await bank.update(paris.id, metadata={"src": "again"})
        assert (renamed.revision, renamed.text) == (3, "Alice lives in Lyon")
        assert [r.text for r in await bank.revisions(paris.id)] == [
            "Alice lives in Paris",
            "Alice lives in Lyon",
            "Alice lives in Lyon",
        ]
        assert [h.record.id for h in await bank.search("Lyon", namespace=NS)] == [paris.id]
        assert await bank.search("Paris", namespace=NS) == []

        listed = await bank.list(NS)
        assert [r.id for r in listed] == [paris.id, tea.id]
        assert [r.id for r in await bank.list(NS, limit=1, after=paris.id)] == [tea.id]

        assert await bank.forget(paris.id) is True
        assert await bank.forget(paris.id) is False
        assert await bank.get(paris.id) is None
        assert await bank.revisions(paris.id) == []
        assert [r.id for r in await bank.list(NS)] == [tea.id]
        with pytest.raises(MemoryNotFoundError):
            await bank.update(paris.id, text="gone")

    run(body)


def test_a_second_store_sees_what_the_first_wrote(
    run: Callable[[Body], None], redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        first = await store.bank().remember("the launch code is blue", namespace=NS)
        other = open_store(_url(redis_prefix))
        try:
            hits = await other.bank().search("launch code", namespace=NS)
            assert [h.record for h in hits] == [first]
            await other.bank().forget(first.id)
        finally:
            await other.close()
        assert await store.bank().search("launch code", namespace=NS) == []

    run(body)


def test_a_key_closes_the_record_it_supersedes(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        paris = await bank.remember("Alice lives in Paris", namespace=NS, key="city", valid_from=t0)
        rome = await bank.remember(
            "Alice lives in Rome", namespace=NS, key="city", valid_from=t0 + timedelta(days=30)
        )
        # Remembered last, valid first: placed before Paris on the timeline.
        oslo = await bank.remember(
            "Alice lived in Oslo", namespace=NS, key="city", valid_from=t0 - timedelta(days=30)
        )
        assert oslo.valid_to == t0
        assert (await bank.get(paris.id)).valid_to == rome.valid_from  # type: ignore[union-attr]
        assert (await bank.get(rome.id)).valid_to is None  # type: ignore[union-attr]
        # Another namespace's key of the same name is another timeline.
        other = await bank.remember("Bob lives in Bern", namespace=("user-2",), key="city")
        assert other.valid_to is None

        now = [h.record.id for h in await bank.search("Alice lives", namespace=NS)]
        assert now == [rome.id]
        then = await bank.search("Alice", namespace=NS, as_of=t0 + timedelta(days=1))
        assert [h.record.id for h in then] == [paris.id]
        past = await bank.search("Alice", namespace=NS, include_past=True)
        assert {h.record.id for h in past} == {oslo.id, paris.id, rome.id}

    run(body)


def test_one_insert_places_several_rows_of_one_key(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        backend = store.bank_backend()
        first = bank.new_row("first home", namespace=NS, key="home")
        second = bank.new_row("second home", namespace=NS, key="home")
        stored = await backend.insert([first, second, first])
        assert stored is not None and [r.id for r in stored] == [first.id, second.id, first.id]
        latest = {r.id: r for r in await backend.latest([first.id, second.id])}
        assert latest[first.id].valid_to == second.valid_from
        assert latest[second.id].valid_to is None
        assert [r.id for r in await bank.list(NS)] == [first.id, second.id]

    run(body)


def test_remembering_is_idempotent_by_id(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        messages = [Message("user", "I moved to Porto"), Message("assistant", "Noted: Porto")]
        records = await bank.remember_messages(messages, namespace=NS)
        again = await bank.remember_messages(messages, namespace=NS)
        assert again == records and len(records) == 2
        backend = store.bank_backend()
        row = bank.new_row("a keyed fact", namespace=NS, key="k")
        stored = await backend.insert([row])
        other_text = Row(**{**_fields(row), "text": "another text"})
        assert await backend.insert([other_text]) == stored
        assert len(await bank.list(NS)) == 3
        assert len(await backend.changes(0)) == 3

    run(body)


def _fields(row: Row) -> dict[str, Any]:
    return {name: getattr(row, name) for name in Row.__dataclass_fields__}


def test_an_insert_with_a_job_completes_it_once(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        backend = store.bank_backend()
        jobs = [Job(f"job-{i}", NS, f'[{{"n": {i}}}]'.encode()) for i in (3, 1, 2)]
        for job in jobs:
            await backend.add_job(job)
        await backend.add_job(Job("job-3", NS, b"not stored again"))
        assert await backend.jobs() == jobs

        row = bank.new_row("extracted fact", namespace=NS)
        stored = await bank.complete_job("job-1", [row])
        assert stored is not None and [r.id for r in stored] == [row.id]
        twice = bank.new_row("extracted again", namespace=NS)
        assert await bank.complete_job("job-1", [twice]) is None
        assert await backend.latest([twice.id]) == []
        await backend.drop_job("job-2")
        assert [j.id for j in await backend.jobs()] == ["job-3"]

    run(body)


def test_vectors_are_stored_with_every_revision(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        def embed(texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts]

        bank = store.bank(embedder=embed)
        record = await bank.remember("a small cat", namespace=NS)
        await bank.update(record.id, text="a big dog")
        await bank.update(record.id, metadata={"seen": True})
        rows = await store.bank_backend().revisions(record.id)
        assert [r.vector for r in rows] == [
            bytes.fromhex("0000803f00000000"),
            bytes.fromhex("000000000000803f"),
            bytes.fromhex("000000000000803f"),
        ]
        hits = await store.bank(embedder=embed).search("puppy", namespace=NS)
        assert [h.record.id for h in hits] == [record.id]

    run(body)


def test_ttl_and_prune_expire_records(
    run: Callable[[Body], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        brief = await bank.remember("the door code is 4711", namespace=NS, ttl=60)
        lasting = await bank.remember("the door is red", namespace=NS)
        start = bank_module._now()
        monkeypatch.setattr(bank_module, "_now", lambda: start + 61_000_000)
        assert await bank.get(brief.id) is None
        assert [h.record.id for h in await bank.search("door", namespace=NS)] == [lasting.id]
        assert await store.bank_backend().latest([brief.id]) == []  # the search swept it

        monkeypatch.setattr(bank_module, "_now", lambda: start + 3_600_000_000)
        assert await bank.prune(timedelta(minutes=30)) == 1
        assert await bank.list(NS) == []

    run(body)


def test_forget_namespace_covers_the_namespaces_under_it(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        await bank.remember("one", namespace=NS)
        await bank.remember("two", namespace=(*NS, "trips"), key="next")
        kept = await bank.remember("three", namespace=("user-2",))
        await bank.add_job(Job("j1", (*NS, "trips"), b"[]"))
        await bank.add_job(Job("j2", ("user-2",), b"[]"))
        assert await bank.forget_namespace(NS) == 2
        assert await bank.list(NS) == []
        assert [r.id for r in await bank.list(("user-2",))] == [kept.id]
        assert [j.id for j in await bank.pending_jobs()] == ["j2"]

    run(body)


@pytest.mark.parametrize("how", ["forget", "forget_namespace", "prune"])
def test_forgetting_leaves_no_byte_of_the_text(
    run: Callable[[Body], None], how: str, redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        def embed(texts: list[str]) -> list[list[float]]:
            return [[0.25, 0.5, 0.75] if "zebra" in t else [1.0, 0.0, 0.0] for t in texts]

        bank = store.bank(embedder=embed)
        canary = "zebra-canary-7f3a"
        record = await bank.remember(
            f"the secret is {canary}", namespace=NS, key="secret", metadata={"tag": f"m-{canary}"}
        )
        await bank.update(record.id, text=f"the secret is still {canary}")
        keep = await bank.remember("an unrelated note", namespace=("user-2",))
        stored = _every_byte(await _snapshot(raw, redis_prefix))
        assert canary.encode() in stored
        vector = (await store.bank_backend().revisions(record.id))[0].vector
        assert vector is not None and vector in stored

        if how == "forget":
            assert await bank.forget(record.id)
        elif how == "forget_namespace":
            assert await bank.forget_namespace(NS) == 1
        else:
            await store.bank_backend().delete([keep.id])
            assert await bank.prune(timedelta(0)) == 1

        left = _every_byte(await _snapshot(raw, redis_prefix))
        assert canary.encode() not in left
        assert b"zebra" not in left
        assert vector not in left  # the vector is gone too
        assert record.id.encode() in left  # the change log keeps the id, nothing else

    run(body)


# -- stored data of the wrong shape ------------------------------------------------------


async def _stored_record(store: Store) -> str:
    bank = store.bank()
    record = await bank.remember("a fact to break", namespace=NS, key="k")
    return record.id


_BREAKAGES: dict[str, Callable[[Any, str, str], Any]] = {
    "record is a string": lambda raw, p, rid: raw.set(f"{p}bank:rec:{rid}", b"junk"),
    "revision is not JSON": lambda raw, p, rid: raw.hset(f"{p}bank:rec:{rid}", "j1", b'{"id": '),
    "revision is a list": lambda raw, p, rid: raw.hset(f"{p}bank:rec:{rid}", "j1", b"[1]"),
    "valid_to is text": lambda raw, p, rid: raw.hset(f"{p}bank:rec:{rid}", "to", b"soon"),
    "latest revision missing": lambda raw, p, rid: raw.hset(f"{p}bank:rec:{rid}", "n", b"7"),
    "revision count missing": lambda raw, p, rid: raw.hdel(f"{p}bank:rec:{rid}", "n"),
    "unknown field": lambda raw, p, rid: raw.hset(f"{p}bank:rec:{rid}", "extra", b"1"),
}


@pytest.mark.parametrize("breakage", list(_BREAKAGES), ids=list(_BREAKAGES))
def test_a_broken_record_is_memory_corrupt_and_left_as_it_is(
    run: Callable[[Body], None], breakage: str, redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        record_id = await _stored_record(store)
        await _BREAKAGES[breakage](raw, redis_prefix, record_id)
        before = await _snapshot(raw, redis_prefix)
        bank = store.bank()
        backend = store.bank_backend()
        with pytest.raises(MemoryCorruptError):
            await backend.revisions(record_id)
        if breakage != "unknown field":  # the latest revision alone is still well formed
            with pytest.raises(MemoryCorruptError):
                await bank.get(record_id)
            with pytest.raises(MemoryCorruptError):
                await bank.update(record_id, text="mended?")
            with pytest.raises(MemoryCorruptError):
                await backend.insert([bank.new_row("sibling", namespace=NS, key="k")])
        assert await _snapshot(raw, redis_prefix) == before

    run(body)


@pytest.mark.parametrize(
    "breakage",
    ["log entry has another field", "log is a list", "counter is text", "counter went back"],
)
def test_a_broken_change_log_is_memory_corrupt(
    run: Callable[[Body], None], breakage: str, redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        await bank.remember("first", namespace=NS)
        log, seq = f"{redis_prefix}bank:log", f"{redis_prefix}bank:seq"
        if breakage == "log entry has another field":
            await raw.xadd(log, {"x": "y"}, id="99-0")
        elif breakage == "log is a list":
            await raw.delete(log)
            await raw.rpush(log, "junk")
        elif breakage == "counter is text":
            await raw.set(seq, "many")
        else:
            await raw.set(seq, "0")
        before = await _snapshot(raw, redis_prefix)
        fresh = store.bank()
        if breakage.startswith("log"):
            with pytest.raises(MemoryCorruptError):
                await fresh.search("first", namespace=NS)
        with pytest.raises(MemoryCorruptError):
            await bank.remember("second", namespace=NS)
        after = await _snapshot(raw, redis_prefix)
        after.pop(seq.encode(), None)  # a refused write may have moved the counter on
        before.pop(seq.encode(), None)
        assert after == before

    run(body)


def test_broken_timelines_and_jobs_are_memory_corrupt(
    run: Callable[[Body], None], redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        import hashlib

        bank = store.bank()
        digest = hashlib.sha256(b'["user-1"]\x00k').hexdigest()
        await raw.set(f"{redis_prefix}bank:key:{digest}", b"not a zset")
        await raw.hset(f"{redis_prefix}bank:jobs", "j", b"1\n{junk")
        before = await _snapshot(raw, redis_prefix)
        with pytest.raises(MemoryCorruptError):
            await bank.remember("keyed", namespace=NS, key="k")
        with pytest.raises(MemoryCorruptError):
            await bank.pending_jobs()
        assert await _snapshot(raw, redis_prefix) == before

    run(body)


def test_an_unreachable_server_is_backend_unavailable() -> None:
    async def body() -> None:
        store = open_store("redis://127.0.0.1:1/0?prefix=nowhere:")
        try:
            with pytest.raises(BackendUnavailableError):
                await store.bank().remember("lost", namespace=NS)
            with pytest.raises(BackendUnavailableError):
                await store.bank().search("lost", namespace=NS)
        finally:
            await store.close()

    arun(body(), timeout=60)


def test_the_backend_is_the_redis_one_and_checks_job_ids(run: Callable[[Body], None]) -> None:
    async def body(store: Store, raw: Any) -> None:
        backend = store.bank_backend()
        assert isinstance(backend, RedisBankBackend)
        assert "bank:" in repr(backend)
        with pytest.raises(InvalidArgumentError):
            await backend.add_job(Job("", NS, b"[]"))
        row = store.bank().new_row("a note", namespace=NS)
        with pytest.raises(InvalidArgumentError):  # the change log is read as lines
            await backend.insert([Row(**{**_fields(row), "id": "two\nlines"})])
        assert await backend.changes(0) == []
        assert await backend.revise(new_record_id(), Revision("x", None, None, 1)) is None
        assert await backend.delete([]) == 0
        assert await backend.latest([]) == []

    run(body)


def test_concurrent_remembers_of_one_key_leave_one_current_record(
    run: Callable[[Body], None], redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        others = [open_store(_url(redis_prefix)) for _ in range(3)]
        try:
            banks = [bank, *(o.bank() for o in others)]
            await asyncio.gather(
                *(
                    b.remember(f"home {i} of writer {w}", namespace=NS, key="home")
                    for i in range(5)
                    for w, b in enumerate(banks)
                )
            )
        finally:
            for other in others:
                await other.close()
        _check_timeline(await bank.list(NS), 20)

    run(body)


def test_an_insert_placed_on_a_timeline_that_changed_is_refused_and_placed_again(
    run: Callable[[Body], None], redis_prefix: str
) -> None:
    async def body(store: Store, raw: Any) -> None:
        bank = store.bank()
        backend = store.bank_backend()
        assert isinstance(backend, RedisBankBackend)
        first = await bank.remember("lives in Kyiv", namespace=NS, key="home")
        late = bank.new_row("lives in Riga", namespace=NS, key="home")
        stale = await backend._plan([late], None)  # computed while Kyiv is the last record
        turku = bank.new_row("lives in Turku", namespace=NS, key="home")
        between = Row(**{**_fields(turku), "valid_from": late.valid_from - 1})
        await backend.insert([between])
        before = await _snapshot(raw, redis_prefix)
        reply = await backend._script("INSERT", [*backend._writes, backend._jobs], stale.args)
        assert int(reply[0]) == -2
        assert await _snapshot(raw, redis_prefix) == before
        stored = await backend.insert([late])  # read again: placed after Turku
        assert stored is not None
        _check_timeline(await bank.list(NS), 3)
        closed = {r.id: r.valid_to for r in await backend.latest([first.id, between.id])}
        assert closed == {first.id: between.valid_from, between.id: late.valid_from}

    run(body)


def _check_timeline(records: list[Any], count: int) -> None:
    assert len(records) == count
    ordered = sorted(records, key=lambda r: (r.valid_from, r.id))
    assert [r.valid_to for r in ordered] == [r.valid_from for r in ordered[1:]] + [None]


# -- processes ---------------------------------------------------------------------------


def _spawn(ctx: Any, target: Callable[..., None], *args: Any) -> tuple[Any, Any]:
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child, *args), daemon=True)
    proc.start()
    child.close()
    return proc, parent


def _results(pairs: list[tuple[Any, Any]]) -> list[Any]:
    out = []
    try:
        for proc, conn in pairs:
            if not conn.poll(120):
                raise AssertionError(f"child process {proc.pid} did not answer within 120s")
            status, *detail = conn.recv()
            assert status == "ok", detail
            out.append(detail[0])
    finally:
        for proc, conn in pairs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
    return out


@pytest.mark.slow
def test_two_processes_remember_and_search_lose_and_duplicate_nothing(redis_prefix: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    count, url = 60, _url(redis_prefix)
    counts = [ctx.Value("i", 0), ctx.Value("i", 0)]
    barrier = ctx.Barrier(2)
    pairs = [
        _spawn(ctx, workers.remember_and_search, url, "alpha", "bravo", count, *counts, barrier),
        _spawn(
            ctx, workers.remember_and_search, url, "bravo", "alpha", count, *counts[::-1], barrier
        ),
    ]
    alpha, bravo = _results(pairs)

    async def stored() -> list[Any]:
        async with MemoryBank(url) as bank:
            return await bank.list(workers.NAMESPACE, limit=1000)

    records = asyncio.run(stored())
    assert sorted(r.id for r in records) == sorted(alpha + bravo)
    texts = sorted(r.text for r in records)
    assert texts == sorted(f"{who} note {i}" for who in ("alpha", "bravo") for i in range(count))


@pytest.mark.slow
def test_two_processes_remembering_one_key_leave_one_current_record(redis_prefix: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    count, url = 40, _url(redis_prefix)
    barrier = ctx.Barrier(2)
    pairs = [_spawn(ctx, workers.key_writer, url, who, count, barrier) for who in ("a", "b")]
    written = _results(pairs)

    async def stored() -> list[Any]:
        async with MemoryBank(url) as bank:
            return await bank.list(workers.NAMESPACE, limit=1000)

    records = asyncio.run(stored())
    assert sorted(r.id for r in records) == sorted(written[0] + written[1])
    _check_timeline(records, 2 * count)
    assert sum(1 for r in records if r.valid_to is None) == 1
