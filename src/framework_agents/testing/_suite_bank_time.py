"""The store conformance suite: the memory bank's two clocks, expiry and pruning (a mixin).

``valid_from``/``valid_to`` (when a record holds in the world) are set explicitly in the
past, so these tests do not depend on how fast the backend is; the ``ttl`` tests move the
bank's clock past a record's expiry (a slow machine cannot expire a record early, and no
test sleeps for it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from ..bank import MemoryBank, MemoryRecord
from ..bank import bank as bank_module
from ..bank._records import to_micros
from ..stores._base import Store
from ._suite import StoreFactory, error_code, run_on_bank, run_on_store

__all__ = ["BankTimeSuite"]


async def _texts(
    bank: MemoryBank, query: str, namespace: tuple[str, ...], **options: Any
) -> set[str]:
    hits = await bank.search(query, namespace=namespace, k=100, **options)
    return {h.record.text for h in hits}


class _Clock:
    """The bank's clock, moved forward on demand (the wall clock plus what was skipped)."""

    def __init__(self, now: Any) -> None:
        self._now = now
        self.skipped_us = 0

    def __call__(self) -> int:
        return int(self._now()) + self.skipped_us

    def past(self, record: MemoryRecord, ttl: float) -> None:
        """Move the clock just past ``record``'s expiry (``ttl`` seconds after it)."""
        expiry = to_micros(record.recorded_at, "recorded_at") + round(ttl * 1_000_000)
        self.skipped_us += max(0, expiry - self()) + 1000


@contextlib.contextmanager
def _moved_clock() -> Iterator[_Clock]:
    """The bank's clock, which the body may move past a record's expiry."""
    clock = _Clock(bank_module._now)
    with mock.patch.object(bank_module, "_now", clock):
        yield clock


class BankTimeSuite:
    """Conformance tests of ``store.bank()``'s time: keys, ``as_of``, ``ttl``, ``prune``."""

    def test_bank_key_closes_the_record_it_supersedes(self, store_factory: StoreFactory) -> None:
        """A record with a key closes the current one of its key and namespace, only.

        The closed record stays for ``as_of`` and ``include_past``; a backdated record is
        placed on the key's timeline between the records around it.
        """

        async def body(bank: MemoryBank) -> None:
            ns = ("user-20",)
            day0 = datetime.now(UTC).replace(microsecond=0) - timedelta(days=10)
            london = await bank.remember(
                "Ada lives in London", namespace=ns, key="city", valid_from=day0
            )
            paris = await bank.remember(
                "Ada lives in Paris", namespace=ns, key="city", valid_from=day0 + timedelta(5)
            )
            assert paris.valid_to is None and paris.valid_from == day0 + timedelta(5)
            closed = await bank.get(london.id)
            assert closed is not None and closed.valid_to == paris.valid_from
            assert closed.revision == 1 and closed.text == london.text
            assert await _texts(bank, "Ada lives", ns) == {"Ada lives in Paris"}
            assert await _texts(bank, "Ada lives", ns, as_of=day0 + timedelta(1)) == {
                "Ada lives in London"
            }
            assert await _texts(bank, "Ada", ns, as_of=paris.valid_from) == {"Ada lives in Paris"}
            assert await _texts(bank, "Ada", ns, as_of=day0 - timedelta(1)) == set()
            both = {"Ada lives in London", "Ada lives in Paris"}
            assert await _texts(bank, "Ada lives", ns, include_past=True) == both
            assert {r.text for r in await bank.list(ns)} == both

            # the same key elsewhere, or no key, closes nothing here
            await bank.remember("Ada lives in Oslo", namespace=("user-21",), key="city")
            await bank.remember("Ada lives in Bonn", namespace=(*ns, "sub"), key="city")
            await bank.remember("Ada lives in Rome too", namespace=ns)
            still = await bank.get(paris.id)
            assert still is not None and still.valid_to is None

            # backdated: between London and Paris
            lyon = await bank.remember(
                "Ada lives in Lyon", namespace=ns, key="city", valid_from=day0 + timedelta(2)
            )
            assert lyon.valid_to == paris.valid_from
            moved = await bank.get(london.id)
            assert moved is not None and moved.valid_to == lyon.valid_from
            assert await _texts(bank, "Lyon London Paris", ns, as_of=day0 + timedelta(3)) == {
                "Ada lives in Lyon"
            }

            # a correction keeps the record's place in the world
            fixed = await bank.update(lyon.id, text="Ada lives in Lyon, France")
            assert (fixed.valid_from, fixed.valid_to) == (lyon.valid_from, lyon.valid_to)

        run_on_bank(store_factory, body)

    def test_bank_forgotten_successor_leaves_its_predecessor_closed(
        self, store_factory: StoreFactory
    ) -> None:
        """Forgetting the record that closed another does not reopen it, nor does a later one.

        A record never comes to hold at a moment it did not hold before: remembering a
        newer record of the key only closes a record that still holds.
        """

        async def body(bank: MemoryBank) -> None:
            ns = ("user-22",)
            day0 = datetime.now(UTC).replace(microsecond=0) - timedelta(days=10)
            first = await bank.remember("tea", namespace=ns, key="drink", valid_from=day0)
            second = await bank.remember(
                "coffee", namespace=ns, key="drink", valid_from=day0 + timedelta(3)
            )
            assert await bank.forget(second.id)
            after_forget = await bank.get(first.id)
            assert after_forget is not None and after_forget.valid_to == second.valid_from
            third = await bank.remember(
                "water", namespace=ns, key="drink", valid_from=day0 + timedelta(6)
            )
            assert third.valid_to is None
            kept = await bank.get(first.id)
            assert kept is not None and kept.valid_to == second.valid_from
            assert await _texts(bank, "tea water", ns, as_of=day0 + timedelta(4)) == set()
            assert await _texts(bank, "tea water", ns) == {"water"}

        run_on_bank(store_factory, body)

    def test_bank_ttl_expires_records(self, store_factory: StoreFactory) -> None:
        """A record past its ttl is gone for every read, in every bank of the store."""

        async def body(store: Store) -> None:
            with _moved_clock() as clock:
                await expire(store, clock)

        async def expire(store: Store, clock: _Clock) -> None:
            bank, other = store.bank(), store.bank()
            ns = ("user-23",)
            brief = await bank.remember("a brief apple", namespace=ns, ttl=60)
            lasting = await bank.remember("a lasting apple", namespace=ns, ttl=3600)
            plain = await bank.remember("a plain apple", namespace=ns)
            assert await bank.get(brief.id) == brief
            assert await _texts(other, "apple", ns) == {
                "a brief apple",
                "a lasting apple",
                "a plain apple",
            }
            clock.past(brief, 60)
            for reader in (bank, other):
                assert await reader.get(brief.id) is None
                assert await reader.revisions(brief.id) == []
                assert await _texts(reader, "apple", ns, include_past=True) == {
                    "a lasting apple",
                    "a plain apple",
                }
                assert await reader.list(ns) == [lasting, plain]
            assert await error_code(lambda: bank.update(brief.id, text="x"))() == "MEMORY_NOT_FOUND"
            assert await _texts(store.bank(), "apple", ns) == {"a lasting apple", "a plain apple"}

        run_on_store(store_factory, body)

    def test_bank_prune_removes_old_and_expired_records(self, store_factory: StoreFactory) -> None:
        """Prune removes what stopped holding or was recorded before the cut, and what expired."""

        async def body(bank: MemoryBank) -> None:
            with _moved_clock() as clock:
                await prune(bank, clock)

        async def prune(bank: MemoryBank, clock: _Clock) -> None:
            ns = ("user-24",)
            now = datetime.now(UTC)
            old = await bank.remember(
                "old value", namespace=ns, key="k", valid_from=now - timedelta(days=3)
            )
            new = await bank.remember(
                "new value", namespace=ns, key="k", valid_from=now - timedelta(days=2)
            )
            plain = await bank.remember("plain value", namespace=ns)
            assert await bank.prune(timedelta(days=1)) == 1
            assert await bank.get(old.id) is None and await bank.revisions(old.id) == []
            assert await _texts(bank, "value", ns, include_past=True) == {
                "new value",
                "plain value",
            }
            assert await bank.prune(timedelta(days=1)) == 0
            brief = await bank.remember("brief value", namespace=ns, ttl=60)
            clock.past(brief, 60)
            assert await bank.prune(timedelta(days=365)) == 1
            assert await bank.list(ns) == [new, plain]
            assert await bank.prune(timedelta(0)) == 2
            assert await bank.list(ns) == []

        run_on_bank(store_factory, body)
