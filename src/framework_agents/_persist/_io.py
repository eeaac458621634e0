"""Blocking I/O off the event loop that a cancellation cannot cut in half (internal).

``asyncio.to_thread`` lets the awaiting task go on after a cancel while the thread is still
working. For a lock that is wrong: the lock would be released (or never released, when
the thread took it) while the protected write is still running. :func:`run_blocking`
therefore waits for the thread to finish even when cancelled, undoes a result the caller
no longer wants (a lock taken for a task that was cancelled), and only then re-raises.

The work runs on a small dedicated pool, not the loop's default executor, so that
``asyncio.run`` tearing the loop down cannot drop a queued release; the pool is recreated
in a child after ``fork()`` (threads do not survive a fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

__all__ = ["run_blocking"]

T = TypeVar("T")

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _reset_after_fork() -> None:
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_reset_after_fork)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = min(16, (os.cpu_count() or 1) + 4)
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fa-io")
        return _pool


class _Call:
    """One call handed to a worker: its outcome, and the future that wakes the caller."""

    __slots__ = ("error", "finished", "result", "waiter")

    def __init__(self) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.finished = False  # set by the worker before it wakes the loop
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """Resolve the caller's current waiter (on the loop, after ``finished``)."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _work(
    loop: asyncio.AbstractEventLoop,
    call: _Call,
    fn: Callable[..., object],
    args: tuple[object, ...],
) -> None:
    try:
        call.result = fn(*args)
    except BaseException as exc:  # handed to the caller, re-raised there
        call.error = exc
    call.finished = True
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(call.wake)


async def run_blocking(
    fn: Callable[..., T], *args: object, undo: Callable[[T], object] | None = None
) -> T:
    """Run ``fn(*args)`` in a worker thread; a cancel waits for it, then ``undo``es it.

    The worker wakes the loop itself (one ``call_soon_threadsafe``) instead of through a
    ``concurrent.futures.Future`` wrapped and shielded on the loop: ~40 us less per
    hand-off on a 2-core VM, where each save makes one.
    """
    loop = asyncio.get_running_loop()
    call = _Call()
    _executor().submit(_work, loop, call, fn, args)
    cancelled = False
    while not call.finished:
        call.waiter = loop.create_future()
        try:
            await call.waiter
        except asyncio.CancelledError:
            cancelled = True  # the work goes on: wait for it, then undo what it did
    if cancelled:
        if undo is not None and call.error is None:
            _executor().submit(undo, cast("T", call.result))
        raise asyncio.CancelledError()
    if call.error is not None:
        error, call.error = call.error, None  # no cycle through the traceback
        raise error
    return cast("T", call.result)
