"""The checkpointer contract: save, load, delete, list; optionally a delta save and a run lock.

A checkpointer needs the four methods API.md names. Two more are optional:

* ``save_progress(checkpoint)``: a cheaper save that may skip rewriting an unchanged
  history. Without it, :func:`save_progress` does a full ``save``.
* ``thread_lock(thread_id)``: an async context manager that holds the thread for a whole
  run. Without it, :func:`thread_lock` serialises the runs of a thread with an asyncio
  lock per (checkpointer, thread id) in this process, waiting ``cp.lock_timeout`` seconds
  when the checkpointer has that attribute (``None``: forever), else
  :data:`DEFAULT_LOCK_TIMEOUT`, then THREAD_BUSY. Excluding runs in other processes is
  then the checkpointer's own business.

A run holds its thread through :func:`hold_thread`: the lock, the checkpoint it starts
from and how its last save is made, in fewer steps where the checkpointer can.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._persist import LoopLocks as LocalLocks
from .._persist import check_seconds
from ..errors import ThreadBusyError
from .model import ThreadCheckpoint, check_thread_id

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "Checkpointer",
    "HeldThread",
    "held_then_loaded",
    "hold_thread",
    "save_progress",
    "thread_lock",
]

#: Seconds a run waits for a thread held in this process, for checkpointers without a
#: ``thread_lock`` and without a ``lock_timeout`` attribute.
DEFAULT_LOCK_TIMEOUT = 10.0

# Keyed by id(checkpointer) and thread id. An entry lives only while a run holds or waits
# for it, and that run keeps the checkpointer alive, so the id cannot be reused meanwhile.
_LOCAL = LocalLocks()


@runtime_checkable
class Checkpointer(Protocol):
    """Where threads are checkpointed. Every method validates the thread id (THREAD_ID_INVALID).

    ``save_progress`` and ``thread_lock`` (below) are optional: the agent calls them
    through :func:`save_progress` and :func:`thread_lock`, which stand in for them.
    """

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Replace the thread's checkpoint with ``checkpoint`` (atomically)."""
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


async def save_progress(checkpointer: Checkpointer, checkpoint: ThreadCheckpoint) -> None:
    """``checkpointer.save_progress(checkpoint)`` (a delta when it can), else a full ``save``.

    Optional method: like ``save``; may skip rewriting the history when the stored one is
    the same.
    """
    method: Any = getattr(checkpointer, "save_progress", None)
    if callable(method):
        await method(checkpoint)
    else:
        await checkpointer.save(checkpoint)


def thread_lock(checkpointer: Checkpointer, thread_id: str) -> AbstractAsyncContextManager[None]:
    """``checkpointer.thread_lock(thread_id)``, else an in-process lock of the thread.

    Optional method: hold the thread for a whole run; THREAD_BUSY when it stays taken;
    saves inside still work. The stand-in only excludes runs of this process (module doc).
    """
    method: Any = getattr(checkpointer, "thread_lock", None)
    if callable(method):
        lock: AbstractAsyncContextManager[None] = method(thread_id)
        return lock
    return _local_thread_lock(checkpointer, thread_id)


@dataclass(frozen=True, slots=True)
class HeldThread:
    """A thread held for a run (:func:`hold_thread`).

    ``checkpoint``: the thread's checkpoint as the run took it. ``save_last``: how the
    run's last save is made (the run writes nothing of the thread after it, so a
    checkpointer may let the thread go in the same step); it returns whether it did.
    """

    checkpoint: ThreadCheckpoint | None
    save_last: Callable[[ThreadCheckpoint], Awaitable[bool]]


def hold_thread(
    checkpointer: Checkpointer, thread_id: str
) -> AbstractAsyncContextManager[HeldThread]:
    """Hold the thread (:func:`thread_lock`) and load its checkpoint, for a run.

    A checkpointer with a private ``_hold_thread(thread_id)`` does it in fewer steps
    (``FileCheckpointer``: one worker hand-off takes the lock and loads, and the last
    save lets the thread go); others are locked, then loaded, and saved as usual.
    """
    # Looked up on the class: a wrapper forwarding attributes to a FileCheckpointer
    # (``__getattr__``) must not have its own steps bypassed.
    method: Any = getattr(type(checkpointer), "_hold_thread", None)
    if callable(method):
        held: AbstractAsyncContextManager[HeldThread] = method(checkpointer, thread_id)
        return held
    return held_then_loaded(checkpointer, thread_id)


@contextlib.asynccontextmanager
async def held_then_loaded(checkpointer: Checkpointer, thread_id: str) -> AsyncIterator[HeldThread]:
    """:func:`thread_lock`, then ``load``; the last save is a plain ``save``."""

    async def save_last(checkpoint: ThreadCheckpoint) -> bool:
        await checkpointer.save(checkpoint)
        return False  # the thread stays held until the block ends

    async with thread_lock(checkpointer, thread_id):
        yield HeldThread(await checkpointer.load(thread_id), save_last)


@contextlib.asynccontextmanager
async def _local_thread_lock(checkpointer: Checkpointer, thread_id: str) -> AsyncIterator[None]:
    check_thread_id(thread_id)
    wait = check_seconds(
        "a checkpointer's lock_timeout",
        getattr(checkpointer, "lock_timeout", DEFAULT_LOCK_TIMEOUT),
        optional=True,
    )
    key = f"{id(checkpointer)}/{thread_id}"
    lock = _LOCAL.enter(key)
    try:
        try:
            async with asyncio.timeout(wait):
                await lock.acquire()
        except TimeoutError:
            raise ThreadBusyError(
                f"thread {thread_id!r} is busy: another run in this process held it for {wait}s"
            ) from None
        try:
            yield
        finally:
            lock.release()
    finally:
        _LOCAL.leave(key)
