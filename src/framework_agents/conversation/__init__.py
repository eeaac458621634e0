"""Conversation managers: keep a history inside the model's context window."""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ..history import trim_dangling
    from ._base import ConversationManager
    from ._tokens import TokenCounter, estimate_tokens
    from .null import NullConversationManager
    from .sliding import SlidingWindowConversationManager
    from .summarizing import SummarizingConversationManager
else:
    _lazy.install(
        globals(),
        {
            "..history": ("trim_dangling",),
            "._base": ("ConversationManager",),
            "._tokens": ("TokenCounter", "estimate_tokens"),
            ".null": ("NullConversationManager",),
            ".sliding": ("SlidingWindowConversationManager",),
            ".summarizing": ("SummarizingConversationManager",),
        },
    )

__all__ = [
    "ConversationManager",
    "NullConversationManager",
    "SlidingWindowConversationManager",
    "SummarizingConversationManager",
    "TokenCounter",
    "estimate_tokens",
    "trim_dangling",
]
