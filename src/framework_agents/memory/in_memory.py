"""``InMemoryMemory``: a process-local history, the agent's default memory."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message, copy_messages
from ._window import bounded_view, check_max_messages, check_messages, window

__all__ = ["InMemoryMemory"]


class InMemoryMemory:
    """Keeps the newest ``max_messages`` messages in this process; ``save()`` appends.

    Messages are copied on the way in and on the way out, so a caller that mutates what
    it saved or loaded never changes what is stored. What was saved is stored as given
    (minus what falls out of the window); ``load()`` returns it repaired, so the history
    is well formed even if malformed messages were saved.
    """

    def __init__(self, max_messages: int = 50) -> None:
        self.max_messages: int = check_max_messages(max_messages)
        self._messages: list[Message] = []

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (copies)."""
        return copy_messages(bounded_view(self._messages, self.max_messages))

    async def save(self, messages: Sequence[Message]) -> None:
        """Append copies of ``messages``, then keep the newest ``max_messages``."""
        new = copy_messages(check_messages(messages))
        self._messages = window([*self._messages, *new], self.max_messages)

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace the stored history with copies of ``messages`` (windowed), in one step."""
        # Window first: only what is kept is copied (the cut depends on values alone).
        self._messages = copy_messages(window(check_messages(messages), self.max_messages))

    async def clear(self) -> None:
        """Forget the stored history."""
        self._messages = []

    def __repr__(self) -> str:
        return f"InMemoryMemory(max_messages={self.max_messages}, stored={len(self._messages)})"
