"""``NullConversationManager``: keeps the whole history."""

from __future__ import annotations

from collections.abc import Sequence

from ..history import repair_history
from ..messages import Message

__all__ = ["NullConversationManager"]


class NullConversationManager:
    """Keeps every message; each method returns a new, well-formed list.

    A well-formed history (what the agent always passes) comes back equal, message for
    message. A malformed one is repaired first with :func:`~framework_agents.repair_history`
    (orphaned results dropped, unanswered calls answered as interrupted), because every
    history stored or sent must be well formed.
    """

    async def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The whole history (repaired if it was not well formed)."""
        return repair_history(messages)

    async def before_model(self, messages: Sequence[Message]) -> list[Message]:
        """The whole history (repaired if it was not well formed)."""
        return repair_history(messages)

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        """The whole history: this manager never shrinks anything."""
        return repair_history(messages)

    def __repr__(self) -> str:
        return "NullConversationManager()"


def keeps_everything(manager: object) -> bool:
    """Whether ``manager`` is exactly a :class:`NullConversationManager` (not a subclass).

    Given a checked history (what the agent passes), such a manager hands back the same
    messages, so the agent skips the call and its whole-history copy and comparison: what
    a run costs stays what it adds.
    """
    return type(manager) is NullConversationManager
