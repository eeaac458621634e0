"""``repair_history`` (tuned for the agent's hot path) matches a plain reference repair."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Message, ToolCall, repair_history
from framework_agents.history import INTERRUPTED_TEXT
from property_budget import examples


def reference_repair(messages: Sequence[Message]) -> list[Message]:
    """The straightforward repair: close every turn, answer its unanswered calls."""
    out: list[Message] = []
    calls: list[ToolCall] = []
    answered: set[str] = set()
    turn = ""

    def close() -> None:
        for c in calls:
            if c.id not in answered:
                out.append(
                    Message(
                        "tool",
                        INTERRUPTED_TEXT,
                        tool_call_id=c.id,
                        name=c.name,
                        id=f"interrupted-{turn}-{c.id}",
                        metadata={"kind": "interrupted"},
                    )
                )

    for msg in messages:
        if msg.role == "tool":
            cid = msg.tool_call_id
            if cid is not None and cid not in answered and any(c.id == cid for c in calls):
                answered.add(cid)
                out.append(msg)
            continue
        close()
        calls, answered = [], set()
        if msg.role == "assistant" and msg.tool_calls:
            turn = msg.id
            unique: dict[str, ToolCall] = {}
            for call in msg.tool_calls:
                unique.setdefault(call.id, call)
            if len(unique) != len(msg.tool_calls):
                msg = msg.model_copy(update={"tool_calls": list(unique.values())})
            calls = list(unique.values())
        out.append(msg)
    close()
    return out


@settings(max_examples=examples(300))
@given(data=st.data())
def test_repair_matches_the_reference(history_strategy: Any, data: Any) -> None:
    history = data.draw(history_strategy(well_formed=False))
    got = repair_history(history)
    want = reference_repair(history)
    assert got == want
    # Kept messages are the very objects given (only a deduplicated turn is a copy).
    given_ids = {id(m) for m in history}
    assert [id(m) in given_ids for m in got] == [id(m) in given_ids for m in want]


@settings(max_examples=examples(200))
@given(data=st.data())
def test_synthesised_results_never_take_an_id_in_use(history_strategy: Any, data: Any) -> None:
    # Call ids repeat across turns in these histories: every message id stays unique, so
    # a memory (which dedupes by id) keeps every synthesised result.
    history = data.draw(history_strategy(well_formed=False))
    repaired = repair_history(history)
    assert len({m.id for m in repaired}) == len(repaired)
    assert repair_history(repaired) == repaired  # idempotent


def test_a_call_id_repeated_by_a_later_turn_gets_its_own_result_id() -> None:
    def turn(msg_id: str, *call_ids: str) -> Message:
        calls = [ToolCall(c, "lookup") for c in call_ids]
        return Message("assistant", "", tool_calls=calls, id=msg_id)

    history = [turn("a1", "call_0"), Message("user", "again", id="u"), turn("a2", "call_0")]
    repaired = repair_history(history)
    assert [m.id for m in repaired] == [
        "a1",
        "interrupted-a1-call_0",
        "u",
        "a2",
        "interrupted-a2-call_0",
    ]
    assert repaired[-1].tool_call_id == "call_0"
