"""The memory bank over SQLite and PostgreSQL: behaviours, forgetting, corruption, processes.

PostgreSQL tests run in a fresh schema (``?schema=``) and skip, saying why, when the
server does not answer (``FA_TEST_POSTGRES``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import multiprocessing
import random
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from bank_workers import WORD, share_worker
from stores_backends import PG_URL

from framework_agents.bank import MemoryBank
from framework_agents.bank import bank as bank_module
from framework_agents.bank._backend import InMemoryBankBackend, Job
from framework_agents.bank._records import new_record_id
from framework_agents.errors import AgentError
from framework_agents.stores import open_store
from framework_agents.stores.sqlite import SQLITE_BANK

NS = ("user-1",)


@pytest.fixture(params=["sqlite", "postgres"])
def bank_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty bank: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/bank.db"
    schema = request.getfixturevalue("pg_schema")
    return f"{PG_URL}?schema={schema}"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The bank's clock moved by the microseconds in ``clock[0]``."""
    real = bank_module._now
    offset = [0]
    monkeypatch.setattr(bank_module, "_now", lambda: real() + offset[0])
    yield offset


def _code(awaitable: Awaitable[Any]) -> str:
    async def body() -> str:
        with pytest.raises(AgentError) as info:
            await awaitable
        return info.value.code

    return asyncio.run(body())


def _with_bank(url: str, how: str, body: Callable[[MemoryBank], Awaitable[Any]]) -> Any:
    """Run ``body(bank)`` on ``MemoryBank(url)`` or ``open_store(url).bank()``, then close."""

    async def run() -> Any:
        if how == "url":
            async with MemoryBank(url) as bank:
                return await body(bank)
        store = open_store(url)
        try:
            return await body(store.bank())
        finally:
            await store.close()

    return asyncio.run(run())


# -- behaviours -------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["store", "url"])
def test_remember_search_update_list_forget(bank_url: str, how: str) -> None:
    async def body(bank: MemoryBank) -> None:
        home = await bank.remember("Ada lives in Paris", namespace=NS, key="home")
        tea = await bank.remember(
            "Ada likes green tea", namespace=(*NS, "prefs"), kind="preference", metadata={"n": 1}
        )
        bob = await bank.remember("Bob lives in Rome", namespace=("user-2",))
        moved = await bank.remember("Ada lives in Berlin", namespace=NS, key="home")

        # the key's timeline: the newer record closed the older one
        closed = await bank.get(home.id)
        assert closed is not None and closed.valid_to == moved.valid_from
        assert moved.valid_to is None
        hits = await bank.search("where does Ada live", namespace=NS)
        assert hits[0].record.id == moved.id
        assert home.id not in {h.record.id for h in hits}
        past = await bank.search("Ada lives", namespace=NS, include_past=True)
        assert {h.record.id for h in past} >= {home.id, moved.id}
        then = await bank.search("Ada lives", namespace=NS, as_of=home.valid_from)
        assert [h.record.id for h in then] == [home.id]
        assert [h.record.id for h in await bank.search("Rome", namespace=("user-2",))] == [bob.id]
        assert not await bank.search("Rome", namespace=NS)  # another namespace's record

        # revisions
        fixed = await bank.update(tea.id, text="Ada loves jasmine tea")
        assert fixed.revision == 2 and fixed.metadata == {"n": 1}
        relabelled = await bank.update(tea.id, metadata={"n": 2})
        assert (relabelled.revision, relabelled.text) == (3, "Ada loves jasmine tea")
        texts = [r.text for r in await bank.revisions(tea.id)]
        assert texts == ["Ada likes green tea", "Ada loves jasmine tea", "Ada loves jasmine tea"]
        assert [h.record.id for h in await bank.search("jasmine", namespace=NS)] == [tea.id]
        assert not await bank.search("green", namespace=NS)  # an old revision is not searched
        assert await bank.search("jasmine", namespace=NS, where={"n": 1}) == []

        # listing: the namespace and under it, past records too, in pages
        listed = [r.id for r in await bank.list(NS)]
        assert listed == [home.id, tea.id, moved.id]
        first = await bank.list(NS, limit=2)
        rest = await bank.list(NS, limit=2, after=first[-1].id)
        assert [r.id for r in first + rest] == listed
        assert [r.id for r in await bank.list(NS, kinds=["preference"])] == [tea.id]

        # forgetting
        assert await bank.forget(moved.id) is True
        assert await bank.forget(moved.id) is False
        assert await bank.get(moved.id) is None and await bank.revisions(moved.id) == []
        assert moved.id not in {h.record.id for h in await bank.search("Berlin", namespace=NS)}
        assert await bank.forget_namespace(NS) == 2
        assert await bank.list(NS) == []
        assert [r.id for r in await bank.list(("user-2",))] == [bob.id]

    _with_bank(bank_url, how, body)


def test_ttl_and_prune(bank_url: str, clock: list[int]) -> None:
    hour = 3600 * 1_000_000

    async def body(bank: MemoryBank) -> None:
        brief = await bank.remember("a passing thought about kites", namespace=NS, ttl=60)
        clock[0] = -2 * hour  # recorded two hours ago
        old = await bank.remember("an old note about kites", namespace=NS)
        clock[0] = 0
        kept = await bank.remember("a fresh note about kites", namespace=NS)
        assert len(await bank.search("kites", namespace=NS)) == 3

        clock[0] = 120 * 1_000_000  # the ttl ran out
        assert await bank.get(brief.id) is None
        assert [h.record.id for h in await bank.search("kites", namespace=NS)] == [
            kept.id,
            old.id,
        ]
        assert await bank._backend.latest([brief.id]) == []  # swept from the database
        assert await bank.prune(timedelta(hours=1)) == 1
        assert await bank.get(old.id) is None
        assert [r.id for r in await bank.list(NS)] == [kept.id]

    _with_bank(bank_url, "url", body)


def test_remember_is_idempotent_by_id_and_jobs_complete_once(bank_url: str) -> None:
    async def body(bank: MemoryBank) -> None:
        backend = bank._backend
        row = bank.new_row("the meeting is on Tuesday", namespace=NS, key="meeting")
        (first,) = await backend.insert([row]) or []
        again = await backend.insert([row]) or []
        assert again == [first]
        assert len(await bank.list(NS)) == 1

        await bank.add_job(Job("job-1", NS, b'["m1"]'))
        await bank.add_job(Job("job-1", NS, b'["other"]'))  # stored once
        await bank.add_job(Job("job-2", (*NS, "sub"), b'["m2"]'))
        assert [(j.id, j.payload) for j in await bank.pending_jobs()] == [
            ("job-1", b'["m1"]'),
            ("job-2", b'["m2"]'),
        ]
        done = await bank.complete_job("job-1", [bank.new_row("Tuesday at ten", namespace=NS)])
        assert done is not None and done[0].text == "Tuesday at ten"
        late = await bank.complete_job("job-1", [bank.new_row("written twice", namespace=NS)])
        assert late is None
        assert not await bank.search("twice", namespace=NS)
        assert [j.id for j in await bank.pending_jobs()] == ["job-2"]
        await backend.drop_job("job-2")
        assert await bank.pending_jobs() == []

        # two records of one key in one write: the first is closed by the second
        a = bank.new_row("meeting moved to Wednesday", namespace=NS, key="meeting")
        b = bank.new_row("meeting moved to Thursday", namespace=NS, key="meeting")
        stored = await backend.insert([a, b]) or []
        assert stored[0].valid_to == stored[1].valid_from and stored[1].valid_to is None
        current = [r for r in await bank.list(NS) if r.key == "meeting" and r.valid_to is None]
        assert [r.id for r in current] == [b.id]

    _with_bank(bank_url, "store", body)


def test_change_log_is_an_indexed_range_read(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    _with_bank(f"sqlite:///{path}", "url", lambda b: b.remember("x", namespace=NS))
    with sqlite3.connect(path) as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {SQLITE_BANK.changes}", {"after": 0}).fetchall()
    assert "USING INTEGER PRIMARY KEY (rowid>?)" in str(plan)


def test_postgres_change_log_is_an_indexed_range_read(pg_schema: str) -> None:
    import psycopg

    from framework_agents.stores.postgres import PostgresBankBackend

    url = f"{PG_URL}?schema={pg_schema}"
    _with_bank(url, "url", lambda b: b.remember("x", namespace=NS))
    statement = PostgresBankBackend(PG_URL, schema=pg_schema)._sql.changes
    with psycopg.connect(PG_URL) as conn:
        conn.execute("SET enable_seqscan = off")  # a tiny table: ask what the index allows
        plan = conn.execute(f"EXPLAIN {statement}", {"after": 0}).fetchall()
    assert "Index" in str(plan) and "fa_bank_changes_pkey" in str(plan)


# -- forgetting leaves no byte behind (SQLite) ------------------------------------------


def _embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, float(t.count("e"))] for t in texts]


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.name) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.mark.parametrize("how", ["forget", "forget_namespace", "prune", "ttl"])
def test_sqlite_forgetting_leaves_no_byte_of_the_text(
    tmp_path: Path, how: str, clock: list[int]
) -> None:
    canary = f"CANARY{uuid.uuid4().hex}"
    root = tmp_path / "db"
    url = f"sqlite:///{root}/bank.db"
    ns = ("user-7",) if how != "forget_namespace" else ("user-7", "diary")
    ttl = 60 if how == "ttl" else None

    async def body() -> None:
        async with MemoryBank(url, embedder=_embed) as bank:
            for i in range(40):  # neighbours on the same pages, before and after
                await bank.remember(f"filler {i} " + "y" * 300, namespace=("other",))
            if how == "prune":
                clock[0] = -2 * 3600 * 1_000_000
            first = await bank.remember(
                f"{canary} first", namespace=ns, key="k", metadata={"note": canary}, ttl=ttl
            )
            await bank.update(first.id, text=f"{canary} second")
            await bank.update(first.id, text=f"{canary} third " + canary * 400)  # overflow pages
            newer = await bank.remember(f"the newer {canary}", namespace=ns, key="k", ttl=ttl)
            await bank.add_job(Job("job-1", ns, json.dumps([canary]).encode()))
            extracted: list[str] = []
            if how != "forget_namespace":
                done = await bank.complete_job(
                    "job-1", [bank.new_row(f"extracted {canary}", namespace=ns, ttl=ttl)]
                )
                extracted = [r.id for r in done or []]
            clock[0] = 0
            for i in range(40, 80):
                await bank.remember(f"filler {i} " + "z" * 300, namespace=("other",))
            assert len(await bank.search(canary, namespace=ns, include_past=True)) >= 2
            assert _files_holding(root, canary.encode())  # the scan does see it

            if how == "forget":
                for record_id in (first.id, newer.id, *extracted):
                    assert await bank.forget(record_id)
            elif how == "forget_namespace":
                assert await bank.forget_namespace(ns[:1]) == 2
            elif how == "prune":
                assert await bank.prune(timedelta(hours=1)) == 3
            else:
                clock[0] = 120 * 1_000_000
                assert await bank.search(canary, namespace=ns, include_past=True) == []
            assert await bank.search(canary, namespace=ns, include_past=True) == []
            assert len(await bank.list(("other",), limit=1000)) == 80
            assert _files_holding(root, canary.encode()) == []  # while open: WAL included

    asyncio.run(body())
    files = sorted(p.name for p in root.iterdir())
    assert "bank.db" in files
    assert _files_holding(root, canary.encode()) == []


# -- errors -------------------------------------------------------------------------------


def _corrupt(url: str, path: Path | None, schema: str | None, sql: str) -> Any:
    """Run ``sql`` on the bank's tables behind its back; what it returns (one row)."""
    if path is not None:
        with sqlite3.connect(path) as conn:
            return conn.execute(sql.replace("{s}.", "")).fetchone()
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        cur = conn.execute(sql.replace("{s}.", f'"{schema}".'))
        return cur.fetchone() if cur.description else None


@pytest.mark.parametrize(
    "bad",
    [b'{"id": "x"}', b"not json", b'{"truncated": '],
    ids=["wrong-shape", "not-json", "truncated"],
)
def test_a_wrongly_shaped_stored_row_is_memory_corrupt_and_left_as_it_is(
    bank_url: str, tmp_path: Path, bad: bytes
) -> None:
    path = tmp_path / "bank.db" if bank_url.startswith("sqlite") else None
    schema = None if path is not None else bank_url.rsplit("=", 1)[1]
    record = _with_bank(bank_url, "url", lambda b: b.remember("kept as it is", namespace=NS))
    hexed = bad.hex()
    literal = f"X'{hexed}'" if path is not None else f"'\\x{hexed}'::bytea"
    _corrupt(bank_url, path, schema, f"UPDATE {{s}}.fa_bank_revisions SET body = {literal}")

    async def reads(bank: MemoryBank) -> list[str]:
        codes = []
        for read in (
            lambda: bank.get(record.id),
            lambda: bank.revisions(record.id),
            lambda: bank.search("kept", namespace=NS),
        ):
            with pytest.raises(AgentError) as info:
                await read()
            codes.append(info.value.code)
        return codes

    assert _with_bank(bank_url, "url", reads) == ["MEMORY_CORRUPT"] * 3
    (body,) = _corrupt(bank_url, path, schema, "SELECT body FROM {s}.fa_bank_revisions")
    assert bytes(body) == bad


def test_a_job_of_the_wrong_shape_is_memory_corrupt(bank_url: str, tmp_path: Path) -> None:
    path = tmp_path / "bank.db" if bank_url.startswith("sqlite") else None
    schema = None if path is not None else bank_url.rsplit("=", 1)[1]
    _with_bank(bank_url, "url", lambda b: b.add_job(Job("j", NS, b"[]")))
    _corrupt(bank_url, path, schema, "UPDATE {s}.fa_bank_jobs SET namespace = '[\"\"]'")

    async def read(bank: MemoryBank) -> str:
        with pytest.raises(AgentError) as info:
            await bank.pending_jobs()
        return info.value.code

    assert _with_bank(bank_url, "url", read) == "MEMORY_CORRUPT"


def test_unreachable_postgres_is_backend_unavailable() -> None:
    pytest.importorskip("psycopg")
    bank = MemoryBank("postgresql://user:s3cret@127.0.0.1:1/db")
    assert _code(bank.remember("x", namespace=NS)) == "BACKEND_UNAVAILABLE"
    asyncio.run(bank.close())


def test_a_sqlite_file_that_is_no_database_is_storage_io(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    path.write_bytes(b"this is not a SQLite database, not at all" * 100)
    bank = MemoryBank(f"sqlite:///{path}")
    assert _code(bank.remember("x", namespace=NS)) == "STORAGE_IO"
    asyncio.run(bank.close())


# -- processes ------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_share_one_bank(bank_url: str) -> None:
    """Two processes remember and search at once: nothing lost, nothing twice, one current."""
    count = 40
    ctx = multiprocessing.get_context("spawn")
    a_end, b_end = ctx.Pipe()
    procs, reports = [], []
    for who, peer in (("ann", a_end), ("bob", b_end)):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=share_worker, args=(child, bank_url, who, count, peer))
        proc.start()
        child.close()
        procs.append(proc)
        reports.append(parent)
    try:
        results = []
        for proc, report in zip(procs, reports, strict=True):
            assert report.poll(180), f"process {proc.pid} did not answer"
            results.append(report.recv())
            proc.join(30)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert [r[0] for r in results] == ["ok", "ok"], results
    remembered = results[0][1]["mine"] + results[1][1]["mine"]

    async def check(bank: MemoryBank) -> None:
        hits = await bank.search(WORD, namespace=("shared",), k=1000)
        assert sorted(h.record.id for h in hits) == sorted(remembered)
        listed = await bank.list(("shared",), limit=1000)
        assert len(listed) == len({r.id for r in listed}) == 4 * count
        keyed = [r for r in listed if r.key == "colour"]
        assert len(keyed) == 2 * count
        assert len([r for r in keyed if r.valid_to is None]) == 1
        # the timeline is whole: each closed record ends where the next one starts
        ordered = sorted(keyed, key=lambda r: (r.valid_from, r.id))
        for before, after in itertools.pairwise(ordered):
            assert before.valid_to == after.valid_from
        changes = await bank._backend.changes(0)
        assert [seq for seq, _ in changes] == list(range(1, len(changes) + 1))

    _with_bank(bank_url, "url", check)


def test_unknown_ids_and_empty_calls(bank_url: str) -> None:
    async def body(bank: MemoryBank) -> None:
        backend = bank._backend
        assert await backend.latest([]) == [] and await backend.delete([]) == 0
        assert await backend.latest([new_record_id()]) == []
        assert await backend.revisions(new_record_id()) == []
        assert await backend.changes(0) == []
        assert await bank.get(new_record_id()) is None
        with pytest.raises(AgentError) as info:
            await bank.update(new_record_id(), text="x")
        assert info.value.code == "MEMORY_NOT_FOUND"
        assert "fa_bank" not in repr(backend) and "Bank" in repr(backend)

    _with_bank(bank_url, "store", body)


def test_key_timelines_match_the_in_process_backend(bank_url: str) -> None:
    """Keyed records given out of order, alone and in batches: the timelines agree."""
    rng = random.Random(7)
    batches = []
    for _ in range(40):
        size = rng.choice([1, 1, 1, 2, 3])
        batch = []
        for _ in range(size):
            row = bank_module.MemoryBank().new_row(
                f"fact {rng.random()}",
                namespace=rng.choice([NS, ("user-2",)]),
                key=rng.choice(["a", "b"]),
            )
            # valid_from anywhere in a small range: ties, earlier and later than stored
            batch.append(dataclasses.replace(row, valid_from=rng.randrange(1_000, 1_030)))
        batches.append(batch)

    async def body(bank: MemoryBank) -> None:
        reference = InMemoryBankBackend()
        for batch in batches:
            stored = await bank._backend.insert(batch) or []
            assert [r.id for r in stored] == [r.id for r in await reference.insert(batch) or []]
            # what a write returns is what it stored, a closing by a later row of it included
            assert stored == await bank._backend.latest([r.id for r in batch])
        ids = [row.id for batch in batches for row in batch]
        assert await bank._backend.latest(ids) == await reference.latest(ids)
        # the records in the order they first reached the log (the order bank.list keeps)
        first = [
            list(dict.fromkeys(i for _, i in await b.changes(0)))
            for b in (bank._backend, reference)
        ]
        assert first[0] == first[1]

    _with_bank(bank_url, "store", body)
