"""Counting a history in tokens: a model's tokenizer where it has one, else an estimate.

Context limits are tokens, not messages. A model that can count the tokens of a history
the way it reads it implements :class:`TokenCounter` (``LocalModel`` does, with llama.cpp's
tokenizer and chat template); for any other, :func:`estimate_tokens` gives a documented
estimate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..messages import Message

__all__ = ["CHARS_PER_TOKEN", "MESSAGE_OVERHEAD", "TokenCounter", "estimate_tokens"]

#: The estimate's characters per token (English text and JSON average about 4).
CHARS_PER_TOKEN = 4
#: The estimate's tokens per message for its role and framing (chat templates add 3-5).
MESSAGE_OVERHEAD = 4


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a history as a model reads it (a model capability)."""

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens ``messages`` take in the model's context."""
        ...


def _chars(message: Message) -> int:
    size = len(message.text) + sum(len(block.text) for block in message.reasoning)
    for call in message.tool_calls:
        size += len(call.name) + len(json.dumps(call.args, ensure_ascii=False))
    return size


def estimate_tokens(messages: Sequence[Message]) -> int:
    """An estimate of the tokens of ``messages``, for models that cannot count them.

    Each message counts its characters (text, reasoning, and each tool call's name and
    JSON arguments) divided by :data:`CHARS_PER_TOKEN`, rounded up, plus
    :data:`MESSAGE_OVERHEAD`. It is an estimate: leave headroom below the real limit
    (text in other scripts than Latin often takes more tokens per character).
    """
    return sum(-(-_chars(m) // CHARS_PER_TOKEN) + MESSAGE_OVERHEAD for m in messages)
