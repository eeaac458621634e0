"""Thread locks with a lease, shared by the database checkpointers (internal).

A backend supplies three coroutines: ``try_acquire(thread_id, owner) -> fence | None``,
``renew(thread_id, owner) -> bool`` and ``release(thread_id, owner)``. :class:`LeaseLocks`
polls ``try_acquire`` until the wait runs out (THREAD_BUSY), renews the lease every third
of its length while the run holds the thread, and releases it at the end. It remembers
which threads this instance holds, with their owner token and fencing token, so the
backend's writes can be fenced: a write under a lock this instance no longer owns is
refused by the database (CHECKPOINT_CONFLICT), whatever this process believes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from ..errors import AgentError, ThreadBusyError
from ._codec import new_owner

__all__ = ["Held", "LeaseLocks"]

logger = logging.getLogger(__name__)

_POLL_MIN = 0.02
_POLL_MAX = 0.25


def _log_failure(doing: str, thread_id: str, failure: Exception, *, quiet: bool = False) -> None:
    """Log a lock operation that failed where nobody can be told (its lease runs out).

    A coded error (the backend is down: ``BACKEND_UNAVAILABLE``) is one line, at DEBUG
    when ``quiet`` (the caller is raising the same failure); anything else, which would
    be a bug, keeps its traceback.
    """
    if isinstance(failure, AgentError):
        level = logging.DEBUG if quiet else logging.WARNING
        logger.log(level, "%s thread %r failed (%s); its lease runs out", doing, thread_id, failure)
    else:
        logger.warning("%s thread %r failed", doing, thread_id, exc_info=failure)


@dataclass(slots=True)
class Held:
    """One acquisition of a thread lock by this instance."""

    owner: str
    fence: int
    renewal: asyncio.Task[None] | None = field(default=None, repr=False)


@dataclass(kw_only=True, eq=False)
class LeaseLocks:
    """Acquire, renew and release thread locks through a backend's three operations.

    Each takes ``(thread_id, owner)``. ``give_up``, when given, is told of every acquire
    abandoned (busy or cancelled); without it ``release`` undoes a cancelled one.
    ``held``: this instance's holds, by thread id.
    """

    lease: float
    try_acquire: Callable[[str, str], Awaitable[int | None]]
    renew: Callable[[str, str], Awaitable[bool]]
    release: Callable[[str, str], Awaitable[None]]
    give_up: Callable[[str, str], Awaitable[None]] | None = None
    held: dict[str, Held] = field(default_factory=dict, init=False)

    async def _acquire(self, thread_id: str, wait: float | None) -> Held:
        owner = new_owner()
        try:
            return await self._poll(thread_id, owner, wait)
        except ThreadBusyError:
            if self.give_up is not None:
                await asyncio.shield(self.give_up(thread_id, owner))
            raise
        except BaseException as exc:
            # Cancelled (or failed) while an attempt was in flight: the database may have
            # taken the lock for ``owner`` all the same (a SQLite transaction the worker
            # committed, a Redis script already sent). Nobody would release it before its
            # lease ran out, so it is released here (by owner: nothing if not taken).
            undo = self.give_up or self.release
            try:
                await asyncio.shield(undo(thread_id, owner))
            except Exception as failure:  # the lease runs out on its own
                # A failed acquire already tells the caller why (the same backend that
                # is down again): only a cancelled one says so here.
                quiet = not isinstance(exc, asyncio.CancelledError)
                _log_failure("giving up", thread_id, failure, quiet=quiet)
            raise

    async def _poll(self, thread_id: str, owner: str, wait: float | None) -> Held:
        deadline = None if wait is None else time.monotonic() + wait
        delay = _POLL_MIN
        while True:
            fence = await self.try_acquire(thread_id, owner)
            if fence is not None:
                return Held(owner, fence)
            if deadline is not None and time.monotonic() >= deadline:
                raise ThreadBusyError(
                    f"thread {thread_id!r} is busy: another run (any process or machine) "
                    f"held it for {wait}s"
                )
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(pause)
            delay = min(delay * 2, _POLL_MAX)

    async def _keep(self, thread_id: str, held: Held) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                alive = await self.renew(thread_id, held.owner)
            except Exception as failure:  # retried; the database fences anyway
                _log_failure("renewing the lease of", thread_id, failure)
                continue
            if not alive:
                logger.warning("thread %r: lease lost; later writes will conflict", thread_id)
                return

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str, wait: float | None) -> AsyncIterator[Held]:
        """Hold ``thread_id`` for the body (THREAD_BUSY after ``wait``); not reentrant."""
        held = await self._acquire(thread_id, wait)
        held.renewal = asyncio.create_task(self._keep(thread_id, held))
        self.held[thread_id] = held
        try:
            yield held
        finally:
            if self.held.get(thread_id) is held:
                del self.held[thread_id]
            held.renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await held.renewal
            try:
                # Shielded: a second cancel arriving meanwhile must not stop the release
                # half-way (the lock would be held until its lease ran out).
                await asyncio.shield(self.release(thread_id, held.owner))
            except Exception as failure:  # the lease runs out on its own
                _log_failure("releasing", thread_id, failure)
