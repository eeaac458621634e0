"""The checkpointer contract: save (full or a delta), load, delete, list, a run lock."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from .model import ThreadCheckpoint

__all__ = ["Checkpointer"]


@runtime_checkable
class Checkpointer(Protocol):
    """Where threads are checkpointed. Every method validates the thread id (THREAD_ID_INVALID)."""

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Replace the thread's checkpoint with ``checkpoint`` (atomically)."""
        ...

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """Like ``save``; may skip rewriting the history when the stored one is the same."""
        ...

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint or ``None``; CHECKPOINT_CORRUPT when unreadable."""
        ...

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (no error when there is none)."""
        ...

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        ...

    def thread_lock(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the thread for a whole run; THREAD_BUSY when it stays taken. Saves inside work."""
        ...
