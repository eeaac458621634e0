"""``InMemoryMemory``: a process-local history, the agent's default memory."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from .._persist import LoopLocks
from ..messages import FrozenMessage, Message, freeze_message, thaw_message
from ._window import (
    OTHER,
    TOOL,
    bounded_view,
    check_max_messages,
    check_messages,
    shape_of,
    window,
    window_start,
)

__all__ = ["InMemoryMemory"]


class InMemoryMemory:
    """Keeps the newest ``max_messages`` messages in this process; ``save()`` appends.

    Messages are copied on the way in and on the way out, so a caller that mutates what
    it saved or loaded never changes what is stored: text-only messages are kept as
    tuples (``freeze_message``: immutable, and nothing for the garbage collector to walk),
    others as deep copies; ``load()`` builds new messages. What was saved is stored as given
    (minus what falls out of the window); ``load()`` returns it repaired, so the history
    is well formed even if malformed messages were saved.
    """

    def __init__(self, max_messages: int = 50) -> None:
        """Create it; arguments are described in the class docstring."""
        self.max_messages: int = check_max_messages(max_messages)
        self._stored: list[FrozenMessage] = []
        self._locks = LoopLocks()

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (copies)."""
        return bounded_view([thaw_message(f) for f in self._stored], self.max_messages)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append copies of ``messages``, then keep the newest ``max_messages``."""
        kept = [*self._stored, *(freeze_message(m) for m in check_messages(messages))]
        if len(kept) > self.max_messages:
            kept = kept[window_start([_shape(f) for f in kept], self.max_messages) :]
        self._stored = kept

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace the stored history with copies of ``messages`` (windowed), in one step."""
        # Window first: only what is kept is copied (the cut depends on values alone).
        kept = window(check_messages(messages), self.max_messages)
        self._stored = [freeze_message(m) for m in kept]

    async def transact(
        self, update: Callable[[list[Message]], Awaitable[Sequence[Message]]]
    ) -> None:
        """Run ``update(history)`` and store its result; other transactions wait meanwhile."""
        async with self._locks.hold(None):
            await self.replace(await update(await self.load()))

    async def clear(self) -> None:
        """Forget the stored history."""
        self._stored = []

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"InMemoryMemory(max_messages={self.max_messages}, stored={len(self._stored)})"


def _shape(frozen: FrozenMessage) -> int:
    """The window shape of a stored message (a frozen one is text-only: no tool calls)."""
    if isinstance(frozen, Message):
        return shape_of(frozen)
    return TOOL if frozen[0] == "tool" else OTHER
