"""The server's thread list: one small summary per thread, ordered by its keys.

``GET /api/threads`` pages threads newest first. Loading every checkpoint to sort them
would cost every history on every page; instead the server keeps, in its storage, one
entry per thread whose key sorts newest first and whose value is the thread's summary::

    server/recent/<19-digit inverted microseconds>-<thread_id>   {"saved_at", "title", ...}
    server/threads/<thread_id>/recent                             the thread's entry's key

A page lists the keys (names only), cuts the page after the cursor (a key) and reads only
the entries of that page; a search reads entries in order until its page is full. The
entry is written whenever the server records a run, resume, edit or branch of the thread
(the checkpoint is read then), and dropped when the thread is deleted. Threads the server
never recorded (written by another tool on the same store) are found by comparing with
the checkpointer's thread ids, and entered once. Two replicas recording one thread at
once may leave two entries: a listing keeps the newest and drops the other.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import (
    CorruptStoreError,
    InvalidArgumentError,
    StorageKeyInvalidError,
    ThreadIdInvalidError,
)

__all__ = ["ThreadIndex", "decode_cursor", "encode_cursor"]

logger = logging.getLogger(__name__)

RECENT = "server/recent/"
#: Microseconds are inverted against this bound so that later times sort first.
_BOUND = 10**19 - 1


def _order_key(saved_at: datetime, thread_id: str) -> str:
    if saved_at.tzinfo is None:
        saved_at = saved_at.replace(tzinfo=UTC)
    micros = int(saved_at.timestamp() * 1_000_000)
    return f"{RECENT}{_BOUND - micros:019d}-{thread_id}"


def _thread_of(key: str) -> str:
    return key[len(RECENT) + 20 :]


def encode_cursor(key: str) -> str:
    """The opaque cursor of a page that ends at ``key``."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The key a cursor names (``INVALID_ARGUMENT`` when this server never gave it)."""
    try:
        key = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"cursor {cursor!r:.60} is not one this server gave") from exc
    if not key.startswith(RECENT) or len(key) < len(RECENT) + 21 or key[len(RECENT) + 19] != "-":
        raise InvalidArgumentError(f"cursor {cursor!r:.60} is not one this server gave")
    return key


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
        """Write the thread's entry for ``checkpoint`` (replacing its previous one)."""
        thread_id = checkpoint.thread_id
        key = _order_key(checkpoint.saved_at, thread_id)
        await self.storage.put(key, json.dumps(self.summary(checkpoint)).encode())
        pointer = self._pointer(thread_id)
        old = await self.storage.get(pointer)
        await self.storage.put(pointer, key.encode())
        if old is not None and old.decode(errors="replace") != key:
            await self.storage.delete(old.decode(errors="replace"))

    async def drop(self, thread_id: str) -> None:
        """Forget the thread's entry."""
        pointer = self._pointer(thread_id)
        old = await self.storage.get(pointer)
        if old is not None:
            await self.storage.delete(old.decode(errors="replace"))
        await self.storage.delete(pointer)

    async def page(
        self,
        *,
        limit: int,
        after: str | None,
        query: str | None,
        known: list[str],
        load: Callable[[str], Awaitable[ThreadCheckpoint | None]],
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Up to ``limit`` summaries newest first after the key ``after``, and the next key.

        ``known`` are the checkpointer's thread ids: one without an entry is entered first
        (read with ``load``); an entry whose thread is gone is skipped.
        """
        known = [t for t in known if _listable(t)]
        keys = await self._keys(known, load)
        needle = query.casefold() if query else None
        page: list[dict[str, Any]] = []
        last: str | None = None
        for key, thread_id in _live_entries(keys, set(known), after):
            summary = await self._read(key, thread_id)
            if summary is None or not _matches(summary, thread_id, needle):
                continue
            if len(page) == limit:
                return page, last  # one more exists: the page ends at the last key taken
            page.append(summary)
            last = key
        return page, None

    async def _keys(
        self, known: list[str], load: Callable[[str], Awaitable[ThreadCheckpoint | None]]
    ) -> list[str]:
        """Every entry's key in order, after entering the ``known`` threads that had none."""
        keys = sorted(await self.storage.list(RECENT))
        seen = {_thread_of(k) for k in keys}
        missing = [t for t in known if t not in seen]
        if not missing:
            return keys
        for thread_id in missing:
            try:
                checkpoint = await load(thread_id)
                if checkpoint is not None:
                    await self.enter(checkpoint)
            except (ThreadIdInvalidError, StorageKeyInvalidError, CorruptStoreError) as exc:
                # One thread that cannot be listed (an id stored before the id rule refused
                # it, a damaged checkpoint) is left out, never the whole list for everyone.
                logger.warning("thread list: leaving out thread %r: %s", thread_id, exc)
        return sorted(await self.storage.list(RECENT))

    async def _read(self, key: str, thread_id: str) -> dict[str, Any] | None:
        raw = await self.storage.get(key)
        if raw is None:
            return None
        try:
            summary = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(summary, dict):
            return None
        summary["thread_id"] = thread_id
        return summary


def _listable(thread_id: str) -> bool:
    """Whether ``thread_id`` passes today's id rule (a store may hold older ones: logged)."""
    try:
        check_thread_id(thread_id)
    except ThreadIdInvalidError as exc:
        logger.warning("thread list: leaving out thread %r: %s", thread_id, exc)
        return False
    return True


def _live_entries(keys: list[str], alive: set[str], after: str | None) -> Iterator[tuple[str, str]]:
    """The keys (with their thread) past ``after``: each live thread's newest entry only."""
    taken: set[str] = set()
    for key in keys:
        thread_id = _thread_of(key)
        if thread_id in taken or thread_id not in alive:
            continue  # an older duplicate, or a thread deleted elsewhere
        taken.add(thread_id)
        if after is None or key > after:
            yield key, thread_id


def _matches(summary: dict[str, Any], thread_id: str, needle: str | None) -> bool:
    """Whether a thread's id or title holds ``needle`` (casefolded; none: every thread)."""
    if not needle:
        return True
    title = str(summary.get("title", "")).casefold()
    return needle in thread_id.casefold() or needle in title
