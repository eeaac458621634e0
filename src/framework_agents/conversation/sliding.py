"""``SlidingWindowConversationManager``: the pinned head plus the newest messages."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import InvalidArgumentError
from ..history import repair_history, trim_dangling
from ..messages import Message
from ._cut import boundaries, check_count, newest_user, pinned_end
from ._tokens import TokenCounter, estimate_tokens

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
    * ``max_tokens`` (an int >= 1, or ``None``) also bounds the window in tokens: after
      the message window, the cut moves on, group by group, until the pinned head plus
      what is kept count at most ``max_tokens``. That always fits when the pins plus the
      newest user message do; when they do not, they are all that is kept. Tokens are
      counted by ``tokenizer``, a :class:`~framework_agents.conversation.TokenCounter`
      (a model with ``count_tokens``, such as ``LocalModel``: its own tokenizer), else by
      :func:`~framework_agents.conversation.estimate_tokens` (characters / 4, rounded
      up, plus 4 a message). The system prompt and the tool specs are not counted: keep
      ``max_tokens`` below the context limit by at least their size and the answer's.

    Input is repaired first (a no-op for a well-formed history), and the input list is
    never modified: every method returns a new list.
    """

    def __init__(
        self,
        window_size: int = 40,
        pin_first: int = 0,
        per_turn: bool = False,
        max_tokens: int | None = None,
        *,
        tokenizer: TokenCounter | None = None,
    ) -> None:
        self.window_size: int = check_count("window_size", window_size, minimum=1)
        self.pin_first: int = check_count("pin_first", pin_first)
        if not isinstance(per_turn, bool):
            raise InvalidArgumentError(f"per_turn must be a bool, not {type(per_turn).__name__}")
        self.per_turn: bool = per_turn
        self.max_tokens: int | None = (
            None if max_tokens is None else check_count("max_tokens", max_tokens, minimum=1)
        )
        if tokenizer is not None and not isinstance(tokenizer, TokenCounter):
            raise InvalidArgumentError(
                f"tokenizer must count tokens (async count_tokens(messages) -> int); a "
                f"{type(tokenizer).__name__} does not: leave it None for the estimate"
            )
        self.tokenizer: TokenCounter | None = tokenizer

    async def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The pinned head plus the newest ``window_size`` unpinned messages."""
        return await self._cut(messages, halve=False)

    async def before_model(self, messages: Sequence[Message]) -> list[Message]:
        """Like :meth:`apply` when built with ``per_turn=True``, else the history as is."""
        if self.per_turn:
            return await self._cut(messages, halve=False)
        return repair_history(messages)

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        """Drop at least the oldest half of the unpinned messages (pins stay)."""
        return await self._cut(messages, halve=True)

    async def _cut(self, messages: Sequence[Message], *, halve: bool) -> list[Message]:
        history = repair_history(messages)
        pinned = pinned_end(history, self.pin_first)
        head, rest = history[:pinned], history[pinned:]
        start, kept = self._window(rest, halve=halve)
        if self.max_tokens is not None:
            kept = await self._fit(head, rest, start, kept, self.max_tokens)
        logger.debug(
            "sliding window: kept %d pinned + %d of %d unpinned messages",
            pinned,
            len(kept),
            len(rest),
        )
        return head + kept

    def _window(self, rest: list[Message], *, halve: bool) -> tuple[int, list[Message]]:
        """Where the message window cuts ``rest`` and what it keeps of it."""
        n = len(rest)
        # Drop at least this many of the oldest unpinned messages, then round up to the
        # next group boundary so no call is separated from its results.
        drop = max(n - self.window_size, 0)
        if halve:
            drop = max(drop, (n + 1) // 2)
        if drop == 0:
            return 0, rest
        user = newest_user(rest)
        start, kept = n, []
        for start in (b for b in boundaries(rest) if b >= drop):
            kept = _kept_from(rest, start, user)
            # A reduce counts the spared user turn among what it keeps, so it still makes
            # progress while anything but the pins and that turn is left.
            if not halve or len(kept) <= max(n - drop, 1):
                break
        return start, kept

    async def _fit(
        self, head: list[Message], rest: list[Message], start: int, kept: list[Message], limit: int
    ) -> list[Message]:
        """``kept``, or what a later cut keeps of ``rest``, within ``limit`` tokens.

        The latest cut keeps the fewest messages (at most the newest user turn): the
        earliest cut that fits is found by bisection, as a later cut keeps a part of
        what an earlier one keeps (its count is no larger).
        """
        if await self._count([*head, *kept]) <= limit:
            return kept
        user = newest_user(rest)
        cuts = [b for b in boundaries(rest) if b > start]
        if not cuts:  # already only the pins and the newest user turn
            return kept
        low, high = 0, len(cuts) - 1  # the answer is in cuts[low:high + 1]
        while low < high:
            middle = (low + high) // 2
            if await self._count([*head, *_kept_from(rest, cuts[middle], user)]) <= limit:
                high = middle
            else:
                low = middle + 1
        return _kept_from(rest, cuts[high], user)

    async def _count(self, messages: list[Message]) -> int:
        if self.tokenizer is None:
            return estimate_tokens(messages)
        return await self.tokenizer.count_tokens(messages)

    def __repr__(self) -> str:
        return (
            f"SlidingWindowConversationManager(window_size={self.window_size}, "
            f"pin_first={self.pin_first}, per_turn={self.per_turn}, "
            f"max_tokens={self.max_tokens})"
        )


def _kept_from(rest: list[Message], start: int, user: int) -> list[Message]:
    """What a cut of ``rest`` at the group boundary ``start`` keeps (dangling head trimmed).

    The newest user turn (at ``user``) is never cut: it stays, in place and in order.
    """
    kept = trim_dangling(rest[start:])
    return [rest[user], *kept] if user < start else kept
