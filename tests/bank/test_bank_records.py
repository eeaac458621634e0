"""The rules every bank backend shares: the key timeline and the stored shape of a record."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from framework_agents.bank._records import (
    Row,
    from_micros,
    place_on_timeline,
    row_from_json,
    row_to_json,
    to_micros,
)
from framework_agents.errors import AgentError, InvalidArgumentError, MemoryCorruptError


def _row(n: int, valid_from: int, valid_to: int | None = None, **fields: Any) -> Row:
    """Record ``n`` of key ``k`` (ids order like ``n``)."""
    values: dict[str, Any] = {
        "id": f"{n:032x}",
        "revision": 1,
        "namespace": ("u",),
        "kind": "fact",
        "key": "k",
        "text": f"value {n}",
        "metadata": {},
        "valid_from": valid_from,
        "valid_to": valid_to,
        "recorded_at": 1_000,
        **fields,
    }
    return Row(**values)


# -- place_on_timeline -------------------------------------------------------------------


def test_first_record_of_a_key_holds_and_closes_nothing() -> None:
    placed, closings = place_on_timeline([], _row(1, 100))
    assert (placed.valid_to, closings) == (None, [])


def test_newer_record_closes_the_current_one_where_it_starts() -> None:
    placed, closings = place_on_timeline([_row(1, 100)], _row(2, 200))
    assert (placed.valid_to, closings) == (None, [(f"{1:032x}", 200)])


def test_backdated_record_goes_between_its_neighbours() -> None:
    siblings = [_row(1, 100, 300), _row(3, 300)]
    placed, closings = place_on_timeline(siblings, _row(2, 200))
    assert placed.valid_to == 300
    assert closings == [(f"{1:032x}", 200)]


def test_record_older_than_every_other_ends_where_the_first_starts() -> None:
    placed, closings = place_on_timeline([_row(1, 100, 300), _row(3, 300)], _row(2, 50))
    assert (placed.valid_to, closings) == (100, [])


def test_same_valid_from_is_ordered_by_id() -> None:
    smaller, larger = _row(1, 100), _row(2, 100)
    placed, closings = place_on_timeline([larger], smaller)
    assert (placed.valid_to, closings) == (100, [])  # before the larger id: an empty span
    placed, closings = place_on_timeline([smaller], larger)
    assert (placed.valid_to, closings) == (None, [(smaller.id, 100)])


def test_record_already_ending_where_the_new_one_starts_is_not_touched() -> None:
    placed, closings = place_on_timeline([_row(1, 100, 200)], _row(2, 200))
    assert (placed.valid_to, closings) == (None, [])


def test_record_closed_by_a_forgotten_one_stays_closed_where_it_was() -> None:
    """Record 1 was closed at 200 by a record forgotten since: a record at 300 leaves it."""
    placed, closings = place_on_timeline([_row(1, 100, 200)], _row(3, 300))
    assert (placed.valid_to, closings) == (None, [])


def test_record_closed_by_a_forgotten_one_is_closed_earlier_by_a_backdated_one() -> None:
    placed, closings = place_on_timeline([_row(1, 100, 200)], _row(3, 150))
    assert (placed.valid_to, closings) == (None, [(f"{1:032x}", 150)])


def test_the_new_record_itself_among_the_siblings_is_ignored() -> None:
    new = _row(2, 200)
    placed, closings = place_on_timeline([_row(1, 100), replace(new, valid_to=5)], new)
    assert (placed.valid_to, closings) == (None, [(f"{1:032x}", 200)])


# -- the stored shape ----------------------------------------------------------------------


def test_row_round_trips_through_its_stored_form() -> None:
    row = _row(7, 100, 200, metadata={"ü": [1, None]}, expires_at=5_000, key=None)
    vector = b"\x00\x00\x80?" * 3
    assert row_from_json(row_to_json(row), vector) == replace(row, vector=vector)
    assert row_from_json(row_to_json(row)) == row


_GOOD = row_to_json(_row(1, 100))


def _spoiled(**changes: Any) -> dict[str, Any]:
    return {**_GOOD, **changes}


_CORRUPT: list[Any] = [
    pytest.param([], id="not-an-object"),
    pytest.param("{}", id="a-string"),
    pytest.param({k: v for k, v in _GOOD.items() if k != "text"}, id="missing-field"),
    pytest.param(_spoiled(extra=1), id="unknown-field"),
    pytest.param(_spoiled(id=""), id="empty-id"),
    pytest.param(_spoiled(id=5), id="id-not-string"),
    pytest.param(_spoiled(revision=0), id="revision-zero"),
    pytest.param(_spoiled(revision=True), id="revision-bool"),
    pytest.param(_spoiled(revision="1"), id="revision-string"),
    pytest.param(_spoiled(namespace=[]), id="namespace-empty"),
    pytest.param(_spoiled(namespace="u"), id="namespace-string"),
    pytest.param(_spoiled(namespace=["a/b"]), id="namespace-slash"),
    pytest.param(_spoiled(namespace=["a"] * 9), id="namespace-too-deep"),
    pytest.param(_spoiled(kind=3), id="kind-not-string"),
    pytest.param(_spoiled(key=["k"]), id="key-not-string"),
    pytest.param(_spoiled(text=None), id="text-null"),
    pytest.param(_spoiled(metadata=[1]), id="metadata-list"),
    pytest.param(_spoiled(valid_from=1.5), id="valid-from-float"),
    pytest.param(_spoiled(valid_from=None), id="valid-from-null"),
    pytest.param(_spoiled(valid_from=False), id="valid-from-bool"),
    pytest.param(_spoiled(valid_to="2026"), id="valid-to-string"),
    pytest.param(_spoiled(recorded_at=None), id="recorded-at-null"),
    pytest.param(_spoiled(expires_at="soon"), id="expires-at-string"),
]


@pytest.mark.parametrize("data", _CORRUPT)
def test_stored_record_of_the_wrong_shape_is_memory_corrupt(data: Any) -> None:
    with pytest.raises(MemoryCorruptError) as info:
        row_from_json(data, where="records/x.json")
    assert info.value.code == "MEMORY_CORRUPT"
    assert "records/x.json" in str(info.value)


def test_vector_of_the_wrong_type_is_memory_corrupt() -> None:
    with pytest.raises(MemoryCorruptError):
        row_from_json(_GOOD, "not bytes")  # type: ignore[arg-type]


# -- the clock ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 5, 21, 37, 35, 123456, tzinfo=UTC),
        datetime(2026, 12, 5, 23, 37, 35, 1, tzinfo=timezone(timedelta(hours=2))),
        datetime(1960, 2, 29, tzinfo=UTC),
    ],
    ids=["epoch", "utc", "offset", "before-epoch"],
)
def test_micros_round_trip_exactly(moment: datetime) -> None:
    assert from_micros(to_micros(moment, "t")) == moment
    assert from_micros(to_micros(moment, "t")).utcoffset() == timedelta(0)


@pytest.mark.parametrize("moment", [datetime(2026, 1, 1), "2026-01-01", 0], ids=str)
def test_naive_or_non_datetime_moment_is_refused(moment: Any) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        to_micros(moment, "as_of")
    assert isinstance(info.value, AgentError) and info.value.code == "INVALID_ARGUMENT"
