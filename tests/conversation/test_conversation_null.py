"""NullConversationManager: keeps everything, in new lists."""

from __future__ import annotations

import asyncio

from framework_agents import (
    ConversationManager,
    Message,
    NullConversationManager,
    ToolCall,
    is_well_formed,
)


def _history() -> list[Message]:
    return [
        Message("system", "be brief"),
        Message("user", "hi"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})]),
        Message("tool", "1", tool_call_id="c1", name="f"),
        Message("assistant", "done"),
    ] * 20


def test_is_a_conversation_manager() -> None:
    assert isinstance(NullConversationManager(), ConversationManager)
    assert repr(NullConversationManager()) == "NullConversationManager()"


def test_keeps_everything_in_new_lists() -> None:
    manager = NullConversationManager()
    history = _history()
    for method in (manager.apply, manager.before_model, manager.reduce):
        out = asyncio.run(method(history))
        assert out == history
        assert out is not history
        assert all(a is b for a, b in zip(out, history, strict=True))


def test_repairs_a_malformed_history() -> None:
    history = [
        Message("tool", "orphan", tool_call_id="zz", name="f"),
        Message("user", "hi"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})]),
    ]
    out = asyncio.run(NullConversationManager().apply(history))
    assert is_well_formed(out)
    assert [m.role for m in out] == ["user", "assistant", "tool"]
    assert out[-1].kind == "interrupted"
    assert len(history) == 3  # input untouched
