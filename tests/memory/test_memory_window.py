"""Windowing shared by the memory backends, checked against its definition."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import InvalidArgumentError, Message, ToolCall
from framework_agents.history import group_bounds, is_well_formed, trim_dangling
from framework_agents.memory._window import (
    LoopLocks,
    bounded_view,
    check_max_messages,
    check_messages,
    window,
)
from property_budget import examples

HistoryStrategy = Callable[..., st.SearchStrategy[list[Message]]]


def reference_window(messages: Sequence[Message], max_messages: int) -> list[Message]:
    """The definition: first group start leaving <= max_messages, then trim_dangling."""
    if len(messages) <= max_messages:
        return list(messages)
    for start, _ in group_bounds(messages):
        if len(messages) - start <= max_messages:
            return trim_dangling(messages[start:])
    return []


@settings(max_examples=examples(400), deadline=None)
@given(data=st.data(), max_messages=st.integers(1, 20))
def test_window_matches_its_definition(
    history_strategy: HistoryStrategy, data: st.DataObject, max_messages: int
) -> None:
    history = data.draw(history_strategy(well_formed=False))
    assert window(history, max_messages) == reference_window(history, max_messages)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data(), max_messages=st.integers(1, 20))
def test_bounded_view_is_well_formed_and_bounded(
    history_strategy: HistoryStrategy, data: st.DataObject, max_messages: int
) -> None:
    history = data.draw(history_strategy(well_formed=False))
    view = bounded_view(history, max_messages)
    assert is_well_formed(view)
    assert len(view) <= max_messages
    assert not view or view[0].role != "tool"


def test_window_never_splits_a_call_from_its_results() -> None:
    calls = [ToolCall("c1", "f", {}), ToolCall("c2", "f", {})]
    history = [
        Message("user", "q"),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "r1", tool_call_id="c1", name="f"),
        Message("tool", "r2", tool_call_id="c2", name="f"),
        Message("assistant", "done"),
    ]
    # Keeping 3 would open on a tool result: the whole group goes instead.
    assert [m.text for m in window(history, 3)] == ["done"]
    # Keeping 4 would open on a call-only assistant turn: trimmed with its results.
    assert [m.text for m in window(history, 4)] == ["done"]
    assert window(history, 5) == history


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "5", None], ids=repr)
def test_check_max_messages_refuses(value: object) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        check_max_messages(value)
    assert err.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "value",
    ["text", b"bytes", Message("user", "one"), {"role": "user"}, 5, [Message("user"), "x"]],
    ids=["str", "bytes", "bare-message", "dict", "int", "mixed-list"],
)
def test_check_messages_refuses(value: object) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        check_messages(value)
    assert err.value.code == "INVALID_ARGUMENT"


def test_check_messages_accepts_any_iterable_of_messages() -> None:
    msgs = [Message("user", "a"), Message("assistant", "b")]
    assert check_messages(tuple(msgs)) == msgs
    assert check_messages(m for m in msgs) == msgs


def test_loop_locks_work_across_event_loops() -> None:
    locks = LoopLocks()

    async def contend() -> list[int]:
        order: list[int] = []

        async def task(i: int) -> None:
            async with locks.get("k"):
                order.append(i)
                await asyncio.sleep(0)
                order.append(i)

        await asyncio.gather(*(task(i) for i in range(3)))
        return order

    for _ in range(2):  # a lock bound to a finished loop must not be reused
        order = asyncio.run(contend())
        assert order == [0, 0, 1, 1, 2, 2]
