"""``SlidingWindowConversationManager``: the pinned head plus the newest messages."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import InvalidArgumentError
from ..history import repair_history, trim_dangling
from ..messages import Message
from ._cut import boundaries, check_count, newest_user, pinned_end

__all__ = ["SlidingWindowConversationManager"]

logger = logging.getLogger(__name__)


class SlidingWindowConversationManager:
    """Keeps the first ``pin_first`` messages plus the newest ``window_size`` unpinned ones.

    * Kept messages stay in their original order; pinned ones are never removed.
    * The window is cut only between groups (an assistant turn with tool calls and its
      results are one group), so a call never loses its results. When the window was cut,
      :func:`~framework_agents.trim_dangling` then drops call-only assistant turns (with their
      results) from its head. A window holding nothing but call-only turns therefore trims
      to empty: pick ``window_size`` larger than your longest tool loop.
    * If ``pin_first`` ends inside a tool group, the pinned region extends to the end of
      that group (a pinned call keeps its results), so it may hold more than ``pin_first``.
    * ``per_turn=True`` also windows in ``before_model`` (each model call), not only in
      ``apply`` (after a run).
    * ``reduce()`` drops at least the oldest half of the unpinned messages (and anything
      outside the window), so every call on a context overflow makes progress.
    * The newest user message is never removed (by any method): when the window or a
      reduction would cut it, it stays, just before what is kept of the window. When
      nothing else is left to drop, ``reduce()`` returns its input unchanged and the
      agent fails with ``CONTEXT_OVERFLOW``.

    Input is repaired first (a no-op for a well-formed history), and the input list is
    never modified: every method returns a new list.
    """

    def __init__(self, window_size: int = 40, pin_first: int = 0, per_turn: bool = False) -> None:
        self.window_size: int = check_count("window_size", window_size, minimum=1)
        self.pin_first: int = check_count("pin_first", pin_first)
        if not isinstance(per_turn, bool):
            raise InvalidArgumentError(f"per_turn must be a bool, not {type(per_turn).__name__}")
        self.per_turn: bool = per_turn

    async def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The pinned head plus the newest ``window_size`` unpinned messages."""
        return self._cut(messages, halve=False)

    async def before_model(self, messages: Sequence[Message]) -> list[Message]:
        """Like :meth:`apply` when built with ``per_turn=True``, else the history as is."""
        if self.per_turn:
            return self._cut(messages, halve=False)
        return repair_history(messages)

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        """Drop at least the oldest half of the unpinned messages (pins stay)."""
        return self._cut(messages, halve=True)

    def _cut(self, messages: Sequence[Message], *, halve: bool) -> list[Message]:
        history = repair_history(messages)
        pinned = pinned_end(history, self.pin_first)
        head, rest = history[:pinned], history[pinned:]
        n = len(rest)
        # Drop at least this many of the oldest unpinned messages, then round up to the
        # next group boundary so no call is separated from its results.
        drop = max(n - self.window_size, 0)
        if halve:
            drop = max(drop, (n + 1) // 2)
        if drop == 0:
            return head + rest
        user = newest_user(rest)
        kept: list[Message] = []
        for start in (b for b in boundaries(rest) if b >= drop):
            kept = trim_dangling(rest[start:])
            if user < start:  # the newest user turn is never cut (kept in place, in order)
                kept = [rest[user], *kept]
            # A reduce counts the spared user turn among what it keeps, so it still makes
            # progress while anything but the pins and that turn is left.
            if not halve or len(kept) <= max(n - drop, 1):
                break
        logger.debug(
            "sliding window: kept %d pinned + %d of %d unpinned messages", pinned, len(kept), n
        )
        return head + kept

    def __repr__(self) -> str:
        return (
            f"SlidingWindowConversationManager(window_size={self.window_size}, "
            f"pin_first={self.pin_first}, per_turn={self.per_turn})"
        )
