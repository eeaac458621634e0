"""Retention: ``ttl=`` and ``prune(older_than)`` for every store (internal).

Every shipped storage and checkpointer takes ``ttl=`` (seconds, ``None`` keeps forever)
and has ``await prune(older_than)`` (a ``timedelta``; default the ttl). A checkpointer's
prune never removes a thread that is held or waits for an approval.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import timedelta

from ._persist import check_seconds
from .checkpoint.model import ThreadCheckpoint
from .errors import AgentError, InvalidArgumentError

__all__ = ["AutoPrune", "check_older_than", "check_ttl", "waits_for_approval"]

logger = logging.getLogger(__name__)


#: The longest finite time to live (seconds, ~100 years): a Redis expiry is a 64-bit
#: count of milliseconds from now, which a larger one overflows (and a save whose
#: expiry failed had written its messages already). ``inf`` is no ttl.
TTL_MAX = 100 * 365 * 86400.0


def check_ttl(value: object) -> float | None:
    """A time to live in seconds (up to ``TTL_MAX``), or ``None`` (keep forever)."""
    seconds = check_seconds("ttl", value, optional=True, positive=True)
    if seconds is not None and not math.isfinite(seconds):
        return None
    if seconds is not None and seconds > TTL_MAX:
        raise InvalidArgumentError(
            f"ttl must be at most {TTL_MAX:.0f} seconds (or None: keep forever), got {seconds!r}"
        )
    return seconds


def check_older_than(older_than: object, ttl: float | None) -> float:
    """``prune()``'s age in seconds: ``older_than`` (a timedelta) or else the store's ttl."""
    if older_than is None:
        if ttl is None:
            raise InvalidArgumentError("prune() needs older_than when the store has no ttl")
        return ttl
    if not isinstance(older_than, timedelta):
        raise InvalidArgumentError(
            f"prune() takes a datetime.timedelta, not {type(older_than).__name__}"
        )
    seconds = older_than.total_seconds()
    if seconds < 0:
        raise InvalidArgumentError(f"prune() older_than must be >= 0, not {older_than}")
    return seconds


class AutoPrune:
    """``ttl=`` for stores without native expiry: ``prune()`` after writes, now and then.

    At most once every tenth of the ttl (and at least a second apart), a write is
    followed by ``prune()``, which keeps held and pending threads. A failed sweep is
    logged, never raised: the write itself succeeded.
    """

    ttl: float | None
    _next_prune: float = 0.0

    async def prune(self, older_than: timedelta | None = None) -> int:  # pragma: no cover
        """Remove what was not written for ``older_than`` (default: ``ttl``)."""
        raise NotImplementedError

    async def _after_write(self) -> None:
        if self.ttl is None:
            return
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + max(1.0, self.ttl / 10)
        try:
            await self.prune()
        except AgentError:
            logger.warning("ttl sweep of %r failed", self, exc_info=True)


def waits_for_approval(checkpoint: ThreadCheckpoint) -> bool:
    """Whether a stored checkpoint waits for a human: a pending call or calls in flight."""
    return checkpoint.pending is not None or bool(checkpoint.in_flight)
