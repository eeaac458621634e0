"""The events of a resume made by the older agent ``resume`` (no ``reissue``), rebuilt.

An agent-shaped object without ``resume_stream(..., reissue=False)`` resumes by asking the
model again; its events are rebuilt from the messages the resume stored (:func:`replay`),
the approved call shown under the id the human saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agent.events import (
    AgentEvent,
    MessageCompletedEvent,
    MessageStartedEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ..messages import Message, ToolCall
from ._shapes import Pending

__all__ = ["replay"]


def replay(added: list[Message], pending: Pending, tools: Mapping[str, Any]) -> list[AgentEvent]:
    """The events of messages a resume added, answering the pending call under its own id.

    The assistant turn that holds the approved call is announced by one ``tool_call``
    event under the id the human saw (its stored message may have a new id: the turn is
    rebuilt when it runs), and the call's result carries the pending ``tool_call_id``
    (the older resume asks the model again, which names the call anew).
    """
    events: list[AgentEvent] = []
    approved: set[str] = set()
    turn = 0
    for message in added:
        if message.role == "assistant":
            again = _approved_call(message, pending, approved)
            if again is not None:
                # The approved call, under the id the human saw, in the turn now stored.
                approved.add(again.id)
                shown = again.model_copy(update={"id": pending.tool_call_id})
                events.append(ToolCallEvent(call=shown, message_id=message.id))
                continue
            turn += 1
            events += _turn_events(message, turn, tools)
        elif message.role == "tool" and message.tool_call_id is not None:
            call_id = message.tool_call_id
            if call_id in approved:
                call_id = pending.tool_call_id
            events.append(
                ToolResultEvent(call_id=call_id, tool=message.name or "", message=message)
            )
    return events


def _approved_call(message: Message, pending: Pending, approved: set[str]) -> ToolCall | None:
    """The pending call in a text-free assistant turn (by id, or by name before it ran)."""
    if message.text:
        return None
    for call in message.tool_calls:
        if call.id == pending.tool_call_id or (not approved and call.name == pending.tool):
            return call
    return None


def _turn_events(message: Message, turn: int, tools: Mapping[str, Any]) -> list[AgentEvent]:
    """The events of one stored assistant turn, as a run streams them."""
    events: list[AgentEvent] = [MessageStartedEvent(message_id=message.id, turn=turn)]
    if message.text:
        events.append(TextDeltaEvent(message_id=message.id, delta=message.text))
    events.append(MessageCompletedEvent(message=message, turn=turn))
    for call in message.tool_calls:
        tool = tools.get(call.name)
        events.append(
            ToolCallEvent(
                call=call,
                message_id=message.id,
                requires_approval=bool(getattr(tool, "requires_approval", False)),
            )
        )
    return events
