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
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

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


async def run_blocking(
    fn: Callable[..., T], *args: object, undo: Callable[[T], object] | None = None
) -> T:
    """Run ``fn(*args)`` in a worker thread; a cancel waits for it, then ``undo``es it."""
    cfut: Future[T] = _executor().submit(fn, *args)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(asyncio.wrap_future(cfut))
        except asyncio.CancelledError:
            if not cfut.done():
                cancelled = True
                continue
            if cfut.exception() is not None:
                raise
            result = cfut.result()
            cancelled = True
        except BaseException:
            if cancelled:
                raise asyncio.CancelledError() from None
            raise
        break
    if cancelled:
        if undo is not None:
            _executor().submit(undo, result)
        raise asyncio.CancelledError()
    return result
