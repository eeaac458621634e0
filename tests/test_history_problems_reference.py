"""``well_formed_problems`` reports exactly what a plain reference check reports."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Message, ToolCall
from framework_agents.history import well_formed_problems
from property_budget import examples


def _reference(messages: list[Message]) -> list[str]:
    """The straightforward check: state reset at every non-tool message."""
    problems: list[str] = []
    open_calls: dict[str, ToolCall] = {}
    answered: set[str] = set()
    owner: int | None = None
    for i, msg in enumerate([*messages, None]):
        if msg is not None and msg.role == "tool":
            cid = msg.tool_call_id
            if cid is None or cid not in open_calls:
                problems.append(f"message {i}: tool result {cid!r} answers no open call")
            elif cid in answered:
                problems.append(f"message {i}: duplicate tool result for {cid!r}")
            else:
                answered.add(cid)
            continue
        problems += [
            f"call {c!r} of message {owner} unanswered before {i}"
            for c in open_calls
            if c not in answered
        ]
        if msg is None:
            break
        open_calls, answered, owner = {}, set(), i
        if msg.role == "assistant" and msg.tool_calls:
            ids = [c.id for c in msg.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate tool call ids")
            open_calls = {c.id: c for c in msg.tool_calls}
    return problems


@settings(max_examples=examples(400), deadline=None)
@given(data=st.data())
def test_problems_match_the_reference(history_strategy: Any, data: st.DataObject) -> None:
    history = data.draw(history_strategy(well_formed=False))
    assert well_formed_problems(history) == _reference(history)
