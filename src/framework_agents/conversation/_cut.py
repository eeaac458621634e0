"""Where a history may be cut: pins, group boundaries and argument checks (internal).

Managers first repair their input (a no-op for the well-formed histories the agent passes)
and then cut only between groups (see :func:`framework_agents.history.group_bounds`), so
every result stays well formed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgumentError
from ..history import group_bounds
from ..messages import Message

__all__ = ["boundaries", "check_count", "newest_user", "pinned_end"]


def check_count(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int ``>= minimum``, else ``INVALID_ARGUMENT`` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    return value


def boundaries(messages: Sequence[Message]) -> list[int]:
    """Every index where ``messages`` may be cut, ``0`` and ``len(messages)`` included."""
    return [0, *(end for _, end in group_bounds(messages))]


def pinned_end(messages: Sequence[Message], pin_first: int) -> int:
    """How many leading messages are pinned.

    The first ``pin_first`` messages, extended to the end of the tool group they end in: a
    pinned assistant turn never loses the results of its calls (cutting between a call and
    its results would leave the history malformed).
    """
    end = min(pin_first, len(messages))
    for start, stop in group_bounds(messages):
        if start < end < stop:
            return stop
        if start >= end:
            break
    return end


def newest_user(messages: Sequence[Message]) -> int:
    """The index of the newest ``role="user"`` message, or ``len(messages)`` if none.

    Managers never cut it: what the user said last is never dropped to make room (the
    agent fails with ``CONTEXT_OVERFLOW`` instead when it cannot fit).
    """
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return len(messages)
