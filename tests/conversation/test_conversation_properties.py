"""Properties of every manager over random histories (calls, results, orphans, pins)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_agents import (
    Message,
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    is_well_formed,
    repair_history,
)
from framework_agents.conversation._cut import pinned_end
from property_budget import examples

PROPS = settings(
    max_examples=examples(150),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _is_subsequence(part: list[str], whole: list[str]) -> bool:
    it = iter(whole)
    return all(x in it for x in part)


def _check_common(inp: list[Message], before: list[Message], out: list[Message], pin: int) -> int:
    """Well formed, input untouched, pins kept, order kept; returns the pinned count."""
    assert inp == before, "the input was mutated"
    assert is_well_formed(out)
    repaired = repair_history(inp)
    pinned = pinned_end(repaired, pin)
    assert out[:pinned] == repaired[:pinned], "a pinned message was lost or moved"
    if is_well_formed(inp):
        assert out[: min(pin, len(inp))] == inp[: min(pin, len(inp))]
    known = {m.id for m in inp}
    made = [m for m in out if m.id not in known]
    assert all(m.kind in ("summary", "interrupted") for m in made)
    assert _is_subsequence([m.id for m in out if m.id in known], [m.id for m in inp])
    return pinned


def _draw(data: st.DataObject, history_strategy: Any) -> tuple[list[Message], list[Message]]:
    well_formed = data.draw(st.booleans(), label="well_formed")
    history: list[Message] = data.draw(history_strategy(well_formed=well_formed, max_groups=16))
    return history, [m.model_copy(deep=True) for m in history]


@PROPS
@given(data=st.data())
def test_null_manager(history_strategy: Any, data: st.DataObject) -> None:
    history, before = _draw(data, history_strategy)
    manager = NullConversationManager()
    for method in (manager.apply, manager.before_model, manager.reduce):
        out = asyncio.run(method(history))
        _check_common(history, before, out, 0)
        assert out == repair_history(history)


@PROPS
@given(
    data=st.data(),
    window=st.integers(1, 12),
    pin=st.integers(0, 5),
    per_turn=st.booleans(),
)
def test_sliding_window(
    history_strategy: Any, data: st.DataObject, window: int, pin: int, per_turn: bool
) -> None:
    history, before = _draw(data, history_strategy)
    manager = SlidingWindowConversationManager(window_size=window, pin_first=pin, per_turn=per_turn)
    repaired = repair_history(history)
    unpinned = len(repaired) - pinned_end(repaired, pin)

    for name in ("apply", "before_model", "reduce"):
        out = asyncio.run(getattr(manager, name)(history))
        pinned = _check_common(history, before, out, pin)
        kept = out[pinned:]
        rest = repaired[pinned:]
        newest = next((m for m in reversed(repaired) if m.role == "user"), None)
        if newest is not None:  # what the user said last is never cut
            assert any(m.id == newest.id for m in out), "the newest user turn was cut"
        if kept and newest is not None and kept[0].id == newest.id:
            kept = kept[1:]  # the newest user turn may be spared ahead of the window
        assert kept == rest[len(rest) - len(kept) :], "the unpinned part is not a suffix"
        if name == "before_model" and not per_turn:
            assert out == repaired
            continue
        assert len(kept) <= window
        head = out[pinned:]  # what follows the pins opens on no dangling turn once cut
        if len(head) < len(rest) and head:
            assert head[0].role != "tool"
            assert not (head[0].tool_calls and not head[0].text.strip())
        if name == "reduce":
            assert len(kept) <= unpinned // 2
        else:
            assert asyncio.run(manager.apply(out)) == out  # idempotent


@PROPS
@given(
    data=st.data(),
    ratio=st.floats(-0.5, 1.5, allow_nan=False),
    preserve=st.integers(0, 8),
    pin=st.integers(0, 5),
    max_messages=st.none() | st.integers(1, 20),
)
def test_summarizing(
    history_strategy: Any,
    data: st.DataObject,
    ratio: float,
    preserve: int,
    pin: int,
    max_messages: int | None,
) -> None:
    history, before = _draw(data, history_strategy)
    manager = SummarizingConversationManager(
        summary_ratio=ratio, preserve_recent=preserve, pin_first=pin, max_messages=max_messages
    )
    repaired = repair_history(history)

    out = asyncio.run(manager.reduce(history))
    pinned = _check_common(history, before, out, pin)
    rest = repaired[pinned:]
    made = [m for m in out if m.kind == "summary" and m not in repaired]
    if made:
        (summary,) = made
        assert out[pinned] is summary
        assert summary.role == "assistant"
        assert manager.last_summary == summary.text
        assert summary.text.startswith(manager.summary_prefix)
        tail = out[pinned + 1 :]
        assert tail == rest[len(rest) - len(tail) :]
        assert len(tail) >= min(preserve, len(rest))  # the newest preserve_recent untouched
        assert len(out) <= len(repaired)
    else:
        assert out == repaired

    assert asyncio.run(manager.before_model(history)) == repaired

    applied = asyncio.run(manager.apply(history))
    _check_common(history, before, applied, pin)
    if max_messages is None or len(repaired) <= max_messages:
        assert applied == repaired
    elif len(applied) > max_messages:
        # Over the bound only when nothing more can be condensed.
        assert len(asyncio.run(manager.reduce(applied))) >= len(applied)
