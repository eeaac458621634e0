"""The checkpointer contract: save, load, delete, list; optional capabilities, each a protocol.

A checkpointer needs the four methods API.md names (:class:`Checkpointer`). What it may
add is a named, runtime-checkable protocol, checked one way (``isinstance``, cached per
class by ``_util.implements``); the functions below stand in for a missing one:

* :class:`ProgressSaver` (``save_progress(checkpoint)``): a cheaper save that may skip
  rewriting an unchanged history. Without it, :func:`save_progress` does a full ``save``.
* :class:`ThreadLocking` (``thread_lock(thread_id)``): an async context manager that holds
  the thread for a whole run. Without it, :func:`thread_lock` serialises the runs of a
  thread with an asyncio lock per (checkpointer, thread id) in this process, waiting
  ``lock_timeout`` seconds for a :class:`TimedCheckpointer` (``None``: forever), else
  :data:`DEFAULT_LOCK_TIMEOUT`, then THREAD_BUSY. Excluding runs in other processes is
  then the checkpointer's own business.
* :class:`ThreadHolding` (``hold_thread(thread_id)``): the lock, the checkpoint a run
  starts from and how its last save is made, in fewer steps (``FileCheckpointer``).
  Without it, :func:`hold_thread` locks, then loads, and the last save is a plain save.
  Checked on the class: a wrapper forwarding attributes (``__getattr__``) to such a
  checkpointer must not have its own save bypassed by the inner one's fused steps.

The shipped checkpointers share :class:`ThreadLockBase`: their ``thread_lock(thread_id, *,
timeout=...)`` and its wait are written there once, each backend holding the thread its
own way.

The value checks every backend applies before it writes (``check_checkpoint``,
``check_new_part``, from ``_values``) are part of the contract too: the database backends
in ``stores/`` use them from here.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import EllipsisType
from typing import Protocol, cast, runtime_checkable

from .._persist import LoopLocks as LocalLocks
from .._persist import check_seconds
from .._util import implements
from ..errors import ThreadBusyError
from ._values import check_checkpoint, check_new_part
from .model import ThreadCheckpoint, check_thread_id

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "Checkpointer",
    "HeldThread",
    "ProgressSaver",
    "ThreadHolding",
    "ThreadLockBase",
    "ThreadLocking",
    "TimedCheckpointer",
    "check_checkpoint",
    "check_new_part",
    "held_then_loaded",
    "hold_local",
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


@runtime_checkable
class ProgressSaver(Protocol):
    """A checkpointer with a cheaper save for a run's progress."""

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """Like ``save``; may skip rewriting the history when the stored one is the same."""
        ...


@runtime_checkable
class ThreadLocking(Protocol):
    """A checkpointer that holds a thread for a whole run, across processes."""

    def thread_lock(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the thread; THREAD_BUSY when it stays taken; saves inside still work."""
        ...


@runtime_checkable
class ThreadHolding(Protocol):
    """A checkpointer that holds, loads and finally saves a run's thread in fewer steps."""

    def hold_thread(self, thread_id: str) -> AbstractAsyncContextManager[HeldThread]:
        """The thread held for a run, with its checkpoint and how its last save is made."""
        ...


@runtime_checkable
class TimedCheckpointer(Protocol):
    """A checkpointer that says how long a run waits for a busy thread (``None``: forever)."""

    lock_timeout: float | None


async def save_progress(checkpointer: Checkpointer, checkpoint: ThreadCheckpoint) -> None:
    """``save_progress`` of a :class:`ProgressSaver` (a delta when it can), else ``save``."""
    if implements(checkpointer, ProgressSaver):
        await checkpointer.save_progress(checkpoint)
    else:
        await checkpointer.save(checkpoint)


def thread_lock(checkpointer: Checkpointer, thread_id: str) -> AbstractAsyncContextManager[None]:
    """``thread_lock`` of a :class:`ThreadLocking`, else an in-process lock of the thread.

    The stand-in only excludes runs of this process (see the module docstring).
    """
    if implements(checkpointer, ThreadLocking):
        lock: AbstractAsyncContextManager[None] = checkpointer.thread_lock(thread_id)
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

    A :class:`ThreadHolding` checkpointer does it in fewer steps (``FileCheckpointer``:
    one worker hand-off takes the lock and loads, and the last save lets the thread go);
    others are locked, then loaded, and saved as usual. Checked on the class (see the
    module docstring).
    """
    if issubclass(type(checkpointer), ThreadHolding):
        return cast(ThreadHolding, checkpointer).hold_thread(thread_id)
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
    # isinstance, not the per-class cache: an attribute may be set on one instance.
    timeout = (
        checkpointer.lock_timeout
        if isinstance(checkpointer, TimedCheckpointer)
        else DEFAULT_LOCK_TIMEOUT
    )
    wait = check_seconds("a checkpointer's lock_timeout", timeout, optional=True)
    key = f"{id(checkpointer)}/{thread_id}"
    async with hold_local(_LOCAL, key, thread_id, wait, "another run in this process"):
        yield


@contextlib.asynccontextmanager
async def hold_local(
    locks: LocalLocks, key: Hashable, thread_id: str, wait: float | None, holder: str
) -> AsyncIterator[None]:
    """Hold the lock of ``key`` for the block; THREAD_BUSY after ``wait`` seconds.

    ``None`` waits forever; the error says that ``holder`` held ``thread_id``.
    """
    lock = locks.enter(key)
    try:
        try:
            async with asyncio.timeout(wait):
                await lock.acquire()
        except TimeoutError:
            raise ThreadBusyError(
                f"thread {thread_id!r} is busy: {holder} held it for {wait}s"
            ) from None
        try:
            yield
        finally:
            lock.release()
    finally:
        locks.leave(key)


class ThreadLockBase(ABC):
    """A base of the shipped checkpointers: ``thread_lock`` and its wait are written here once.

    A subclass sets ``lock_timeout`` and writes ``_thread_held(thread_id, wait)``: hold the
    (checked) thread for the block, waiting ``wait`` seconds (``None``: forever), then
    THREAD_BUSY.
    """

    lock_timeout: float | None

    @contextlib.asynccontextmanager
    async def thread_lock(
        self,
        thread_id: str,
        *,
        timeout: float | EllipsisType | None = ...,  # noqa: ASYNC109 - a lock wait
    ) -> AsyncIterator[None]:
        """Hold the thread for a whole run; THREAD_BUSY after the wait.

        The wait is ``lock_timeout`` unless ``timeout`` is given (``None``: forever).
        """
        check_thread_id(thread_id)
        wait = (
            self.lock_timeout
            if timeout is ...
            else check_seconds("timeout", timeout, optional=True)
        )
        async with self._thread_held(thread_id, wait):
            yield

    @abstractmethod
    def _thread_held(
        self, thread_id: str, wait: float | None
    ) -> AbstractAsyncContextManager[object]:
        """Hold ``thread_id`` for the block; THREAD_BUSY after ``wait`` seconds."""
