"""A thread's timeline: its runs, resumes, edits and branches as the server recorded them.

Kept in the server's storage under ``server/threads/<thread_id>/timeline.json``. On a
storage that keeps logs (``append_logged``) an entry is one appended record, whatever the
timeline's length (folded into the document every ``_TIMELINE_FOLD`` records); elsewhere
the document is written again. Writes are conditional where the storage can (``swap``):
two replicas recording one thread at once both land, the later one after reading the
other's entry.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from ..errors import CheckpointConflictError
from ..sessions._base import as_logged, digest, swap

__all__ = ["Timeline"]

logger = logging.getLogger(__name__)

#: A timeline's log is folded into its document after this many appended entries.
_TIMELINE_FOLD = 256
#: Conditional timeline writes retried on a conflict before the entry is given up (logged).
_TIMELINE_ATTEMPTS = 8


class Timeline:
    """The timelines of a store's threads (see the module docstring)."""

    def __init__(self, storage: Any) -> None:
        """Keep timelines in ``storage`` (the server's)."""
        self.storage = storage

    @staticmethod
    def key(thread_id: str) -> str:
        """The storage key of ``thread_id``'s timeline."""
        return f"server/threads/{thread_id}/timeline.json"

    async def entries(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's entries, oldest first."""
        entries, _tag, _records = await self._read(thread_id)
        return entries

    async def _read(self, thread_id: str) -> tuple[list[dict[str, Any]], str | None, int]:
        """The entries, the tag a conditional write expects, and how many are logged."""
        storage, key = self.storage, self.key(thread_id)
        logged = as_logged(storage)
        if logged is not None:
            raw, records, tag = await logged.read_logged(key)
        else:
            raw = await storage.get(key)
            records, tag = [], None if raw is None else digest(raw)
        entries: list[dict[str, Any]] = []
        try:
            base = [] if raw is None else json.loads(raw)
            entries = [e for e in base if isinstance(e, dict)] if isinstance(base, list) else []
            entries += [json.loads(r) for r in records]
        except ValueError:
            logger.warning("unreadable timeline of thread %s; shown as far as it reads", thread_id)
        return entries, tag, len(records)

    async def append(self, thread_id: str, kind: str, label: str | None) -> None:
        """Append one entry (``run``, ``resume``, ``edit``, ``branch``); conflicts read again."""
        storage, key = self.storage, self.key(thread_id)
        logged = as_logged(storage)
        for _ in range(_TIMELINE_ATTEMPTS):
            entries, tag, count = await self._read(thread_id)
            rev = int(entries[-1].get("rev", len(entries))) + 1 if entries else 1
            entry = {"rev": rev, "kind": kind, "label": label, "at": datetime.now(UTC).isoformat()}
            try:
                if logged is not None and tag is not None and count < _TIMELINE_FOLD:
                    await logged.append_logged(key, json.dumps(entry).encode(), tag)
                else:
                    await swap(storage, key, json.dumps([*entries, entry]).encode(), tag)
            except CheckpointConflictError:
                continue  # another writer recorded meanwhile: read again
            return
        logger.warning(
            "timeline of thread %s: gave up after %d conflicts", thread_id, _TIMELINE_ATTEMPTS
        )
