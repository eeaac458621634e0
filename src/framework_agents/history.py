"""Well-formedness of histories: checking, repairing and trimming.

A history is *well formed* when every ``role="tool"`` message answers a call of the
assistant turn before it (only tool messages may stand between them), and every call of an
assistant turn is answered before the next non-tool message. Providers reject anything
else, so every component that stores, cuts or sends a history keeps this property.

The helpers here work on *groups*: an assistant turn with tool calls together with the
tool results that follow it form one group, and every other message is a group of one.
Cutting a history only between groups keeps it well formed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

from .errors import InvalidArgumentError
from .messages import Message, ToolCall

__all__ = [
    "INTERRUPTED_TEXT",
    "group_bounds",
    "is_well_formed",
    "repair_history",
    "trim_dangling",
    "well_formed_problems",
]

#: Text of the tool result synthesised for a call that never got one.
INTERRUPTED_TEXT = "Tool call was interrupted before it returned a result."


def _messages(messages: Iterable[Message], fn: str) -> Sequence[Message]:
    """``messages`` as a sequence of :class:`Message`, or a clear ``INVALID_ARGUMENT``."""
    if isinstance(messages, str | bytes | Mapping | Message) or not isinstance(messages, Iterable):
        raise InvalidArgumentError(
            f"{fn}() takes a sequence of Message objects, not {type(messages).__name__}"
        )
    seq = messages if isinstance(messages, Sequence) else list(messages)
    if all(map(isinstance, seq, repeat(Message))):  # the hot path: one C-level pass
        return seq
    for i, msg in enumerate(seq):
        if not isinstance(msg, Message):
            raise InvalidArgumentError(
                f"item {i} given to {fn}() is a {type(msg).__name__}, not a Message"
            )
    return seq


def well_formed_problems(messages: Sequence[Message]) -> list[str]:
    """Every reason ``messages`` is not well formed (empty when it is)."""
    messages = _messages(messages, "well_formed_problems")
    problems: list[str] = []
    open_calls: dict[str, ToolCall] = {}
    answered: set[str] = set()
    owner: int | None = None

    def close(at: int) -> None:
        for call_id in open_calls:
            if call_id not in answered:
                problems.append(f"call {call_id!r} of message {owner} unanswered before {at}")

    for i, msg in enumerate(messages):
        if msg.role == "tool":
            cid = msg.tool_call_id
            if cid is None or cid not in open_calls:
                problems.append(f"message {i}: tool result {cid!r} answers no open call")
            elif cid in answered:
                problems.append(f"message {i}: duplicate tool result for {cid!r}")
            else:
                answered.add(cid)
            continue
        if open_calls:  # nothing to close or reset after a message without calls
            close(i)
            open_calls, answered = {}, set()
        owner = i
        if msg.role == "assistant" and msg.tool_calls:
            ids = [c.id for c in msg.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate tool call ids")
            open_calls = {c.id: c for c in msg.tool_calls}
    close(len(messages))
    return problems


def is_well_formed(messages: Sequence[Message]) -> bool:
    """Whether every tool result answers an open call and every call is answered."""
    return not well_formed_problems(messages)


def _interrupted_result(call: ToolCall) -> Message:
    # A deterministic id keeps repair idempotent and reproducible across processes.
    return Message(
        "tool",
        INTERRUPTED_TEXT,
        tool_call_id=call.id,
        name=call.name,
        id=f"interrupted-{call.id}",
        metadata={"kind": "interrupted"},
    )


def repair_history(messages: Sequence[Message]) -> list[Message]:
    """Return a well-formed copy of ``messages``, adding and dropping only what it must.

    * An unanswered call gets a synthesised result (``metadata["kind"] == "interrupted"``),
      placed after the results that did arrive.
    * A tool result that answers no open call (orphaned, duplicate, or without an id) is
      dropped.
    * A call whose id repeats an earlier call of the same turn is dropped (no result could
      tell them apart).

    The input list and its messages are not modified; a well-formed history comes back
    equal (same message objects, same order). Deterministic and idempotent.
    """
    messages = _messages(messages, "repair_history")
    out: list[Message] = []
    # The open assistant turn's calls by id (empty between turns) and the ids answered so
    # far. The agent repairs on every load and before model calls, so the common case (no
    # open turn, nothing to add) stays a dict lookup per message.
    calls: dict[str, ToolCall] = {}
    answered: set[str] = set()
    append = out.append
    for msg in messages:
        if msg.role == "tool":
            cid = msg.tool_call_id
            if cid in calls and cid not in answered:
                answered.add(cid)
                append(msg)
            continue
        if calls:
            if len(answered) != len(calls):
                out.extend(_interrupted_result(c) for c in calls.values() if c.id not in answered)
            calls, answered = {}, set()
        if msg.role == "assistant" and msg.tool_calls:
            for call in msg.tool_calls:
                calls.setdefault(call.id, call)
            if len(calls) != len(msg.tool_calls):
                msg = msg.model_copy(update={"tool_calls": list(calls.values())})
        append(msg)
    if calls and len(answered) != len(calls):
        out.extend(_interrupted_result(c) for c in calls.values() if c.id not in answered)
    return out


def group_bounds(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Half-open ``(start, end)`` index ranges of the groups of a history.

    An assistant turn with tool calls owns the tool messages that directly follow it; a
    tool message with no such owner (an orphan at the head) is a group of its own.
    """
    messages = _messages(messages, "group_bounds")
    bounds: list[tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        j = i + 1
        if messages[i].role == "assistant" and messages[i].tool_calls:
            while j < n and messages[j].role == "tool":
                j += 1
        bounds.append((i, j))
        i = j
    return bounds


def trim_dangling(messages: Sequence[Message]) -> list[Message]:
    """Drop leading tool results and leading call-only assistant turns (with their results).

    The result never opens on an orphaned tool message or on an assistant turn that holds
    only tool calls. Only the head is touched.
    """
    messages = _messages(messages, "trim_dangling")
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        if msg.role == "tool":
            i += 1
        elif msg.role == "assistant" and msg.tool_calls and not msg.text.strip():
            i += 1
            while i < n and messages[i].role == "tool":
                i += 1
        else:
            break
    return list(messages[i:])
