"""The memory contract: ``load()``, ``save(messages)`` (appends) and ``clear()``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..messages import Message

__all__ = ["Memory"]


@runtime_checkable
class Memory(Protocol):
    """Where an agent keeps its history between runs. ``save()`` appends."""

    async def load(self) -> list[Message]:
        """The stored history, oldest first (always well formed)."""
        ...

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the stored history (then apply the memory's window)."""
        ...

    async def clear(self) -> None:
        """Forget the stored history."""
        ...
