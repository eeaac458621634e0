"""The bank's two clocks against a plain model of API.md, over random streams of calls.

The model is a list of dicts, one a record, with the rules of "Long-term memory:
MemoryBank" written the simplest way: a record with a key, placed among the records of
its key and namespace by ``valid_from`` (then id), closes the one before it if that one
still holds when it starts, and ends where the one after it starts; ``update`` changes
the text and adds a revision, never the times; ``forget`` removes the record (the ones it
closed stay closed); a search sees the records of the namespace and those under it that
hold now, or at ``as_of``, or all with ``include_past``. Every record's text holds the
word "shared", so a search for it with a large ``k`` must return exactly the visible set.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_agents.bank import MemoryBank, MemoryRecord
from property_budget import examples

_NAMESPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("ab",), ("c",)]
_KEYS = [None, "city", "drink"]
_OPS = ["remember"] * 4 + ["update", "forget", "search", "search", "list"]
#: Backdated records start at T0 + n minutes (n < 20): before every record of "now".
_T0 = datetime(2025, 1, 1, tzinfo=UTC)
_MINUTE = timedelta(minutes=1)
_TICK = timedelta(microseconds=1)
#: The strategies, built once (a strategy built per draw costs more than the bank's work).
_STEPS = st.integers(1, 30)
_OP = st.sampled_from(_OPS)
_NAMESPACE = st.sampled_from(_NAMESPACES)
_KEY = st.sampled_from(_KEYS)
_BACKDATED = st.none() | st.integers(0, 19)
_WHEN = st.sampled_from(["now", "past", "as_of"])
_BANK = st.integers(0, 1)


def _pick(data: st.DataObject, items: list[Any], label: str) -> Any:
    """One of ``items`` (an index drawn: cheaper than a strategy over the items)."""
    return items[data.draw(st.integers(0, len(items) - 1), label=label)]


@dataclass
class _Model:
    """The records of the bank, oldest first, as plain dicts."""

    records: list[dict[str, Any]] = field(default_factory=list)

    def remember(
        self, record_id: str, ns: tuple[str, ...], key: str | None, text: str, valid_from: datetime
    ) -> dict[str, Any]:
        new: dict[str, Any] = {"id": record_id, "ns": ns, "key": key, "text": text}
        new.update(revision=1, valid_from=valid_from, valid_to=None)
        if key is not None:
            place = (valid_from, record_id)
            same = [r for r in self.records if r["ns"] == ns and r["key"] == key]
            before = [r for r in same if (r["valid_from"], r["id"]) < place]
            after = [r for r in same if (r["valid_from"], r["id"]) > place]
            if before:
                last = max(before, key=lambda r: (r["valid_from"], r["id"]))
                if last["valid_to"] is None or last["valid_to"] > valid_from:
                    last["valid_to"] = valid_from
            if after:
                new["valid_to"] = min(after, key=lambda r: (r["valid_from"], r["id"]))["valid_from"]
        self.records.append(new)
        return new

    def find(self, record_id: str) -> dict[str, Any] | None:
        return next((r for r in self.records if r["id"] == record_id), None)

    def visible(self, ns: tuple[str, ...], moment: datetime | None) -> list[dict[str, Any]]:
        """The records of ``ns`` and under it holding at ``moment`` (``None``: all)."""
        return [
            r
            for r in self.records
            if r["ns"][: len(ns)] == ns
            and (
                moment is None
                or (r["valid_from"] <= moment and (r["valid_to"] is None or moment < r["valid_to"]))
            )
        ]


def _same(record: MemoryRecord | None, expected: dict[str, Any]) -> None:
    assert record is not None, expected
    got = (record.text, record.revision, record.valid_from, record.valid_to, record.namespace)
    assert got == (
        expected["text"],
        expected["revision"],
        expected["valid_from"],
        expected["valid_to"],
        expected["ns"],
    )
    assert record.key == expected["key"]


async def _play(banks: list[MemoryBank], data: st.DataObject) -> None:
    model = _Model()
    gone: list[str] = ["f" * 32]
    for step in range(data.draw(_STEPS, label="steps")):
        bank = banks[data.draw(_BANK, label="bank")] if len(banks) > 1 else banks[0]
        op = data.draw(_OP, label="op")
        if op == "remember" or (op == "update" and not model.records):
            ns = data.draw(_NAMESPACE, label="namespace")
            key = data.draw(_KEY, label="key")
            minutes = data.draw(_BACKDATED, label="backdated")
            valid_from = None if minutes is None else _T0 + minutes * _MINUTE
            text = f"shared note {step}"
            rec = await bank.remember(text, namespace=ns, key=key, valid_from=valid_from)
            if valid_from is not None:
                assert rec.valid_from == valid_from
            expected = model.remember(rec.id, ns, key, text, rec.valid_from)
            _same(rec, expected)
        elif op == "update":
            target = _pick(data, model.records, "updated")
            text = f"shared fixed {step}"
            rec = await bank.update(target["id"], text=text)
            target["text"], target["revision"] = text, target["revision"] + 1
            _same(rec, target)
        elif op == "forget":
            choices = [r["id"] for r in model.records] + gone
            record_id = _pick(data, choices, "forgotten")
            known = model.find(record_id)
            assert await bank.forget(record_id) is (known is not None)
            if known is not None:
                model.records.remove(known)
                gone.append(record_id)
        elif op == "search":
            ns = data.draw(_NAMESPACE, label="searched")
            moments = [_T0 + n * _MINUTE for n in range(0, 21, 3)]
            for r in model.records:
                moments += [r["valid_from"], r["valid_from"] - _TICK]
            when = data.draw(_WHEN, label="when")
            if when == "as_of":
                moment: datetime | None = _pick(data, moments, "as_of")
                hits = await bank.search("shared", namespace=ns, k=1000, as_of=moment)
            elif when == "past":
                moment = None
                hits = await bank.search("shared", namespace=ns, k=1000, include_past=True)
            else:
                moment = datetime.now(UTC)
                hits = await bank.search("shared", namespace=ns, k=1000)
            want = {r["id"] for r in model.visible(ns, moment)}
            assert {h.record.id for h in hits} == want, (when, moment)
            assert len(hits) == len(want)
            for hit in hits:
                _same(hit.record, model.find(hit.record.id) or {})
        else:
            ns = data.draw(_NAMESPACE, label="listed")
            listed = await bank.list(ns, limit=1000)
            assert [r.id for r in listed] == [r["id"] for r in model.visible(ns, None)]
    for expected in model.records:
        reader = banks[-1]
        _same(await reader.get(expected["id"]), expected)
        assert len(await reader.revisions(expected["id"])) == expected["revision"]
    for record_id in gone:
        assert await banks[0].get(record_id) is None


_QUIET = [HealthCheck.too_slow]


@settings(max_examples=examples(100), deadline=None, suppress_health_check=_QUIET)
@given(data=st.data())
def test_in_process_bank_follows_the_model(data: st.DataObject) -> None:
    async def main() -> None:
        async with MemoryBank() as bank:
            await _play([bank], data)

    asyncio.run(main())


@settings(max_examples=12, deadline=None, suppress_health_check=_QUIET)
@given(data=st.data())
def test_directory_bank_follows_the_model(data: st.DataObject) -> None:
    """Two banks on one directory (two processes' worth of indexes), the calls spread."""

    async def main(directory: str) -> None:
        async with MemoryBank(directory) as one, MemoryBank(directory) as two:
            await _play([one, two], data)

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(main(directory))
