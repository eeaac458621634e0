"""Conversation managers: keep a history inside the model's context window."""

from ..history import trim_dangling
from ._base import ConversationManager

__all__ = ["ConversationManager", "trim_dangling"]
