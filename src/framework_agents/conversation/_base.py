"""The conversation-manager contract: keep a history inside the model's context limits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..messages import Message

__all__ = ["ConversationManager"]


@runtime_checkable
class ConversationManager(Protocol):
    """Cuts or condenses a history; every result is well formed and keeps pinned messages."""

    async def apply(self, messages: Sequence[Message]) -> list[Message]:
        """After a run, before the memory save: the history to keep."""
        ...

    async def before_model(self, messages: Sequence[Message]) -> list[Message]:
        """Each turn inside the loop: the history to send (may be returned unchanged)."""
        ...

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        """Explicit shrink (also called on a context overflow before a retry)."""
        ...
