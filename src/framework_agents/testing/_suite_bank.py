"""The store conformance suite: its tests of the memory bank (mixed into ``StoreConformance``).

Every test works on ``store.bank()``. The tests of time (key supersession, ``as_of``,
``ttl``, ``prune``) are in :mod:`._suite_bank_time`; those of several processes are
marked slow.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from ..bank import MemoryBank, MemoryRecord
from ..bank._base import Job
from ..errors import AgentError
from ..messages import Message
from ..stores._base import Store
from . import _store_workers as workers
from ._corrupt import BankCorrupter
from ._suite import (
    StoreFactory,
    error_code,
    fixed_id,
    needs,
    run_on_bank,
    run_on_store,
    spawn,
    wait_answer,
)
from ._suite_bank_time import BankTimeSuite

__all__ = ["BankSuite"]

#: Namespaces no bank may accept (INVALID_ARGUMENT).
HOSTILE_NAMESPACES: list[object] = [
    (),
    ("a",) * 9,
    ("",),
    ("a", ""),
    ("a\x00b",),
    ("a/b",),
    ("x" * 257,),
    "user-42",
    (1,),
    None,
    {"a": 1},
]


_ORDER_NS = ("user-9",)
_DAY = datetime(2026, 1, 1, tzinfo=UTC)
#: Records for the order tests: ties in words and in time, kinds, keys, turns, namespaces.
_ORDER_RECORDS: list[tuple[str, dict[str, Any]]] = [
    ("the blue boat sails at dawn", {}),
    ("the blue boat", {"valid_from": _DAY + timedelta(days=1)}),
    ("the blue boat", {"valid_from": _DAY + timedelta(days=2)}),
    ("the blue boat", {"valid_from": _DAY + timedelta(days=2)}),
    ("a red boat and a blue car", {"kind": "preference"}),
    ("boats are blue", {"key": "colour", "valid_from": _DAY}),
    ("boats are red now", {"key": "colour", "valid_from": _DAY + timedelta(days=3)}),
    ("did you see the harbour?", {"kind": "episode"}),
    ("yes, the blue boat left", {"kind": "episode"}),
    ("and then it rained", {"kind": "episode"}),
    ("bleue bateau café élan", {"metadata": {"lang": "fr"}}),
    ("blue", {"namespace": (*_ORDER_NS, "deep")}),
    ("blue boat elsewhere", {"namespace": ("user-90",)}),
]
_ORDER_QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("blue boat", {}),
    ("the blue boat", {"k": 3}),
    ("boat", {"include_past": True}),
    ("boats", {"as_of": _DAY + timedelta(days=1)}),
    ("harbour", {}),
    ("cafe", {}),
    ("blue", {"kinds": ["fact", "episode"]}),
    ("blue", {"where": {"lang": "fr"}}),
    ("harbor bot", {"k": 20}),
]


def _letters(texts: list[str]) -> list[list[float]]:
    """A deterministic embedder: how often each letter a-z occurs in the text."""
    return [[float(t.lower().count(c)) + 0.01 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]


async def _same_order(bank: MemoryBank, reference: MemoryBank) -> None:
    """Load the same records (same ids) into both banks; every query ranks them alike."""
    rows = []
    for n, (text, fields) in enumerate(_ORDER_RECORDS):
        fields = {"namespace": _ORDER_NS, "valid_from": _DAY, **fields}
        rows.append(reference.new_row(text, record_id=fixed_id(1000 - n), **fields))
    for target in (reference, bank):
        await target.add_job(Job("load", _ORDER_NS, b""))
        assert await target.complete_job("load", rows) is not None
    for query, options in _ORDER_QUERIES:
        want = await reference.search(query, namespace=_ORDER_NS, **options)
        got = await bank.search(query, namespace=_ORDER_NS, **options)
        assert [(h.record.id, round(h.score, 6)) for h in got] == [
            (h.record.id, round(h.score, 6)) for h in want
        ], (query, options)
        assert [h.record for h in got] == [h.record for h in want]


class BankSuite(BankTimeSuite):
    """Conformance tests of ``store.bank()``: API.md "Long-term memory: MemoryBank"."""

    # -- records -------------------------------------------------------------------------

    def test_bank_remember_stores_a_record_get_returns_it(
        self, store_factory: StoreFactory
    ) -> None:
        """A remembered record has every field of the contract; get returns it as stored."""

        async def body(bank: MemoryBank) -> None:
            before = datetime.now(UTC) - timedelta(seconds=5)
            metadata = {"ünï": [1, 2.5, None, True, {"k": "v"}], "emoji": "\U0001f600"}
            rec = await bank.remember(
                "Ada prefers tea \U0001f375", namespace=("user-1",), metadata=metadata
            )
            assert rec.namespace == ("user-1",) and rec.text == "Ada prefers tea \U0001f375"
            assert (rec.kind, rec.key, rec.revision, rec.valid_to) == ("fact", None, 1, None)
            assert rec.metadata == metadata
            for moment in (rec.valid_from, rec.recorded_at):
                assert moment.utcoffset() == timedelta(0)
                assert before < moment < datetime.now(UTC) + timedelta(seconds=5)
            assert await bank.get(rec.id) == rec
            other = await bank.remember(
                "x", namespace=("user-1", "trips"), kind="preference", key="k1"
            )
            assert other.id != rec.id
            assert (other.kind, other.key) == ("preference", "k1")
            assert await bank.get(other.id) == other
            assert await bank.get(fixed_id(12345)) is None
            assert await bank.revisions(fixed_id(12345)) == []

        run_on_bank(store_factory, body)

    def test_bank_search_ranks_by_words_and_filters(self, store_factory: StoreFactory) -> None:
        """Search ranks the matching records (scores descending), k bounds it, filters hold."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-2",)
            tea = await bank.remember("Ada drinks green tea every morning", namespace=ns)
            await bank.remember("Ada drinks coffee at night", namespace=ns, kind="episode")
            hike = await bank.remember(
                "Ada went hiking in the Alps", namespace=ns, metadata={"topic": "travel"}
            )
            await bank.remember(
                "Grace flew to Lisbon", namespace=ns, metadata={"topic": "travel", "n": 2}
            )
            hits = await bank.search("green tea", namespace=ns)
            assert hits and hits[0].record == tea
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            drinks = [h.record.text for h in await bank.search("Ada drinks", namespace=ns)]
            assert len(drinks) == 3 and "Grace flew to Lisbon" not in drinks
            assert set(drinks[:2]) == {
                "Ada drinks green tea every morning",
                "Ada drinks coffee at night",
            }
            assert len(await bank.search("Ada", namespace=ns, k=1)) == 1
            kinds = await bank.search("Ada drinks", namespace=ns, kinds=["episode"])
            assert [h.record.kind for h in kinds] == ["episode"]
            travel = await bank.search("Ada", namespace=ns, where={"topic": "travel"})
            assert [h.record for h in travel] == [hike]
            assert await bank.search("Ada", namespace=ns, where={"topic": "work"}) == []
            assert await bank.search("zebra", namespace=ns) == []

        run_on_bank(store_factory, body)

    def test_bank_namespaces_cover_children_never_siblings(
        self, store_factory: StoreFactory
    ) -> None:
        """search, list and forget_namespace cover a namespace and those under it, only."""

        async def body(bank: MemoryBank) -> None:
            texts = {
                ("u1",): "shared word in u1",
                ("u1", "trips"): "shared word in u1 trips",
                ("u1", "trips", "2026"): "shared word in u1 trips 2026",
                ("u10",): "shared word in u10",
                ("u1x", "trips"): "shared word in u1x trips",
                ("u2", "u1"): "shared word in u2 u1",
                ("trips",): "shared word in trips",
            }
            for ns, text in texts.items():
                await bank.remember(text, namespace=ns)

            async def found(ns: tuple[str, ...]) -> set[str]:
                hits = await bank.search("shared word", namespace=ns, k=100)
                listed = {r.text for r in await bank.list(ns)}
                assert {h.record.text for h in hits} == listed
                return listed

            u1 = {texts[("u1",)], texts[("u1", "trips")], texts[("u1", "trips", "2026")]}
            assert await found(("u1",)) == u1
            assert await found(("u1", "trips")) == u1 - {texts[("u1",)]}
            assert await found(("u1", "trips", "2026")) == {texts[("u1", "trips", "2026")]}
            assert await found(("u2",)) == {texts[("u2", "u1")]}
            assert await found(("u1", "nothing")) == set()
            assert await bank.forget_namespace(("u1",)) == 3
            assert await found(("u1",)) == set()
            for ns in (("u10",), ("u1x",), ("u2",), ("trips",)):
                assert len(await found(ns)) == 1, ns
            assert await bank.forget_namespace(("u1",)) == 0

        run_on_bank(store_factory, body)

    def test_bank_update_makes_revisions(self, store_factory: StoreFactory) -> None:
        """Update appends a revision (revision + 1, same id); search sees the latest only."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-3",)
            first = await bank.remember("Ada lives in Londno", namespace=ns, metadata={"v": 1})
            second = await bank.update(first.id, text="Ada lives in London")
            assert (second.id, second.revision, second.metadata) == (first.id, 2, {"v": 1})
            assert (second.valid_from, second.valid_to) == (first.valid_from, first.valid_to)
            assert second.recorded_at >= first.recorded_at
            third = await bank.update(first.id, metadata={"v": 3})
            assert (third.revision, third.text, third.metadata) == (3, second.text, {"v": 3})
            assert await bank.get(first.id) == third
            assert await bank.revisions(first.id) == [first, second, third]
            assert [h.record for h in await bank.search("London", namespace=ns)] == [third]
            assert await bank.search("Londno", namespace=ns) == []
            assert await bank.list(ns) == [third]
            unknown = fixed_id(77)
            assert await error_code(lambda: bank.update(unknown, text="x"))() == "MEMORY_NOT_FOUND"

        run_on_bank(store_factory, body)

    def test_bank_list_pages_oldest_first(self, store_factory: StoreFactory) -> None:
        """List returns records oldest first; ``after`` continues; filters hold."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-4",)
            made = [
                await bank.remember(
                    f"note {i}",
                    namespace=ns if i % 3 else (*ns, "sub"),
                    kind="episode" if i % 2 else "fact",
                    metadata={"even": i % 2 == 0},
                )
                for i in range(8)
            ]
            await bank.remember("elsewhere", namespace=("user-40",))
            pages: list[MemoryRecord] = []
            after = None
            for _ in range(4):
                page = await bank.list(ns, limit=3, after=after)
                assert len(page) <= 3
                pages.extend(page)
                if not page:
                    break
                after = page[-1].id
            assert pages == made
            assert await bank.list(ns, after=made[-1].id) == []
            assert await bank.list(ns, kinds=["episode"]) == made[1::2]
            assert await bank.list(ns, where={"even": True}) == made[0::2]
            assert await bank.list((*ns, "sub")) == made[0::3]
            code = await error_code(lambda: bank.list(ns, after=fixed_id(99)))()
            assert code == "INVALID_ARGUMENT"

        run_on_bank(store_factory, body)

    def test_bank_forget_removes_every_revision(self, store_factory: StoreFactory) -> None:
        """Forget removes a record with its revisions, for every bank of the store."""

        async def body(store: Store) -> None:
            bank, other = store.bank(), store.bank()
            ns = ("user-5",)
            rec = await bank.remember("the secret is plum", namespace=ns)
            await bank.update(rec.id, text="the secret is pear")
            kept = await bank.remember("the weather is fine", namespace=ns)
            assert [h.record.id for h in await other.search("secret", namespace=ns)] == [rec.id]
            assert await bank.forget(rec.id) is True
            assert await bank.forget(rec.id) is False
            for reader in (bank, other):
                assert await reader.get(rec.id) is None
                assert await reader.revisions(rec.id) == []
                assert await reader.search("secret pear plum", namespace=ns) == []
                assert await reader.list(ns) == [kept]
            assert await error_code(lambda: bank.update(rec.id, text="x"))() == "MEMORY_NOT_FOUND"

        run_on_store(store_factory, body)

    def test_bank_banks_of_one_store_share_it(self, store_factory: StoreFactory) -> None:
        """A search sees every record another bank of the store remembered before it."""

        async def body(store: Store) -> None:
            writer, reader = store.bank(), store.bank()
            ns = ("shared",)
            assert await reader.search("apple", namespace=ns) == []  # its index is built
            rec = await writer.remember("apple pie recipe", namespace=ns)
            assert [h.record for h in await reader.search("apple", namespace=ns)] == [rec]
            changed = await writer.update(rec.id, text="cherry pie recipe")
            assert await reader.search("apple", namespace=ns) == []
            assert [h.record for h in await reader.search("cherry", namespace=ns)] == [changed]
            assert await reader.list(ns) == [changed]

        run_on_store(store_factory, body)

    def test_bank_remember_messages_is_idempotent(self, store_factory: StoreFactory) -> None:
        """Each user and assistant message with text is one episode, stored once by id."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-6", "chat")
            messages = [
                Message("system", "be brief", id="s0"),
                Message("user", "where is the key?", id="m0"),
                Message("assistant", "under the mat", id="m1"),
                Message("tool", "42", tool_call_id="c1", name="f", id="t0"),
                Message("user", "  ", id="m2"),
                Message("assistant", "also in the drawer", id="m3"),
            ]
            first = await bank.remember_messages(messages, namespace=ns)
            assert [r.text for r in first] == [
                "where is the key?",
                "under the mat",
                "also in the drawer",
            ]
            for rec, (mid, role) in zip(
                first, [("m0", "user"), ("m1", "assistant"), ("m3", "assistant")], strict=True
            ):
                assert rec.kind == "episode" and rec.namespace == ns
                assert rec.metadata == {"message_id": mid, "role": role}
            again = await bank.remember_messages(messages[1:3], namespace=ns)
            assert again == first[:2]
            more = [*messages, Message("user", "thanks", id="m4")]
            third = await bank.remember_messages(more, namespace=ns)
            assert third[:3] == first and third[3].text == "thanks"
            assert [r.id for r in await bank.list(ns)] == [r.id for r in third]
            assert len(await bank.search("key mat drawer thanks", namespace=ns, k=50)) == 4
            elsewhere = await bank.remember_messages(messages[1:2], namespace=("user-7",))
            assert elsewhere[0].id != first[0].id  # one message, two namespaces: two records
            assert await bank.remember_messages([], namespace=ns) == []

        run_on_bank(store_factory, body)

    def test_bank_extraction_jobs_complete_once(self, store_factory: StoreFactory) -> None:
        """A pending job completes once with its records; forget_namespace drops its jobs."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-8",)
            await bank.add_job(Job("job-1", ns, b'{"m": 1}'))
            await bank.add_job(Job("job-1", ns, b"ignored: the id is stored"))
            await bank.add_job(Job("job-2", (*ns, "sub"), b"2"))
            await bank.add_job(Job("job-3", ("user-80",), b"3"))
            assert [(j.id, j.payload) for j in await bank.pending_jobs()] == [
                ("job-1", b'{"m": 1}'),
                ("job-2", b"2"),
                ("job-3", b"3"),
            ]
            row = bank.new_row("Ada is left-handed", namespace=ns, record_id=fixed_id(1))
            done = await bank.complete_job("job-1", [row])
            assert done is not None and [r.id for r in done] == [fixed_id(1)]
            assert await bank.complete_job("job-1", [row]) is None
            assert [r.id for r in await bank.list(ns)] == [fixed_id(1)]
            assert await bank.forget_namespace(ns) == 1
            assert [j.id for j in await bank.pending_jobs()] == ["job-3"]
            assert await bank.complete_job("job-2", [row]) is None
            assert await bank.list(ns) == []

        run_on_bank(store_factory, body)

    # -- determinism ---------------------------------------------------------------------

    def test_bank_search_order_is_the_in_process_order(self, store_factory: StoreFactory) -> None:
        """The same records give the same hits and scores as ``MemoryBank()`` in this process.

        Ties go to the newer ``valid_from``, then to the smaller id.
        """

        async def body(store: Store) -> None:
            bank = store.bank()
            await _same_order(bank, MemoryBank())
            ties = [h.record.id for h in await bank.search("the blue boat", namespace=_ORDER_NS)]
            assert ties[:3] == [fixed_id(997), fixed_id(998), fixed_id(999)]

        run_on_store(store_factory, body)

    def test_bank_search_by_meaning_order_is_the_in_process_order(
        self, store_factory: StoreFactory
    ) -> None:
        """With an embedder (vectors stored with the records) too: the in-process order."""
        needs(importlib.util.find_spec("numpy") is not None, "numpy (the embeddings extra)")

        async def body(store: Store) -> None:
            bank = store.bank(embedder=_letters)
            await _same_order(bank, MemoryBank(embedder=_letters))
            by_meaning = await bank.search("harbor bot", namespace=_ORDER_NS)
            assert by_meaning  # no word in common: found by meaning alone

        run_on_store(store_factory, body)

    # -- bad input -----------------------------------------------------------------------

    def test_bank_refuses_bad_arguments(self, store_factory: StoreFactory) -> None:
        """Bad namespaces, k, limits, metadata, datetimes and ttls: INVALID_ARGUMENT."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-10",)
            naive = datetime(2026, 1, 1)
            loose: Any = bank  # called with what its signature refuses
            remember, search, listing = loose.remember, loose.search, loose.list
            calls: list[Callable[[], Any]] = []
            for bad_ns in HOSTILE_NAMESPACES:
                calls += [
                    partial(remember, "x", namespace=bad_ns),
                    partial(search, "x", namespace=bad_ns),
                    partial(listing, bad_ns),
                    partial(loose.forget_namespace, bad_ns),
                    partial(loose.remember_messages, [Message("user", "x")], namespace=bad_ns),
                ]
            for bad_k in (0, -1, 1001, True, 2.5, "8", None):
                calls += [
                    partial(search, "x", namespace=ns, k=bad_k),
                    partial(listing, ns, limit=bad_k),
                ]
            for bad_meta in ([1], "x", {"a": float("nan")}, {"a": object()}, {1: {2, 3}}):
                calls += [
                    partial(remember, "x", namespace=ns, metadata=bad_meta),
                    partial(search, "x", namespace=ns, where=bad_meta),
                    partial(listing, ns, where=bad_meta),
                ]
            for bad_ttl in (0, -1, float("nan"), float("inf"), "60", timedelta(0)):
                calls.append(partial(remember, "x", namespace=ns, ttl=bad_ttl))
            calls += [
                partial(remember, "x", namespace=ns, valid_from=naive),
                partial(remember, "x", namespace=ns, valid_from="2026-01-01T00:00:00Z"),
                partial(search, "x", namespace=ns, as_of=naive),
                partial(search, "x", namespace=ns, include_past="yes"),
                partial(search, b"x", namespace=ns),
                partial(remember, "", namespace=ns),
                partial(remember, "   ", namespace=ns),
                partial(remember, "x" * 100_001, namespace=ns),
                partial(remember, "x", namespace=ns, kind=""),
                partial(remember, "x", namespace=ns, key=""),
                partial(loose.remember_messages, Message("user", "x"), namespace=ns),
                partial(loose.get, ""),
                partial(loose.forget, ""),
                partial(loose.update, "", text="x"),
                partial(loose.prune, timedelta(days=-1)),
                partial(loose.prune, 3600),
            ]
            for call in calls:
                assert await error_code(call)() == "INVALID_ARGUMENT", call
            for bad_id in ("", "abc", "x" * 40, "A" * 32, 7):
                with pytest.raises(AgentError) as info:
                    bank.new_row("x", namespace=ns, record_id=bad_id)
                assert info.value.code == "INVALID_ARGUMENT"
            assert await bank.list(ns) == []  # nothing was written
            edge = ("x" * 256, *("p",) * 7)
            rec = await bank.remember("at the limits", namespace=edge, ttl=0.5e9)
            assert [r.id for r in await bank.list(edge)] == [rec.id]

        run_on_bank(store_factory, body)

    def test_bank_huge_and_stop_word_queries_answer(self, store_factory: StoreFactory) -> None:
        """A 1 MB query and one made only of stop words answer promptly (a list)."""

        async def body(bank: MemoryBank) -> None:
            ns = ("user-11",)
            for i in range(50):
                await bank.remember(f"note {i} about the harbour and boats", namespace=ns)
            huge = " ".join(f"w{i}" for i in range(200_000))[:1_000_000] + " harbour"
            for query in (huge, "the and of a to in is it", "", "   ", "!?"):
                start = time.monotonic()
                hits = await asyncio.wait_for(bank.search(query, namespace=ns), 30)
                assert isinstance(hits, list)
                assert time.monotonic() - start < 30

        run_on_bank(store_factory, body)

    def test_bank_corrupt_record_is_reported_and_left(self, store_factory: StoreFactory) -> None:
        """A stored record of the wrong shape: MEMORY_CORRUPT on every read, never skipped."""
        corrupter = store_factory.corrupter
        needs(isinstance(corrupter, BankCorrupter), "a corrupter of bank records (BankCorrupter)")
        assert isinstance(corrupter, BankCorrupter)
        ns = ("user-12",)

        async def write(bank: MemoryBank) -> str:
            await bank.remember("a sound record", namespace=ns)
            rec = await bank.remember("a record to corrupt", namespace=ns)
            await corrupter.corrupt_bank_record(rec.id)
            return rec.id

        record_id = run_on_bank(store_factory, write)

        async def read(bank: MemoryBank) -> None:
            for _ in range(2):  # left as it is: the second read finds it corrupt again
                assert await error_code(lambda: bank.get(record_id))() == "MEMORY_CORRUPT"
                assert await error_code(lambda: bank.revisions(record_id))() == "MEMORY_CORRUPT"
                code = await error_code(lambda: bank.search("record", namespace=ns))()
                assert code == "MEMORY_CORRUPT"

        run_on_bank(store_factory, read)

    # -- several processes (slow) ----------------------------------------------------------

    @pytest.mark.slow
    def test_bank_processes_remembering_lose_nothing(self, store_factory: StoreFactory) -> None:
        """Three processes remember into one bank at once, all on one key: nothing lost.

        Every record is stored once; the key's timeline is whole (each record ends where
        the next begins) and exactly one record holds now.
        """
        needs(store_factory.cross_process, "cross-process sharing")
        count = 15
        procs = [
            spawn(workers.bank_worker, store_factory.open, ("shared",), f"p{i}", count)
            for i in range(3)
        ]
        for proc, conn in procs:
            assert (got := wait_answer(conn, proc)) == ("ok", count), got
            proc.join(30)

        async def body(bank: MemoryBank) -> None:
            ns = ("shared",)
            texts = sorted(f"p{i} note {j}" for i in range(3) for j in range(count))
            assert sorted(r.text for r in await bank.list(ns, limit=1000)) == texts
            hits = await bank.search("note", namespace=ns, k=1000, include_past=True)
            assert sorted(h.record.text for h in hits) == texts
            timeline = sorted((h.record for h in hits), key=lambda r: (r.valid_from, r.id))
            for record, following in itertools.pairwise(timeline):
                assert record.valid_to == following.valid_from
            assert timeline[-1].valid_to is None
            assert [h.record for h in await bank.search("note", namespace=ns, k=1000)] == [
                timeline[-1]
            ]

        run_on_bank(store_factory, body)

    @pytest.mark.slow
    def test_bank_search_sees_what_another_process_remembered(
        self, store_factory: StoreFactory
    ) -> None:
        """A bank whose index was built sees the records a process wrote since, and forgot."""
        needs(store_factory.cross_process, "cross-process sharing")
        ns = ("seen",)

        async def body(bank: MemoryBank) -> None:
            kept = await bank.remember("an orange note", namespace=ns)
            assert len(await bank.search("note", namespace=ns)) == 1
            proc, conn = spawn(workers.bank_worker, store_factory.open, ns, "child", 4)
            assert (got := await asyncio.to_thread(wait_answer, conn, proc)) == ("ok", 4), got
            proc.join(30)
            hits = await bank.search("note", namespace=ns, k=100, include_past=True)
            assert len(hits) == 5
            proc, conn = spawn(workers.bank_forget_worker, store_factory.open, ns)
            assert (got := await asyncio.to_thread(wait_answer, conn, proc)) == ("ok", 5), got
            proc.join(30)
            assert await bank.search("note", namespace=ns, include_past=True) == []
            assert await bank.get(kept.id) is None

        run_on_bank(store_factory, body)
