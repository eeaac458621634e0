"""Blocking I/O off the event loop that a cancellation cannot cut in half (internal).

``asyncio.to_thread`` lets the awaiting task go on after a cancel while the thread is still
working. For a lock that is wrong: the lock would be released (or never released, when
the thread took it) while the protected write is still running. :func:`run_blocking`
therefore waits for the thread to finish even when cancelled, undoes a result the caller
no longer wants (a lock taken for a task that was cancelled), and only then re-raises.

The work runs on a small dedicated pool, not the loop's default executor, so that
``asyncio.run`` tearing the loop down cannot drop a queued release; the pool is recreated
in a child after ``fork()`` (threads do not survive a fork).

Waiting is the one part of the work a cancel may cut short: a worker that waits for a lock
(:func:`wait_or_stop`) stops at once when the caller is cancelled, with nothing taken and
nothing written, instead of holding the cancel until another process lets the lock go
(for ever, when that process hangs).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

__all__ = ["StopWaiting", "run_blocking", "wait_or_stop"]

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


class StopWaiting(BaseException):
    """Raised by :func:`wait_or_stop` in a worker whose caller was cancelled: stop waiting.

    A ``BaseException``, so no ``except Exception`` on the way turns it into a failure;
    :func:`run_blocking` turns it into the caller's ``CancelledError``.
    """


#: Guards a call's current event against the cancel that sets it.
_stop_lock = threading.Lock()


class _Call:
    """One call handed to a worker: its outcome, and the future that wakes the caller."""

    __slots__ = ("error", "event", "finished", "result", "stop", "waiter")

    def __init__(self) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.finished = False  # set by the worker before it wakes the loop
        self.waiter: asyncio.Future[None] | None = None
        self.stop = False  # the caller was cancelled: a wait in the work ends
        self.event: threading.Event | None = None  # what the work waits for now

    def wake(self) -> None:
        """Resolve the caller's current waiter (on the loop, after ``finished``)."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def request_stop(self) -> None:
        """The caller was cancelled: end the work's current wait, and any later one."""
        with _stop_lock:
            self.stop = True
            if self.event is not None:
                self.event.set()


_current = threading.local()


def wait_or_stop(event: threading.Event, seconds: float | None) -> bool:
    """Wait in a worker for ``event`` (``False``: ``seconds`` passed first).

    Raises :class:`StopWaiting` once the caller of :func:`run_blocking` was cancelled,
    even when ``event`` came too: for a wait for something another process holds (a
    lock), where the work stops before it has done anything. Outside a
    :func:`run_blocking` call it is ``event.wait(seconds)``.
    """
    call: _Call | None = getattr(_current, "call", None)
    if call is None:
        return event.wait(seconds)
    with _stop_lock:
        call.event = event
        stopped = call.stop
    try:
        done = stopped or event.wait(seconds)
        if call.stop:
            raise StopWaiting
        return done
    finally:
        with _stop_lock:
            call.event = None


def _work(
    loop: asyncio.AbstractEventLoop,
    call: _Call,
    fn: Callable[..., object],
    args: tuple[object, ...],
) -> None:
    _current.call = call
    try:
        call.result = fn(*args)
    except BaseException as exc:  # handed to the caller, re-raised there
        call.error = exc
    finally:
        _current.call = None
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
            # The work goes on (a write is never cut in half): wait for it, then undo
            # what it did. Only a wait in it (``wait_or_stop``) ends early.
            cancelled = True
            call.request_stop()
    if cancelled:
        if undo is not None and call.error is None:
            _executor().submit(undo, cast("T", call.result))
        raise asyncio.CancelledError()
    if call.error is not None:
        error, call.error = call.error, None  # no cycle through the traceback
        raise error
    return cast("T", call.result)
