"""Checkpoints kept in this process: :class:`InMemoryCheckpointer` (tests, demos)."""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from datetime import timedelta

from .._persist import LoopLocks as LocalLocks
from .._persist import check_seconds, shared_prefix
from .._retention import AutoPrune, check_older_than, check_ttl, waits_for_approval
from ._base import ThreadLockBase, hold_local
from ._values import (
    check_checkpoint,
    check_new_part,
    detached,
    kept_value,
)
from .model import ThreadCheckpoint, check_thread_id, to_json

__all__ = ["InMemoryCheckpointer"]


class InMemoryCheckpointer(AutoPrune, ThreadLockBase):
    """The :class:`~framework_agents.checkpoint.Checkpointer` contract in a dict.

    Checkpoints are kept as values: messages and tool calls (immutable) are the very
    objects saved, every container is the store's own (state, decisions and app_data are
    copied in and out), and what would not survive a file does not survive here either
    (STATE_NOT_JSON, a lone surrogate refused; a Message subclass kept as the Message a
    file would give back). A save whose history extends the stored one (the same
    objects) checks and copies only what it adds, so a thread's saves cost what is new.
    The thread lock is per event loop; it does not cross processes (use
    FileCheckpointer).
    """

    def __init__(self, *, lock_timeout: float | None = 10.0, ttl: float | None = None) -> None:
        """Create it; ``ttl``: seconds an idle thread is kept after its last save (``prune``)."""
        check_seconds("lock_timeout", lock_timeout, optional=True)
        self.lock_timeout = lock_timeout
        self.ttl = check_ttl(ttl)
        self._data: dict[str, ThreadCheckpoint] = {}
        self._saved_at: dict[str, float] = {}  # wall clock of each thread's last save
        self._locks = LocalLocks()

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Replace the thread's checkpoint with ``checkpoint``."""
        check_checkpoint(checkpoint)
        thread_id = checkpoint.thread_id
        stored = self._data.get(thread_id)
        keep = 0 if stored is None else len(stored.messages)
        # Not stored_prefix: ``stored.messages`` is what a load in another thread copies,
        # so it is never extended, even for a moment.
        if stored is None or shared_prefix(stored.messages, checkpoint.messages) != keep:
            stored, keep = None, 0  # not an extension: everything is new
        check_new_part(checkpoint, keep)  # STATE_NOT_JSON rather than stored altered
        # What JSON cannot carry (a lone surrogate) is refused as a file would refuse it.
        part = checkpoint.model_copy(update={"messages": checkpoint.messages[keep:]})
        data = to_json(part)
        self._data[thread_id] = kept_value(
            stored, checkpoint, keep, lambda: ThreadCheckpoint.model_validate_json(data)
        )
        self._saved_at[thread_id] = time.time()
        await self._after_write()

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """Same as :meth:`save` (which already stores and checks only what is new)."""
        await self.save(checkpoint)

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint (containers copied, messages shared), or ``None``."""
        stored = self._data.get(check_thread_id(thread_id))
        return None if stored is None else detached(stored)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (no error when there is none)."""
        self._data.pop(check_thread_id(thread_id), None)
        self._saved_at.pop(thread_id, None)

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove threads not saved for ``older_than`` (default: ``ttl``); how many went.

        A thread that is held (``thread_lock``, in this event loop) or waits for an
        approval is kept.
        """
        cutoff = time.time() - check_older_than(older_than, self.ttl)
        gone = 0
        for thread_id, at in list(self._saved_at.items()):
            if at >= cutoff:
                continue
            lock = self._locks.enter(thread_id)
            try:
                if lock.locked() or waits_for_approval(await self._load(thread_id)):
                    continue
            finally:
                self._locks.leave(thread_id)
            await self.delete(thread_id)
            gone += 1
        return gone

    async def _load(self, thread_id: str) -> ThreadCheckpoint:
        checkpoint = await self.load(thread_id)
        assert checkpoint is not None  # listed in _saved_at
        return checkpoint

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        return sorted(self._data)

    def _thread_held(self, thread_id: str, wait: float | None) -> AbstractAsyncContextManager[None]:
        return hold_local(self._locks, thread_id, thread_id, wait, "another run")
