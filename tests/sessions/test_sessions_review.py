"""Review pass over sessions: snapshots never store an altered message, bad input is clear."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from framework_agents import (
    InMemoryStorage,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
    ToolCall,
)
from framework_agents.errors import AgentError, SnapshotCorruptError, StateNotJsonError


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


# -- messages in a snapshot must read back equal ------------------------------------------

NOT_JSON_MESSAGES = {
    "nan-metadata": Message("user", "x", metadata={"a": float("nan")}),
    "inf-metadata": Message("user", "x", metadata={"a": float("inf")}),
    "datetime-metadata": Message("user", "x", metadata={"at": datetime(2024, 1, 1, tzinfo=UTC)}),
    "set-metadata": Message("user", "x", metadata={"a": {1, 2}}),
    "int-key-metadata": Message("user", "x", metadata={"a": {1: "one"}}),
    "object-args": Message("assistant", "", tool_calls=[ToolCall("c1", "t", {"x": object()})]),
    "nan-args": Message("assistant", "", tool_calls=[ToolCall("c1", "t", {"x": float("nan")})]),
}


@pytest.mark.parametrize("msg", NOT_JSON_MESSAGES.values(), ids=NOT_JSON_MESSAGES.keys())
def test_a_message_that_json_cannot_carry_is_refused(msg: Message) -> None:
    # Stored, it would come back altered (NaN -> null, datetime -> str, set -> list) or
    # fail deep inside pydantic's serialiser: refuse it up front, like FileMemory does.
    with pytest.raises(StateNotJsonError) as info:
        SnapshotData(messages=[msg])
    assert info.value.code == "STATE_NOT_JSON"
    assert "messages[0]" in str(info.value)


def test_a_lone_surrogate_in_content_is_a_clear_error_not_a_serializer_crash() -> None:
    snap = Snapshot(SnapshotData(messages=[Message("user", "a\ud800b")]))
    with pytest.raises(StateNotJsonError):
        snap.to_json()
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    with pytest.raises(AgentError):
        arun(sm.save_latest(snap))
    assert arun(storage.list()) == []


def test_a_message_with_json_values_round_trips_exactly() -> None:
    msg = Message(
        "assistant",
        "",
        tool_calls=[ToolCall("c1", "t", {"x": [1, 2.5, None, {"y": "z"}]})],
        metadata={"usage": {"input_tokens": 3}, "tags": ["a"], "ok": True},
    )
    back = Snapshot.from_json(Snapshot(SnapshotData(messages=[msg])).to_json())
    assert back.data.messages == [msg]
