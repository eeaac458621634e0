"""The Anthropic mapping: turn merging must not break signed thinking.

With thinking enabled the Messages API requires the last assistant turn before the newest
tool results to START with its thinking block ("a final assistant message must start with
a thinking block"). A summary (an assistant message) right before a thinking tool turn --
what ``SummarizingConversationManager.reduce`` produces on a context overflow in the middle
of a tool loop -- must therefore not be merged into that turn. Pure mapping: no SDK call.
"""

from __future__ import annotations

from framework_agents.messages import Message, ReasoningBlock, TextBlock, ToolCall
from framework_agents.models.anthropic import OPENING_USER_TEXT, to_anthropic_messages

THINKING_TURN = Message(
    "assistant",
    [ReasoningBlock("let me look", "sig-1"), TextBlock("Checking.")],
    tool_calls=[ToolCall("t1", "lookup", {"q": "x"})],
)


def test_a_thinking_turn_after_an_assistant_turn_keeps_its_thinking_first() -> None:
    history = [
        Message("user", "hello"),
        Message(
            "assistant", "Summary of the earlier conversation: ...", metadata={"kind": "summary"}
        ),
        THINKING_TURN,
        Message("tool", "found", tool_call_id="t1", name="lookup"),
    ]
    _, turns = to_anthropic_messages(history)
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[2]["content"] == [{"type": "text", "text": OPENING_USER_TEXT}]
    final = turns[3]["content"]
    assert final[0] == {"type": "thinking", "thinking": "let me look", "signature": "sig-1"}
    assert [b["type"] for b in final] == ["thinking", "text", "tool_use"]
    assert turns[4]["content"][0]["type"] == "tool_result"


def test_assistant_turns_without_thinking_are_still_merged() -> None:
    history = [
        Message("user", "hello"),
        Message("assistant", "one"),
        Message("assistant", "two", tool_calls=[ToolCall("t1", "lookup", {})]),
        Message("tool", "found", tool_call_id="t1", name="lookup"),
    ]
    _, turns = to_anthropic_messages(history)
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["type"] for b in turns[1]["content"]] == ["text", "text", "tool_use"]
