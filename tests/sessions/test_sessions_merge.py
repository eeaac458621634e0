"""Merging a session save another writer beat (``sessions._merge``): by id, state by key."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework_agents import Message
from framework_agents.errors import CheckpointConflictError
from framework_agents.sessions._merge import merge_messages, merge_state


def _msgs(ids: list[str]) -> list[Message]:
    return [Message("user", f"text {i}", id=i) for i in ids]


def test_the_savers_additions_follow_the_stored_messages() -> None:
    base = ["m1", "m2"]
    ours = _msgs([*base, "a1", "a2"])
    theirs = _msgs([*base, "b1", "b2"])
    merged = merge_messages(ours, set(base), theirs)
    assert [m.id for m in merged] == ["m1", "m2", "b1", "b2", "a1", "a2"]
    assert merged[:4] == theirs  # the stored history, extended: its save appends


def test_a_message_the_saver_edited_keeps_the_edit() -> None:
    ours = [Message("user", "edited", id="m1"), *_msgs(["a1"])]
    merged = merge_messages(ours, {"m1"}, _msgs(["m1", "b1"]))
    assert [(m.id, m.text) for m in merged] == [
        ("m1", "edited"),
        ("b1", "text b1"),
        ("a1", "text a1"),
    ]


def test_what_the_saver_dropped_from_its_base_stays_gone() -> None:
    # The saver's window cut m1: the stored m1 is in its base, so it is not brought back.
    merged = merge_messages(_msgs(["m2", "a1"]), {"m1", "m2"}, _msgs(["m1", "m2", "b1"]))
    assert [m.id for m in merged] == ["m2", "b1", "a1"]


def test_nothing_stored_keeps_the_savers_messages() -> None:
    ours = _msgs(["a"])
    assert merge_messages(ours, set(), None) == ours
    assert merge_messages(ours, {"x"}, []) == ours


@given(
    st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=6),
    st.lists(st.sampled_from("klmnop"), unique=True, max_size=4),
    st.lists(st.sampled_from("qrstuv"), unique=True, max_size=4),
    st.integers(0, 6),
)
def test_merge_loses_no_turn_and_repeats_none(
    base: list[str], mine: list[str], other: list[str], cut: int
) -> None:
    ours = _msgs([*base[cut:], *mine])  # the saver may have cut the front of its base
    theirs = _msgs([*base, *other])
    merged = [m.id for m in merge_messages(ours, set(base), theirs)]
    assert len(merged) == len(set(merged))
    assert merged == [*base[cut:], *other, *mine]  # every turn of both, each in its order
    assert set(base[:cut]).isdisjoint(merged)


def test_state_keys_changed_by_one_writer_each_merge() -> None:
    base = {"n": 1, "gone": True, "same": 0}
    ours = {"n": 1, "mine": "a", "same": 5}
    theirs = {"n": 2, "gone": True, "same": 5, "theirs": "b"}
    merged = merge_state(ours, base, theirs, where="s")
    assert merged == {"n": 2, "mine": "a", "same": 5, "theirs": "b"}


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [({"k": 1}, {"k": 2}), ({}, {"k": 2}), ({"k": 1}, {}), ({"k": [1]}, {"k": [2]})],
)
def test_a_key_both_changed_is_a_conflict(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    with pytest.raises(CheckpointConflictError, match="'k'"):
        merge_state(ours, {"k": 0}, theirs, where="session 's'")


def test_a_value_of_another_type_is_a_change() -> None:
    with pytest.raises(CheckpointConflictError):
        merge_state({"k": True}, {"k": 0}, {"k": 1}, where="s")


def test_an_absent_state_keeps_the_stored_one() -> None:
    assert merge_state(None, {"k": 0}, {"k": 1}, where="s") == {"k": 1}
    assert merge_state(None, None, None, where="s") is None
