"""Helpers shared by the memory backends: argument checks and windowing.

``LoopLocks`` (the per-loop lock registry) is the persistence layer's, re-exported here.

Windowing keeps the newest ``max_messages`` messages and cuts only between groups (an
assistant turn with its tool results is one group), then drops a dangling head with the
rule of :func:`~framework_agents.history.trim_dangling`. The cut is computed on *shapes*
(one small code per message) so a backend can window a cached history without holding
its messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .._persist import LoopLocks
from ..errors import InvalidArgumentError
from ..history import repair_history
from ..messages import Message

__all__ = [
    "CALL_ONLY",
    "OTHER",
    "TOOL",
    "LoopLocks",
    "bounded_view",
    "check_max_messages",
    "check_messages",
    "shape_of",
    "slide",
    "window",
    "window_start",
]

#: Shape codes: any message that starts a group and is kept by ``trim_dangling``.
OTHER = 0
#: A ``role="tool"`` message.
TOOL = 1
#: An assistant turn holding only tool calls (``trim_dangling`` drops it at the head).
CALL_ONLY = 2


#: The largest window: a 64-bit signed count (the databases' BIGINT).
MAX_MESSAGES_MAX = 2**63 - 1


def check_max_messages(value: object, *, name: str = "max_messages") -> int:
    """``value`` if it is an int from 1 to ``MAX_MESSAGES_MAX``, else ``InvalidArgumentError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MESSAGES_MAX:
        raise InvalidArgumentError(
            f"{name} must be a positive int (at most 2**63 - 1), got {value!r:.40}"
        )
    return value


def check_messages(messages: object) -> list[Message]:
    """``messages`` as a list of :class:`Message`, or a clear ``InvalidArgumentError``."""
    if isinstance(messages, str | bytes | bytearray | dict | Message) or not isinstance(
        messages, Iterable
    ):
        raise InvalidArgumentError(
            f"save() takes a sequence of Message objects, got {type(messages).__name__}"
        )
    out = list(messages)
    for i, msg in enumerate(out):
        if not isinstance(msg, Message):
            raise InvalidArgumentError(
                f"item {i} given to save() is a {type(msg).__name__}, not a Message"
            )
    return out


def shape_of(msg: Message) -> int:
    """The shape code of ``msg`` (see ``OTHER``, ``TOOL``, ``CALL_ONLY``)."""
    if msg.role == "tool":
        return TOOL
    if msg.role == "assistant" and msg.tool_calls and not msg.text.strip():
        return CALL_ONLY
    return OTHER


def window_start(shapes: Sequence[int], max_messages: int, begin: int = 0) -> int:
    """Index where the kept suffix of a history with these shapes begins.

    Equivalent to: keep the suffix from the first group start at or after
    ``len - max_messages``, then ``trim_dangling`` it. Tool messages never start a kept
    suffix (either they belong to a group that began earlier, or they are orphans that
    ``trim_dangling`` would drop), so the first non-tool message at or after the cut is
    the first group start that survives. Only the messages past the cut are examined.
    ``begin``: window ``shapes[begin:]`` only (the index returned is still into ``shapes``).
    """
    n = len(shapes)
    if n - begin <= max_messages:
        return begin
    i = n - max_messages
    while i < n and shapes[i] == TOOL:
        i += 1
    while i < n:
        if shapes[i] == TOOL:
            i += 1
        elif shapes[i] == CALL_ONLY:
            i += 1
            while i < n and shapes[i] == TOOL:
                i += 1
        else:
            break
    return i


def slide(
    shapes: Sequence[int], ids: Sequence[str], kept: set[str], start: int, max_messages: int
) -> int:
    """The window after one more save: its new start; the ids it cuts leave ``kept``.

    ``shapes[start:]`` (ids ``ids[start:]``, the set ``kept``) is the window before the
    save plus what the save appended. Every memory windows after each save, so what a
    memory holds depends only on its saves, never on how its backend stores them (a
    journal appended to, a document folded now and then).
    """
    new = window_start(shapes, max_messages, start)
    if new > start:
        kept.difference_update(ids[start:new])
    return new


def window(messages: Sequence[Message], max_messages: int) -> list[Message]:
    """The newest ``max_messages`` of ``messages``, cut between groups, head trimmed."""
    if len(messages) <= max_messages:
        return list(messages)
    start = window_start([shape_of(m) for m in messages], max_messages)
    return list(messages[start:])


def bounded_view(stored: Sequence[Message], max_messages: int) -> list[Message]:
    """What ``load()`` returns: the repaired history, windowed again.

    Repair may add synthesised results for unanswered calls, so the repaired history can
    be longer than what was stored; windowing it again keeps ``load()`` within the bound.
    Windowing a well-formed history keeps it well formed.
    """
    return window(repair_history(stored), max_messages)
