"""Well-formedness, repair and trimming of histories (``framework_agents.history``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_agents import Message, ToolCall, is_well_formed, repair_history, trim_dangling
from framework_agents.history import INTERRUPTED_TEXT, group_bounds, well_formed_problems
from property_budget import examples

PROPS = settings(
    max_examples=examples(200),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def user(text: str = "hi") -> Message:
    return Message("user", text)


def calls(*ids: str, text: str = "") -> Message:
    return Message("assistant", text, tool_calls=[ToolCall(i, "lookup", {"q": i}) for i in ids])


def result(call_id: str | None, text: str = "done") -> Message:
    return Message("tool", text, tool_call_id=call_id, name="lookup")


def answer(text: str = "ok") -> Message:
    return Message("assistant", text)


# --- is_well_formed -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "ok"),
    [
        ([], True),
        ([user(), answer()], True),
        ([user(), calls("a"), result("a"), answer()], True),
        ([user(), calls("a", "b"), result("b"), result("a")], True),
        ([Message("system", "be nice"), user(), calls("a"), result("a")], True),
        ([result("a"), user()], False),
        ([user(), result("a")], False),
        ([user(), calls("a"), answer()], False),
        ([user(), calls("a")], False),
        ([user(), calls("a"), result("a"), result("a")], False),
        ([user(), calls("a", "a"), result("a")], False),
        ([user(), calls("a"), user(), result("a")], False),
        ([user(), calls("a"), result(None)], False),
        ([user(), calls("a"), result("a"), calls("b"), result("a"), result("b")], False),
    ],
    ids=[
        "empty",
        "plain",
        "call-answered",
        "results-any-order",
        "system-first",
        "orphan-head",
        "orphan-after-user",
        "unanswered-before-text",
        "unanswered-at-end",
        "duplicate-result",
        "duplicate-call-id",
        "result-after-user",
        "result-without-id",
        "result-of-previous-turn",
    ],
)
def test_is_well_formed(history: list[Message], ok: bool) -> None:
    assert is_well_formed(history) is ok
    assert (well_formed_problems(history) == []) is ok


def test_problems_name_the_message() -> None:
    problems = well_formed_problems([user(), calls("a"), answer(), result("z")])
    assert any("'a'" in p and "unanswered" in p for p in problems)
    assert any("message 3" in p and "'z'" in p for p in problems)


# --- repair_history -------------------------------------------------------------------------


def test_repair_keeps_a_well_formed_history_identical() -> None:
    history = [user(), calls("a", "b"), result("b"), result("a"), answer()]
    repaired = repair_history(history)
    assert repaired == history
    assert all(x is y for x, y in zip(repaired, history, strict=True))
    assert repaired is not history


def test_repair_answers_an_interrupted_call_after_the_results_that_arrived() -> None:
    turn = calls("a", "b")
    got_b = result("b")
    history = [user(), turn, got_b, answer("after")]
    repaired = repair_history(history)
    assert [m.role for m in repaired] == ["user", "assistant", "tool", "tool", "assistant"]
    assert repaired[2] is got_b
    synth = repaired[3]
    assert synth.tool_call_id == "a"
    assert synth.name == "lookup"
    assert synth.kind == "interrupted"
    assert synth.text == INTERRUPTED_TEXT
    assert is_well_formed(repaired)


def test_repair_answers_calls_at_the_very_end() -> None:
    repaired = repair_history([user(), calls("a")])
    assert repaired[-1].tool_call_id == "a"
    assert repaired[-1].kind == "interrupted"


def test_repair_ids_are_deterministic() -> None:
    history = [user(), calls("a")]
    assert repair_history(history)[-1].id == repair_history(history)[-1].id


@pytest.mark.parametrize(
    "bad",
    [result("ghost"), result(None), result("a")],
    ids=["orphan", "no-id", "duplicate"],
)
def test_repair_drops_results_that_answer_no_open_call(bad: Message) -> None:
    history = [user(), calls("a"), result("a"), bad, answer()]
    repaired = repair_history(history)
    assert all(m is not bad for m in repaired)
    assert len(repaired) == 4
    assert is_well_formed(repaired)


def test_repair_drops_an_orphan_at_the_head() -> None:
    head = result("x")
    repaired = repair_history([head, user()])
    assert [m.role for m in repaired] == ["user"]


def test_repair_drops_a_result_of_an_earlier_turn() -> None:
    history = [user(), calls("a"), result("a"), calls("b"), result("a"), result("b")]
    repaired = repair_history(history)
    assert [m.tool_call_id for m in repaired if m.role == "tool"] == ["a", "b"]


def test_repair_dedupes_repeated_call_ids_in_one_turn_without_mutating() -> None:
    turn = calls("a", "a", "b")
    history = [user(), turn, result("a"), result("b")]
    repaired = repair_history(history)
    assert [c.id for c in repaired[1].tool_calls] == ["a", "b"]
    assert repaired[1].id == turn.id
    assert [c.id for c in turn.tool_calls] == ["a", "a", "b"]  # input untouched
    assert is_well_formed(repaired)


def test_repair_does_not_mutate_its_input() -> None:
    history = [result("x"), user(), calls("a"), answer()]
    snapshot = [m.model_copy(deep=True) for m in history]
    repair_history(history)
    assert history == snapshot


# --- trim_dangling --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "kept_from"),
    [
        ([], 0),
        ([user(), answer()], 0),
        ([result("a"), result("b"), user()], 2),
        ([calls("a"), result("a"), user()], 2),
        ([result("z"), calls("a"), result("a"), calls("b"), result("b"), answer()], 5),
        ([calls("a", text="Checking."), result("a"), user()], 0),
        ([calls("a"), result("a")], 2),
        ([answer(), result("z")], 0),
    ],
    ids=[
        "empty",
        "clean",
        "leading-results",
        "call-only-head",
        "mixed-head",
        "call-with-text-kept",
        "all-dangling",
        "only-head-touched",
    ],
)
def test_trim_dangling(history: list[Message], kept_from: int) -> None:
    trimmed = trim_dangling(history)
    assert trimmed == history[kept_from:]
    assert trimmed is not history


# --- group_bounds ---------------------------------------------------------------------------


def test_group_bounds() -> None:
    history = [result("z"), user(), calls("a", "b"), result("a"), result("b"), answer()]
    assert group_bounds(history) == [(0, 1), (1, 2), (2, 5), (5, 6)]
    assert group_bounds([]) == []


# --- properties -----------------------------------------------------------------------------


def _synthesised(out: list[Message], inp: list[Message]) -> list[Message]:
    ids = {m.id for m in inp}
    return [m for m in out if m.id not in ids]


@PROPS
@given(data=st.data())
def test_generated_clean_histories_are_well_formed(
    history_strategy: Any, data: st.DataObject
) -> None:
    assert is_well_formed(data.draw(history_strategy(well_formed=True)))


@PROPS
@given(data=st.data())
def test_repair_properties(history_strategy: Any, data: st.DataObject) -> None:
    history: list[Message] = data.draw(history_strategy())
    before = [m.model_copy(deep=True) for m in history]
    repaired = repair_history(history)

    assert history == before  # input untouched
    assert is_well_formed(repaired)
    assert repair_history(repaired) == repaired  # idempotent
    assert repair_history(history) == repaired  # deterministic

    added = _synthesised(repaired, history)
    assert all(m.role == "tool" and m.kind == "interrupted" for m in added)
    # What is left of the input comes back in its original order ...
    kept_ids = [m.id for m in repaired if m not in added]
    input_ids = [m.id for m in history]
    it = iter(input_ids)
    assert all(i in it for i in kept_ids)
    # ... and only tool results are ever dropped.
    kept = set(kept_ids)
    assert all(m.role == "tool" for m in history if m.id not in kept)
    # A result is dropped only when it answers no open call: a well-formed input is kept whole.
    if is_well_formed(history):
        assert repaired == history


@PROPS
@given(data=st.data())
def test_repair_adds_only_for_unanswered_calls(history_strategy: Any, data: st.DataObject) -> None:
    history: list[Message] = data.draw(history_strategy())
    repaired = repair_history(history)
    # Which call ids each assistant turn of the INPUT got a result for.
    answered = {owner: {m.tool_call_id for m in group} for owner, group in _groups(history)}
    for owner, group in _groups(repaired):
        for m in group:
            if m.kind == "interrupted":
                assert m.tool_call_id not in answered[owner]
                assert m.text == INTERRUPTED_TEXT


def _groups(history: list[Message]) -> list[tuple[str, list[Message]]]:
    return [
        (history[start].id, history[start + 1 : end])
        for start, end in group_bounds(history)
        if history[start].tool_calls
    ]


@PROPS
@given(data=st.data())
def test_trim_dangling_properties(history_strategy: Any, data: st.DataObject) -> None:
    history: list[Message] = repair_history(data.draw(history_strategy()))
    trimmed = trim_dangling(history)
    assert trimmed == history[len(history) - len(trimmed) :]  # a suffix: only the head goes
    assert is_well_formed(trimmed)
    assert trim_dangling(trimmed) == trimmed
    if trimmed:
        first = trimmed[0]
        assert first.role != "tool"
        assert not (first.tool_calls and not first.text.strip())


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [None, 5, "user", Message("user", "x"), [Message("user", "x"), {"role": "user"}], [None]],
    ids=["none", "int", "str", "one-message", "dict-item", "none-item"],
)
@pytest.mark.parametrize(
    "fn",
    [repair_history, trim_dangling, is_well_formed, well_formed_problems, group_bounds],
    ids=["repair", "trim", "is_well_formed", "problems", "groups"],
)
def test_non_message_input_is_invalid_argument(fn: Any, bad: object) -> None:
    from framework_agents.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as info:
        fn(bad)
    assert info.value.code == "INVALID_ARGUMENT"


def test_any_iterable_of_messages_is_accepted() -> None:
    history = [user(), calls("a"), result("a"), answer()]
    assert repair_history(iter(history)) == history  # type: ignore[arg-type]  # any iterable
    assert repair_history(tuple(history)) == history
    assert is_well_formed(m for m in history)  # type: ignore[arg-type]  # any iterable
