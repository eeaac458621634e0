"""Conversation managers: keep a history inside the model's context window."""

from ..history import trim_dangling
from ._base import ConversationManager
from ._tokens import TokenCounter, estimate_tokens
from .null import NullConversationManager
from .sliding import SlidingWindowConversationManager
from .summarizing import SummarizingConversationManager

__all__ = [
    "ConversationManager",
    "NullConversationManager",
    "SlidingWindowConversationManager",
    "SummarizingConversationManager",
    "TokenCounter",
    "estimate_tokens",
    "trim_dangling",
]
