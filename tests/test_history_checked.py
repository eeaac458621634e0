"""CheckedHistory: checked once, grown by checking only what is added."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import InvalidArgumentError, Message, ToolCall
from framework_agents.history import CheckedHistory, is_well_formed, repair_history
from property_budget import examples


def _calls(ids: list[str]) -> Message:
    return Message("assistant", "", [ToolCall(i, "f") for i in ids])


def _result(call_id: str) -> Message:
    return Message("tool", "r", tool_call_id=call_id)


# Histories made of the pieces that matter for well-formedness: plain turns, tool turns,
# results (answering, orphaned, duplicated) drawn from a small id pool.
_ids = st.sampled_from(["a", "b", "c"])
_piece = st.one_of(
    st.builds(lambda t: Message("user", t), st.sampled_from(["u", "v"])),
    st.builds(lambda t: Message("assistant", t), st.sampled_from(["x", "y"])),
    st.builds(lambda ids: _calls(ids), st.lists(_ids, min_size=1, max_size=2, unique=True)),
    st.builds(_result, _ids),
)
_histories = st.lists(_piece, max_size=12)


@settings(max_examples=examples(300), deadline=None)
@given(_histories, _histories)
def test_a_checked_prefix_plus_a_repaired_tail_is_the_repair_of_the_whole(
    prefix: list[Message], tail: list[Message]
) -> None:
    # The property the incremental checks rest on: repair(good + tail) == good + repair(tail).
    good = repair_history(prefix)
    assert repair_history([*good, *tail]) == [*good, *repair_history(tail)]


@settings(max_examples=examples(300), deadline=None)
@given(_histories, _histories)
def test_extending_accepts_exactly_the_well_formed_wholes(
    prefix: list[Message], tail: list[Message]
) -> None:
    base = CheckedHistory.repaired(prefix)
    whole_ok = is_well_formed([*base, *tail])
    if whole_ok:
        grown = base.extend(tail)
        assert list(grown) == [*base, *tail] and isinstance(grown, CheckedHistory)
        assert CheckedHistory.of([*base, *tail], base) == grown
    else:
        with pytest.raises(InvalidArgumentError):
            base.extend(tail)
        with pytest.raises(InvalidArgumentError):
            CheckedHistory.of([*base, *tail], base)


def test_a_malformed_history_is_refused_with_its_problems() -> None:
    with pytest.raises(InvalidArgumentError, match="unanswered") as caught:
        CheckedHistory([Message("user", "q"), _calls(["a"]), Message("user", "again")])
    assert caught.value.code == "INVALID_ARGUMENT"
    with pytest.raises(InvalidArgumentError):
        CheckedHistory(["not a message"])  # type: ignore[list-item]


def test_a_checked_history_is_not_looked_at_again() -> None:
    checked = CheckedHistory([Message("user", "q"), _calls(["a"]), _result("a")])
    again = CheckedHistory(checked)  # shares the messages' list: nothing is checked again
    assert again == checked and again._log is checked._log
    assert CheckedHistory.repaired(checked) is checked
    assert repair_history(checked) == list(checked) and type(repair_history(checked)) is list
    assert CheckedHistory.of(checked, CheckedHistory()) is checked


def test_of_checks_everything_when_the_base_is_not_a_prefix() -> None:
    base = CheckedHistory([Message("user", "q")])
    other = [Message("user", "p"), _result("zz")]
    with pytest.raises(InvalidArgumentError):
        CheckedHistory.of(other, base)
    assert CheckedHistory.of([Message("user", "p")], base)[0].text == "p"


def test_a_checked_history_pickles_and_is_checked_again_on_load() -> None:
    checked = CheckedHistory([Message("user", "q"), Message("assistant", "a")])
    back = pickle.loads(pickle.dumps(checked))
    assert back == checked and isinstance(back, CheckedHistory)


def test_histories_grown_from_one_another_never_see_each_others_messages() -> None:
    base = CheckedHistory([Message("user", "q")])
    left = base.extend([Message("assistant", "left")])  # the newest: grows in place
    right = base.extend([Message("assistant", "right")])  # an older one: copies first
    assert [m.text for m in base] == ["q"]
    assert [m.text for m in left] == ["q", "left"]
    assert [m.text for m in right] == ["q", "right"]
    assert [m.text for m in left.extend([Message("user", "more")])] == ["q", "left", "more"]
    assert [m.text for m in right] == ["q", "right"] and len(left) == 2


def test_a_suffix_starts_on_a_group_and_keeps_only_what_it_holds_alive() -> None:
    history = CheckedHistory(
        [Message("user", f"m{i}") for i in range(10)]
        + [Message("user", "q"), _calls(["a"]), _result("a")]
    )
    with pytest.raises(InvalidArgumentError, match="cuts a tool group"):
        history.suffix(12)
    with pytest.raises(InvalidArgumentError):
        history.suffix(14)
    tail = history.suffix(10)
    assert [m.text for m in tail][:1] == ["q"] and len(tail) == 3
    assert len(tail._log) == 3  # most of the shared list was behind: it moved out
    assert history.suffix(0) is history and len(history.suffix(13)) == 0


def test_a_checked_history_is_a_sequence() -> None:
    msgs = [Message("user", "q"), _calls(["a"]), _result("a"), Message("assistant", "x")]
    checked = CheckedHistory(msgs)
    assert len(checked) == 4 and checked[0] is msgs[0] and checked[-1] is msgs[-1]
    assert checked[1:3] == msgs[1:3] and checked[::2] == msgs[::2]
    assert list(checked) == msgs and checked.to_list() == msgs
    assert checked == msgs and checked == tuple(msgs) and checked != msgs[:2]
    with pytest.raises(IndexError):
        checked[4]
    assert checked.starts(msgs) and checked.starts([*msgs, Message("user", "y")])
    assert not checked.starts(msgs[:3])


@settings(max_examples=examples(200), deadline=None)
@given(_histories, st.integers(min_value=0, max_value=12))
def test_tail_offset_finds_a_tail_and_nothing_else(messages: list[Message], cut: int) -> None:
    whole = CheckedHistory.repaired(messages)
    starts = [i for i in range(len(whole) + 1) if i == len(whole) or whole[i].role != "tool"]
    at = starts[min(cut, len(starts) - 1)]
    tail = whole.suffix(at)
    assert tail.tail_offset(whole) == at  # a window of the same list, or a copy of it
    copied = CheckedHistory(list(tail))
    assert copied.tail_offset(whole) == (at if len(copied) else len(whole))
    if len(whole):
        assert whole.extend([Message("user", "new")]).tail_offset(whole) is None
        assert tail.tail_offset(whole.suffix(len(whole))) in (None, 0)
