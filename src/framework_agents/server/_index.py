"""The server's thread list: one small summary per thread, paged by key (keyset).

``GET /api/threads`` pages threads newest first. Loading every checkpoint to sort them
would cost every history on every page; instead the server keeps, in its storage, entries
whose keys sort newest first and whose values are the thread's summary::

    server/recent/<19-digit inverted microseconds>-<thread_id>           every thread
    server/state/<state>/<19-digit inverted microseconds>-<thread_id>    the same, per state
    server/threads/<thread_id>/recent        the thread's two entry keys, one a line

``<state>`` is ``running`` (a run or resume in progress), ``waiting`` (an approval is
open) or ``finished``. A page asks the storage for the next keys after the cursor (the
last key's ``<inverted time>-<thread_id>``), ``limit`` of them: on the SQL and Redis
stores one range read of the key index (``list_after``, O(log n + page)); on the others
their sorted key list (names only, cut with a bisection). It then reads the page's
summaries and the threads' pointers (one ``get_many`` on those stores): an entry its
pointer does not name (two replicas recording one thread at once may leave one) is
skipped. A search (``q=``) reads entries in order until its page is full.
``updated_after`` / ``updated_before`` bound the keys' time part: they cost nothing more.

The entries are written whenever the server records a run, resume, edit or branch (the
checkpoint is read then), with ``running`` when a run starts, and dropped when the thread
is deleted. Threads the server never recorded (written by another tool on the same store)
are found by :meth:`ThreadIndex.reconcile`, which lists every thread (O(threads)): the
runner calls it for a first page at most every ``RECONCILE_SECONDS``. It also drops the
entries of threads deleted by another tool, except a thread listed as running for less
than ``STALE_RUNNING`` seconds (a first run has no checkpoint until it ends).
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import json
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import (
    CorruptStoreError,
    InvalidArgumentError,
    StorageKeyInvalidError,
    ThreadIdInvalidError,
)

__all__ = [
    "MAX_LIMIT",
    "RECENT",
    "STATES",
    "ThreadIndex",
    "count_keys",
    "decode_cursor",
    "encode_cursor",
    "get_many",
    "list_after",
    "state_of",
]

logger = logging.getLogger(__name__)

RECENT = "server/recent/"
BY_STATE = "server/state/"
#: The states a thread list filters by.
STATES = ("running", "waiting", "finished")
#: The largest page (a larger ``limit`` is clamped by the JSON API, and says so).
MAX_LIMIT = 500
#: Seconds after which a thread listed as running with no checkpoint is dropped as gone.
STALE_RUNNING = 3600.0
#: Microseconds are inverted against this bound so that later times sort first.
_BOUND = 10**19 - 1
_SUFFIX = re.compile(r"[0-9]{19}-(.+)\Z")


def _inverted(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _BOUND - int(moment.timestamp() * 1_000_000)


def _suffix(saved_at: datetime, thread_id: str) -> str:
    return f"{_inverted(saved_at):019d}-{thread_id}"


def state_of(summary: dict[str, Any]) -> str:
    """The list state of a summary: its own, else ``waiting`` or ``finished``."""
    state = summary.get("state")
    if state in STATES:
        return str(state)
    return "waiting" if summary.get("pending") else "finished"


def encode_cursor(suffix: str) -> str:
    """The opaque cursor of a page that ends at the entry ``<inverted time>-<thread_id>``."""
    return base64.urlsafe_b64encode(suffix.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The entry a cursor names (``INVALID_ARGUMENT`` when this server never gave it)."""
    refused = InvalidArgumentError(f"cursor {cursor!r:.60} is not one this server gave")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise refused from exc
    text = text.removeprefix(RECENT)  # a cursor of an earlier release named the whole key
    found = _SUFFIX.fullmatch(text)
    if found is None:
        raise refused
    try:
        check_thread_id(found.group(1))
    except ThreadIdInvalidError as exc:
        raise refused from exc
    return text


async def list_after(storage: Any, prefix: str, after: str | None, limit: int) -> list[str]:
    """Up to ``limit`` keys under ``prefix`` greater than ``after``, sorted.

    A storage with ``list_after`` (the SQL and Redis stores) answers from its key index;
    any other lists the prefix (names only) and cuts it.
    """
    ranged = getattr(storage, "list_after", None)
    if callable(ranged):
        keys: list[str] = await ranged(prefix, after, limit)
        return keys
    every = sorted(await storage.list(prefix))
    start = 0 if after is None else bisect.bisect_right(every, after)
    return every[start : start + limit]


async def count_keys(storage: Any, prefix: str, before: str | None = None) -> int:
    """How many keys under ``prefix`` are less than ``before`` (``None``: all of them).

    A storage with ``count_after`` (SQL: one ``count(*)`` over the key range, no key sent
    back; Redis: one ``ZLEXCOUNT``) counts them; any other lists the prefix (names only,
    O(keys under it): the directory store) and cuts it.
    """
    counted = getattr(storage, "count_after", None)
    if callable(counted):
        found: int = await counted(prefix, None, before)
        return found
    every = sorted(await storage.list(prefix))
    return len(every) if before is None else bisect.bisect_left(every, before)


def _key_range(
    prefix: str,
    after: str | None,
    updated_after: datetime | None,
    updated_before: datetime | None,
) -> tuple[str | None, str | None]:
    """The keys a page lists between: after ``start`` and before ``stop`` (``None``: open)."""
    start = None if after is None else prefix + after
    if updated_before is not None:  # past every entry at or after that time
        bound = f"{prefix}{_inverted(updated_before):019d}."
        start = bound if start is None else max(start, bound)
    stop = None
    if updated_after is not None:  # entries at or before that time end the listing
        stop = f"{prefix}{_inverted(updated_after):019d}-"
    return start, stop


class ThreadIndex:
    """The summaries of a server's threads in its storage (see the module docstring)."""

    def __init__(self, storage: Any, summary: Callable[[ThreadCheckpoint], dict[str, Any]]):
        """``summary(checkpoint)``: the JSON summary of a thread (with ``saved_at``)."""
        self.storage = storage
        self.summary = summary

    @staticmethod
    def _pointer(thread_id: str) -> str:
        return f"server/threads/{thread_id}/recent"

    async def enter(self, checkpoint: ThreadCheckpoint) -> None:
        """Write the thread's entries for ``checkpoint`` (replacing its previous ones)."""
        summary = self.summary(checkpoint)
        await self.enter_summary(checkpoint.thread_id, checkpoint.saved_at, summary)

    async def enter_running(self, thread_id: str, title: str) -> None:
        """Enter the thread as ``running`` now (its summary kept, else titled ``title``)."""
        old = await self._pointed(thread_id)
        current = await self._read(old[0], thread_id) if old else None
        summary = current or {"title": title, "message_count": 0, "pending": False}
        summary = {**summary, "state": "running", "pending": False}
        now = datetime.now(UTC)
        summary["saved_at"] = now.isoformat()
        summary.pop("thread_id", None)
        await self.enter_summary(thread_id, now, summary, old)

    async def enter_summary(
        self,
        thread_id: str,
        saved_at: datetime,
        summary: dict[str, Any],
        old: list[str] | None = None,
    ) -> None:
        """Write ``summary`` as the thread's entries, then drop the ones it replaces.

        ``old``: the thread's current keys when the caller just read them.
        """
        state = state_of(summary)
        summary = {**summary, "state": state}
        suffix = _suffix(saved_at, thread_id)
        keys = [f"{RECENT}{suffix}", f"{BY_STATE}{state}/{suffix}"]
        data = json.dumps(summary).encode()
        for key in keys:
            await self.storage.put(key, data)
        if old is None:
            old = await self._pointed(thread_id)
        await self.storage.put(self._pointer(thread_id), "\n".join(keys).encode())
        for key in old:
            if key not in keys:
                await self.storage.delete(key)

    async def _pointed(self, thread_id: str) -> list[str]:
        raw = await self.storage.get(self._pointer(thread_id))
        if raw is None:
            return []
        return [k for k in raw.decode(errors="replace").splitlines() if k]

    async def drop(self, thread_id: str) -> None:
        """Forget the thread's entries."""
        for key in await self._pointed(thread_id):
            await self.storage.delete(key)
        await self.storage.delete(self._pointer(thread_id))

    async def page(
        self,
        *,
        limit: int,
        after: str | None,
        query: str | None = None,
        state: str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Up to ``limit`` summaries newest first after the entry ``after``, and the next.

        ``state``: only threads in that state; ``updated_after`` / ``updated_before``:
        only threads last updated after / before that time (both exclusive).
        """
        prefix = RECENT if state is None else f"{BY_STATE}{state}/"
        start, stop = _key_range(prefix, after, updated_after, updated_before)
        needle = query.casefold() if query else None
        page: list[dict[str, Any]] = []
        seen: set[str] = set()
        while True:
            want = limit + 1 - len(page)
            keys = await list_after(self.storage, prefix, start, want)
            entries = [(k, k[len(prefix) :]) for k in keys if stop is None or k < stop]
            rows = await self._entries(entries)
            for (_key, suffix), summary in zip(entries, rows, strict=True):
                thread_id = suffix[20:]
                if summary is None or thread_id in seen:
                    continue
                if not _matches(summary, thread_id, needle):
                    continue
                if len(page) == limit:  # one more exists: the page ends at the last taken
                    return page, _strip(page)
                seen.add(thread_id)
                summary["_cursor"] = suffix
                page.append(summary)
            if len(keys) < want or len(entries) < len(keys):
                _strip(page)
                return page, None
            start = keys[-1]

    async def _entries(self, entries: list[tuple[str, str]]) -> list[dict[str, Any] | None]:
        """The summaries of ``(key, suffix)`` entries whose thread's pointer names them.

        An entry no longer pointed at (a thread deleted elsewhere, or entered twice at
        once by two replicas) is ``None``: skipped, not removed (an entry being written
        has no pointer yet, or the old one). One read for the entries and the pointers.
        """
        pointers = [self._pointer(suffix[20:]) for _key, suffix in entries]
        values = await get_many(self.storage, [k for k, _s in entries] + pointers)
        summaries: list[dict[str, Any] | None] = []
        for (key, suffix), pointer in zip(entries, pointers, strict=True):
            pointed = values.get(pointer, b"").decode(errors="replace").splitlines()
            raw = values.get(key)
            summaries.append(
                _parsed(raw, suffix[20:]) if raw is not None and key in pointed else None
            )
        return summaries

    async def _read(self, key: str, thread_id: str) -> dict[str, Any] | None:
        raw = await self.storage.get(key)
        return None if raw is None else _parsed(raw, thread_id)

    async def reconcile(
        self,
        known: list[str],
        load: Callable[[str], Awaitable[ThreadCheckpoint | None]],
        running: Callable[[str], bool] = lambda thread_id: False,
    ) -> None:
        """Enter the ``known`` threads that have no entry, drop entries of threads gone.

        A thread ``running`` here, or one entered by someone else while this looked, is
        left alone: its run writes its own line, and a line written from a checkpoint
        read before it would replace that line (a run listed running, then not).
        Costs a listing of every entry (names only) and one load per thread entered.
        """
        alive = {t for t in known if _listable(t)}
        entered: set[str] = set()
        for key in await self.storage.list(RECENT):
            found = _SUFFIX.fullmatch(key[len(RECENT) :])
            if found is None:
                continue
            thread_id = found.group(1)
            entered.add(thread_id)
            if thread_id not in alive and not await self._running_lately(thread_id):
                try:
                    await self.drop(thread_id)  # deleted by another tool
                except StorageKeyInvalidError:
                    await self.storage.delete(key)
        for thread_id in sorted(alive - entered):
            if running(thread_id):
                continue
            try:
                checkpoint = await load(thread_id)
                if checkpoint is not None and not running(thread_id):
                    if await self._pointed(thread_id):
                        continue  # entered meanwhile (a run that started, another replica)
                    await self.enter(checkpoint)
            except (ThreadIdInvalidError, StorageKeyInvalidError, CorruptStoreError) as exc:
                # One thread that cannot be listed (a damaged checkpoint) is left out,
                # never the whole list for everyone.
                logger.warning("thread list: leaving out thread %r: %s", thread_id, exc)

    async def _running_lately(self, thread_id: str) -> bool:
        """Whether the thread was entered as running within ``STALE_RUNNING`` seconds.

        A first run has no checkpoint until it ends: its line must not be dropped as a
        thread gone. One left by a server that died running it goes after that long.
        """
        for key in await self._pointed(thread_id):
            if key.startswith(f"{BY_STATE}running/"):
                found = _SUFFIX.fullmatch(key[len(BY_STATE) + len("running/") :])
                if found is not None:
                    micros = _BOUND - int(key[len(BY_STATE) + 8 : len(BY_STATE) + 27])
                    started = datetime.fromtimestamp(micros / 1_000_000, UTC)
                    return datetime.now(UTC) - started < timedelta(seconds=STALE_RUNNING)
        return False


def _parsed(raw: bytes, thread_id: str) -> dict[str, Any] | None:
    """A stored summary with its thread id (``None``: damaged, skipped)."""
    try:
        summary = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(summary, dict):
        return None
    summary["thread_id"] = thread_id
    return summary


#: Reads in flight at once where a storage has no ``get_many`` (a pool's size or less).
_READS = 8


async def get_many(storage: Any, keys: list[str]) -> dict[str, bytes]:
    """The stored values of ``keys``: one read where the storage has ``get_many``."""
    many = getattr(storage, "get_many", None)
    if callable(many):
        found: dict[str, bytes] = await many(keys)
        return found
    gate = asyncio.Semaphore(_READS)

    async def one(key: str) -> bytes | None:
        async with gate:
            value: bytes | None = await storage.get(key)
            return value

    values = await asyncio.gather(*(one(k) for k in keys))
    return {k: v for k, v in zip(keys, values, strict=True) if v is not None}


def _strip(page: list[dict[str, Any]]) -> str:
    """Take the cursors off ``page``'s summaries; the last one's."""
    last = ""
    for summary in page:
        last = str(summary.pop("_cursor", ""))
    return last


def _listable(thread_id: str) -> bool:
    """Whether ``thread_id`` passes today's id rule (a store may hold older ones: logged)."""
    try:
        check_thread_id(thread_id)
    except ThreadIdInvalidError as exc:
        logger.warning("thread list: leaving out thread %r: %s", thread_id, exc)
        return False
    return True


def _matches(summary: dict[str, Any], thread_id: str, needle: str | None) -> bool:
    """Whether a thread's id or title holds ``needle`` (casefolded; none: every thread)."""
    if not needle:
        return True
    title = str(summary.get("title", "")).casefold()
    return needle in thread_id.casefold() or needle in title
