"""The grounding seam: a memory that adds context for the prompt at hand, outside the history.

The agent asks a :class:`GroundingMemory` for grounding before each run, on what the user
asks now, and sends it ahead of every model call of that run; grounding messages
(``metadata["kind"] == "grounding"``) are never part of the transcript, so they are never
stored, snapshotted or checkpointed. ``GraphMemory`` is the shipped implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..errors import InvalidArgumentError
from ..messages import Message
from ._base import Memory

__all__ = [
    "GROUNDING_KIND",
    "RECALL_KIND",
    "GroundingMemory",
    "is_grounding",
    "without_grounding",
]

#: ``metadata["kind"]`` of a grounding message.
GROUNDING_KIND = "grounding"
#: ``metadata["kind"]`` of a memory bank's recall message (``BankMemory``): grounding too.
RECALL_KIND = "recall"
_CONTEXT_KINDS = frozenset((GROUNDING_KIND, RECALL_KIND))


def is_grounding(message: Message) -> bool:
    """Whether ``message`` is context for a run (grounding or recall: never to be stored)."""
    return isinstance(message, Message) and message.metadata.get("kind") in _CONTEXT_KINDS


def without_grounding(messages: Sequence[Message], where: str) -> list[Message]:
    """``messages`` minus grounding; anything but a list of Messages is INVALID_ARGUMENT.

    ``where`` names the method the messages were given to, for the error.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidArgumentError(
            f"{where}() takes a list of Messages, not {type(messages).__name__}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InvalidArgumentError(
                f"item {i} given to {where}() is a {type(message).__name__}, not a Message"
            )
    return [m for m in messages if not is_grounding(m)]


@runtime_checkable
class GroundingMemory(Memory, Protocol):
    """A memory that can ground a history on the incoming prompt before a run."""

    async def ground(self, messages: Sequence[Message], prompt: str) -> list[Message]:
        """``messages`` without grounding, plus one grounding message for ``prompt``."""
        ...
