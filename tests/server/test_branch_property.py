"""Property: a branch cut at any message of any history is well formed and a prefix of it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Message, ToolCall
from framework_agents.history import is_well_formed
from framework_agents.server._edits import branch_history
from property_budget import examples


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Histories of user turns, answers and tool-call turns (some left unanswered)."""
    messages: list[Message] = []
    for turn in range(draw(st.integers(0, 6))):
        messages.append(Message(role="user", content=f"q{turn}"))
        for step in range(draw(st.integers(0, 2))):
            calls = [
                ToolCall(f"c{turn}-{step}-{k}", "t", {"k": k})
                for k in range(draw(st.integers(1, 3)))
            ]
            messages.append(Message(role="assistant", tool_calls=calls))
            picked = draw(st.lists(st.integers(0, len(calls) - 1), unique=True))
            answered = [calls[i] for i in picked] if draw(st.booleans()) else calls
            for call in answered:
                messages.append(Message(role="tool", content="r", tool_call_id=call.id, name="t"))
        if draw(st.booleans()):
            messages.append(Message(role="assistant", content=f"a{turn}"))
    return messages


@settings(max_examples=examples(200), deadline=None)
@given(histories(), st.data())
def test_a_branch_is_well_formed_and_keeps_what_came_before(
    messages: list[Message], data: st.DataObject
) -> None:
    if not messages:
        return
    index = data.draw(st.integers(0, len(messages) - 1))
    branch = branch_history(messages, index)
    assert is_well_formed(branch)
    kept = [m.id for m in branch if m.id in {x.id for x in messages}]
    original = [m.id for m in messages]
    assert kept == [i for i in original if i in set(kept)]  # original order
    assert messages[index].id in kept  # the message branched at is in the branch
    before = {m.id for m in messages[:index] if m.role != "tool"}
    assert before <= set(kept)  # nothing said before it is lost (only orphan results may go)
    positions = {m.id: i for i, m in enumerate(messages)}
    assert all(positions[i] <= index or messages[positions[i]].role == "tool" for i in kept)
    again = branch_history(branch, len(branch) - 1)
    assert [m.id for m in again] == [m.id for m in branch]  # a branch of a branch: the same
