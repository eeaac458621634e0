"""The thread list: pages of the thread index, each line settled as it is read.

A page reads the index's lines only (``_index``), never the threads' histories. A first
page brings the index up to date first: threads written by another tool are entered at
most every ``RECONCILE_SECONDS`` (per tenant), and a list of waiting threads settles the
lines listed running first. A line listed running whose run died in an approved call is
shown waiting, that call as its open interrupt (a checkpoint read per such line).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypedDict, Unpack

from ..errors import InvalidArgumentError
from ._index import MAX_LIMIT, STATES, ThreadIndex, decode_cursor, encode_cursor
from ._shapes import ThreadSummary, summary_from_json, summary_json
from ._tenants import current_tenant

__all__ = ["RECONCILE_SECONDS", "Match", "ThreadList"]

logger = logging.getLogger(__name__)

#: A first page of the thread list looks for threads the server never recorded (written
#: by another tool: every thread id listed, O(threads)) at most this often.
RECONCILE_SECONDS = 30.0


class Match(TypedDict, total=False):
    """What a page of the thread list matches, passed on to the index as it is.

    ``query``: a text the line's title or id holds (any case); ``updated_after`` /
    ``updated_before``: last updated after / before that time.
    """

    query: str | None
    updated_after: datetime | None
    updated_before: datetime | None


class ThreadList:
    """The thread list of one store (see the module docstring)."""

    def __init__(
        self,
        index: ThreadIndex,
        known: Callable[[], Awaitable[list[str]]],
        load: Callable[[str], Awaitable[Any]],
        busy: Callable[[str], bool],
    ) -> None:
        """List ``index`` with the runner's reads.

        ``known`` lists every thread id, ``load`` reads a thread as the runner shows it
        (a dead run's call of unknown outcome as its open interrupt), ``busy`` says
        whether a run of it is in progress in this process.
        """
        self.index = index
        self._known = known
        self._load = load
        self._busy = busy
        #: When each tenant's thread list last looked for new threads (none yet: at once).
        self._reconciled: dict[str | None, float] = {}

    async def page(
        self,
        *,
        limit: int = 50,
        cursor: str | None = None,
        state: str | None = None,
        **match: Unpack[Match],
    ) -> tuple[list[ThreadSummary], str | None]:
        """A page of threads, newest first, and the cursor of the next page.

        Reads the page's summaries only (see ``_index``), never the threads' histories.
        ``state``: ``running``, ``waiting`` or ``finished`` only; ``match``: what the
        index matches lines on (:class:`Match`).
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidArgumentError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        if state is not None and state not in STATES:
            raise InvalidArgumentError(f"state must be one of {', '.join(STATES)}, got {state!r}")
        after = decode_cursor(cursor) if cursor else None
        if after is None:
            await self._before_first_page(state)
        rows, last = await self.index.page(limit=limit, after=after, state=state, **match)
        page = [s for s in map(summary_from_json, rows) if s is not None]
        page = list(await asyncio.gather(*map(self.settled, page)))
        if state is not None:
            page = [s for s in page if s.state == state]
        return page, (encode_cursor(last) if last is not None else None)

    async def _before_first_page(self, state: str | None) -> None:
        """Bring the index up to date for a list's first page.

        Threads written by another tool are entered at most every ``RECONCILE_SECONDS``
        (per tenant: each has its own index); a list of waiting threads settles the lines
        listed running first.
        """
        tenant = current_tenant()
        looked = self._reconciled.get(tenant, -RECONCILE_SECONDS)
        if time.monotonic() >= looked + RECONCILE_SECONDS:
            self._reconciled[tenant] = time.monotonic()
            known = await self._known()
            await self.index.reconcile(known, self._load, self._busy)
        if state == "waiting":
            await self._settle_running()

    async def _settle_running(self) -> None:
        """Re-list as waiting the lines listed running whose run died in a call.

        A list of waiting threads reads the waiting lines only: a thread a dead run left
        listed running would never appear in it, unless an unfiltered list happened to
        settle it (:meth:`_settled`) once its lock was free (a dead holder's lease may
        still run then). So its first page settles the running lines first (up to
        ``MAX_LIMIT``): a checkpoint read per line not running in this process.
        """
        rows, _last = await self.index.page(limit=MAX_LIMIT, after=None, state="running")
        lines = [s for s in map(summary_from_json, rows) if s is not None]
        await asyncio.gather(*map(self.settled, lines))

    async def settled(self, summary: ThreadSummary) -> ThreadSummary:
        """``summary``, or a line listed running whose run died in a call: now waiting.

        A line stays ``running`` when its run is in progress here or elsewhere; one left by
        a dead run in an approved call shows that call as an open interrupt (the runner's
        ``load``). Costs a checkpoint read per line listed running elsewhere.
        """
        if summary.state != "running" or self._busy(summary.thread_id):
            return summary
        try:
            checkpoint = await self._load(summary.thread_id)
        except Exception:  # the line is shown as it was; the thread's own GET says why
            logger.exception("thread list: could not read thread %s", summary.thread_id)
            return summary
        if checkpoint is None or checkpoint.pending is None:
            return summary
        shown = summary_from_json({**summary_json(checkpoint), "thread_id": summary.thread_id})
        return shown or summary
