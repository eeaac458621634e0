"""SlidingWindowConversationManager: pins, window, group-safe cuts, per_turn, reduce."""

from __future__ import annotations

import asyncio

import pytest

from framework_agents import (
    AgentError,
    ConversationManager,
    Message,
    SlidingWindowConversationManager,
    ToolCall,
    is_well_formed,
)


def user(text: str) -> Message:
    return Message("user", text, id=text)


def answer(text: str) -> Message:
    return Message("assistant", text, id=text)


def calls(name: str, *ids: str, text: str = "") -> Message:
    return Message("assistant", text, tool_calls=[ToolCall(i, "f", {}) for i in ids], id=name)


def result(call_id: str) -> Message:
    return Message("tool", f"result {call_id}", tool_call_id=call_id, name="f", id=f"r-{call_id}")


def chat(n: int) -> list[Message]:
    return [user(f"u{i}") if i % 2 == 0 else answer(f"a{i}") for i in range(n)]


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_defaults() -> None:
    manager = SlidingWindowConversationManager()
    assert (manager.window_size, manager.pin_first, manager.per_turn) == (40, 0, False)
    assert isinstance(manager, ConversationManager)
    assert "window_size=40" in repr(manager)


def test_short_history_is_kept_whole_in_a_new_list() -> None:
    history = chat(10)
    out = asyncio.run(SlidingWindowConversationManager(window_size=10).apply(history))
    assert out == history
    assert out is not history


def test_keeps_the_newest_window_in_order() -> None:
    history = chat(10)
    out = asyncio.run(SlidingWindowConversationManager(window_size=4).apply(history))
    assert ids(out) == ["u6", "a7", "u8", "a9"]


def test_cut_never_separates_a_call_from_its_results() -> None:
    history = [
        user("u0"),
        answer("a1"),
        user("u2"),
        calls("c", "x", "y", text="Checking."),
        result("x"),
        result("y"),
        answer("a6"),
    ]
    # The newest 3 would start at result y: the cut moves on to the next group boundary.
    # The newest user turn is never cut: it stays ahead of the window.
    out = asyncio.run(SlidingWindowConversationManager(window_size=3).apply(history))
    assert ids(out) == ["u2", "a6"]
    # With room for the whole group, it is kept with its results.
    out = asyncio.run(SlidingWindowConversationManager(window_size=4).apply(history))
    assert ids(out) == ["u2", "c", "r-x", "r-y", "a6"]
    assert is_well_formed(out)


def test_a_cut_window_is_trimmed_of_call_only_heads() -> None:
    history = [
        user("u0"),
        calls("c1", "x"),
        result("x"),
        calls("c2", "y"),
        result("y"),
        answer("a"),
    ]
    out = asyncio.run(SlidingWindowConversationManager(window_size=5).apply(history))
    assert ids(out) == ["u0", "a"]  # the trimmed heads go; the newest user turn stays
    assert is_well_formed(out)


def test_an_uncut_history_is_not_trimmed() -> None:
    history = [calls("c1", "x"), result("x"), answer("a")]
    out = asyncio.run(SlidingWindowConversationManager(window_size=5).apply(history))
    assert out == history


def test_pins_are_kept_in_front_and_never_removed() -> None:
    history = [Message("system", "rules", id="sys"), *chat(10)]
    manager = SlidingWindowConversationManager(window_size=3, pin_first=1)
    out = asyncio.run(manager.apply(history))
    assert ids(out) == ["sys", "a7", "u8", "a9"]
    out = asyncio.run(SlidingWindowConversationManager(window_size=1, pin_first=2).apply(history))
    assert ids(out) == ["sys", "u0", "u8", "a9"]  # the newest user turn is never cut


def test_pin_ending_inside_a_tool_group_extends_to_its_end() -> None:
    history = [user("u0"), calls("c", "x", "y"), result("x"), result("y"), *chat(6)]
    manager = SlidingWindowConversationManager(window_size=2, pin_first=2)
    out = asyncio.run(manager.apply(history))
    assert ids(out) == ["u0", "c", "r-x", "r-y", "u4", "a5"]
    assert is_well_formed(out)


def test_per_turn_applies_before_each_model_call() -> None:
    history = chat(10)
    off = SlidingWindowConversationManager(window_size=4)
    assert asyncio.run(off.before_model(history)) == history
    on = SlidingWindowConversationManager(window_size=4, per_turn=True)
    assert ids(asyncio.run(on.before_model(history))) == ["u6", "a7", "u8", "a9"]


def test_reduce_drops_at_least_the_oldest_half_of_the_unpinned() -> None:
    history = [Message("system", "rules", id="sys"), *chat(10)]
    manager = SlidingWindowConversationManager(pin_first=1)  # the window alone would cut nothing
    out = asyncio.run(manager.reduce(history))
    assert ids(out) == ["sys", "a5", "u6", "a7", "u8", "a9"]
    odd = asyncio.run(manager.reduce(history[:4]))  # 3 unpinned: at least 2 go
    assert ids(odd) == ["sys", "u2"]
    # Repeated reduces always make progress down to the pins and the newest user turn.
    while len(out) > 2:
        shorter = asyncio.run(manager.reduce(out))
        assert len(shorter) < len(out)
        out = shorter
    assert ids(out) == ["sys", "u8"]
    assert ids(asyncio.run(manager.reduce(out))) == ["sys", "u8"]


def test_reduce_rounds_up_to_a_group_boundary() -> None:
    history = [user("u0"), answer("a1"), calls("c", "x", "y", text="Looking."), result("x")]
    history += [result("y"), answer("a5")]
    out = asyncio.run(SlidingWindowConversationManager().reduce(history))
    # half of 6 is 3, inside the tool group (2..5): the whole group goes; the newest user
    # turn is never cut.
    assert ids(out) == ["u0", "a5"]


def test_input_is_never_mutated() -> None:
    history = [user("u0"), calls("c", "x"), result("x"), *chat(8)]
    before = [m.model_copy(deep=True) for m in history]
    manager = SlidingWindowConversationManager(window_size=3, pin_first=1, per_turn=True)
    asyncio.run(manager.apply(history))
    asyncio.run(manager.before_model(history))
    asyncio.run(manager.reduce(history))
    assert history == before


def test_malformed_input_comes_back_well_formed() -> None:
    history = [result("ghost"), user("u0"), calls("c", "x"), answer("a"), result("x")]
    out = asyncio.run(SlidingWindowConversationManager(window_size=10).apply(history))
    assert is_well_formed(out)
    assert [m.kind for m in out if m.role == "tool"] == ["interrupted"]


def test_apply_is_idempotent() -> None:
    history = [user("u0"), calls("c", "x", text="t"), result("x"), *chat(9)]
    manager = SlidingWindowConversationManager(window_size=5, pin_first=1)
    once = asyncio.run(manager.apply(history))
    assert asyncio.run(manager.apply(once)) == once


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_size": 0},
        {"window_size": -1},
        {"window_size": "40"},
        {"window_size": 4.0},
        {"window_size": True},
        {"pin_first": -2},
        {"per_turn": "yes"},
    ],
    ids=["zero", "negative", "str", "float", "bool", "negative-pin", "per-turn-str"],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(AgentError) as info:
        SlidingWindowConversationManager(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
