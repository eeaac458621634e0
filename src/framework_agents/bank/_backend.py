"""Where a memory bank keeps its records: the backend contract and the in-process backend.

A backend stores the truth of a bank: records (the latest revision of each, with the
record's world clock and expiry), every revision of them, a **change log** and pending
extraction jobs. The change log is a sequence of ``(seq, record_id)``: each write that
touches a record (a remember, an update, a closing by a newer record of its key, a
forget) appends one entry, in commit order, and holds no text. Every process that shares
the bank keeps its own search index (:mod:`._index`) derived from the records, and before
each search reads the log from where it last stopped: so a search sees every record
whose write returned before it started, whichever process wrote it, and a forgotten
record leaves nothing behind but ids in the log.

Every backend implements :class:`BankBackend` with one atomic transaction per method;
the rules they all apply (the key timeline, the stored shape) are in :mod:`._records`.
The in-process backend (:class:`InMemoryBankBackend`) and the directory backend
(:mod:`._files`) live in this package; the SQLite, PostgreSQL and Redis backends live in
``framework_agents.stores`` with the other database code (the rule: a concept owns its
in-process and file backends, ``stores`` owns every database backend).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .._crypto import Cipher, DataKey
from ..errors import InvalidArgumentError
from ._records import Namespace, Row, check_namespace, place_on_timeline

__all__ = ["BankBackend", "InMemoryBankBackend", "Job", "Revision", "SealingBackend"]


class Revision(NamedTuple):
    """What an update changes: ``None`` keeps the latest revision's value."""

    text: str | None
    metadata: dict[str, Any] | None
    #: The embedder's vector of the new text (with ``text`` only).
    vector: bytes | None
    recorded_at: int

    def after(self, last: Row) -> Row:
        """The revision this change makes of ``last`` (the record's latest revision)."""
        return replace(
            last,
            revision=last.revision + 1,
            text=last.text if self.text is None else self.text,
            vector=last.vector if self.text is None else self.vector,
            metadata=last.metadata if self.metadata is None else self.metadata,
            recorded_at=self.recorded_at,
        )


class Job(NamedTuple):
    """A pending extraction: its id, namespace and the messages it works on (JSON bytes)."""

    id: str
    namespace: Namespace
    payload: bytes


@runtime_checkable
class BankBackend(Protocol):
    """The storage of a memory bank; each method is one atomic transaction."""

    async def insert(self, rows: Sequence[Row], *, job: str | None = None) -> list[Row] | None:
        """Store new records (revision 1 each); the stored rows, in order.

        A row whose id is already stored is not written again: the stored latest revision
        is returned in its place (remembering is idempotent by id). A row with a ``key``
        is placed on its key's timeline (:func:`~._records.place_on_timeline`), closing
        the record before it. With ``job``, everything happens only if that job is still
        pending, and the job is completed (removed) in the same transaction; ``None`` when
        it was not pending (nothing written). Each touched record gets a log entry.
        """
        ...

    async def revise(self, record_id: str, change: Revision) -> Row | None:
        """Append a revision to ``record_id`` (latest + 1); ``None`` if it is unknown."""
        ...

    async def latest(self, ids: Sequence[str]) -> list[Row]:
        """The latest revisions of the stored records among ``ids`` (unknown ones skipped)."""
        ...

    async def revisions(self, record_id: str) -> list[Row]:
        """Every revision of ``record_id``, oldest first (``[]`` if unknown)."""
        ...

    async def changes(self, after: int) -> list[tuple[int, str]]:
        """The log entries after ``after`` (``(seq, record_id)``, in seq order)."""
        ...

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove the records among ``ids`` with every revision and vector; how many."""
        ...

    async def add_job(self, job: Job) -> None:
        """Store a pending extraction job (nothing if a job of that id is stored)."""
        ...

    async def jobs(self) -> list[Job]:
        """The pending extraction jobs, oldest first."""
        ...

    async def drop_job(self, job_id: str) -> None:
        """Remove a pending job without running it (its namespace is being forgotten)."""
        ...

    async def close(self) -> None:
        """Release connections (idempotent)."""
        ...


class SealingBackend:
    """What the directory, SQLite, PostgreSQL and Redis banks share when they seal (``cipher=``).

    Each namespace's records and jobs are sealed under a data key of its own, which the
    backend stores sealed by the cipher; a subclass caches the keys it opened in
    ``_dkeys`` (by namespace text) and implements :meth:`_drop_keys` and :meth:`_reseal`.
    """

    #: Seals the data keys (``cipher=``; ``None``: nothing sealed).
    _cipher: Cipher | None = None
    _dkeys: dict[str, DataKey]

    def use_cipher(self, cipher: Cipher | None) -> None:
        """Seal records, vectors and jobs with a data key per namespace, sealed by ``cipher``."""
        if cipher is not None and not isinstance(cipher, Cipher):
            raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
        self._cipher = cipher
        self._dkeys = {}

    async def forget_keys(self, namespace: Sequence[str]) -> int:
        """Destroy the data keys of ``namespace`` and of every namespace under it.

        Whatever they sealed is unreadable from then on (``MemoryBank.forget_namespace``).
        How many keys went (0 without ``cipher=``).
        """
        if self._cipher is None:
            return 0
        parts = tuple(check_namespace(tuple(namespace)))
        gone = await self._drop_keys(lambda text: tuple(json.loads(text))[: len(parts)] == parts)
        self._dkeys = {}
        return gone

    async def rotate(self, *, migrate: bool = False) -> int:
        """Seal every data key under ``cipher.current``; how many values were written.

        ``migrate``: also seal what is plain (a bank written without ``cipher=``);
        otherwise a plain value is left as it is.
        """
        cipher = self._cipher
        if cipher is None:
            raise InvalidArgumentError("rotate() needs a bank with cipher=")
        written = await self._reseal(cipher, migrate)
        self._dkeys = {}
        return written

    async def _drop_keys(self, under: Callable[[str], bool]) -> int:
        """Delete the stored data keys whose namespace text ``under`` accepts; how many."""
        raise NotImplementedError

    async def _reseal(self, cipher: Cipher, migrate: bool) -> int:
        """:meth:`rotate`'s writes: the data keys re-sealed (and, ``migrate``, the plain)."""
        raise NotImplementedError


class InMemoryBankBackend:
    """A bank backend in this process's memory (``MemoryBank()``, ``open_store("memory:")``).

    Shared by every bank object given it (and by the threads of the process: a lock
    guards each operation), gone when the process ends.
    """

    def __init__(self) -> None:
        """An empty bank."""
        self._lock = threading.Lock()
        self._revisions: dict[str, list[Row]] = {}
        self._log: list[str] = []  # entry n has seq n + 1
        self._jobs: dict[str, Job] = {}
        self._keys: dict[tuple[Namespace, str], list[str]] = {}  # a key's timeline

    def __repr__(self) -> str:
        """The backend and how many records it holds."""
        return f"InMemoryBankBackend({len(self._revisions)} records)"

    def _touch(self, record_id: str) -> None:
        self._log.append(record_id)

    def _set_valid_to(self, record_id: str, valid_to: int | None) -> None:
        self._revisions[record_id] = [
            replace(r, valid_to=valid_to) for r in self._revisions[record_id]
        ]
        self._touch(record_id)

    async def insert(self, rows: Sequence[Row], *, job: str | None = None) -> list[Row] | None:
        """Store new records (see :meth:`BankBackend.insert`)."""
        with self._lock:
            if job is not None and self._jobs.pop(job, None) is None:
                return None
            for row in rows:
                if row.id in self._revisions:
                    continue
                if row.key is not None:
                    timeline = self._keys.setdefault((row.namespace, row.key), [])
                    siblings = [self._revisions[i][-1] for i in timeline]
                    row, closings = place_on_timeline(siblings, row)
                    for record_id, valid_to in closings:
                        self._set_valid_to(record_id, valid_to)
                    timeline.append(row.id)
                self._revisions[row.id] = [row]
                self._touch(row.id)
            # As stored at the end: a later row of the same key may have closed an earlier one.
            return [self._revisions[row.id][-1] for row in rows]

    async def revise(self, record_id: str, change: Revision) -> Row | None:
        """Append a revision (see :meth:`BankBackend.revise`)."""
        with self._lock:
            revisions = self._revisions.get(record_id)
            if revisions is None:
                return None
            row = change.after(revisions[-1])
            revisions.append(row)
            self._touch(record_id)
            return row

    async def latest(self, ids: Sequence[str]) -> list[Row]:
        """The latest revisions of the known records among ``ids``."""
        with self._lock:
            return [self._revisions[i][-1] for i in ids if i in self._revisions]

    async def revisions(self, record_id: str) -> list[Row]:
        """Every revision of ``record_id``, oldest first."""
        with self._lock:
            return list(self._revisions.get(record_id, ()))

    async def changes(self, after: int) -> list[tuple[int, str]]:
        """The log entries after ``after``."""
        with self._lock:
            return [(seq, rid) for seq, rid in enumerate(self._log[after:], start=after + 1)]

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove the records among ``ids``; how many were stored."""
        with self._lock:
            removed = 0
            for record_id in dict.fromkeys(ids):
                revisions = self._revisions.pop(record_id, None)
                if revisions is None:
                    continue
                last = revisions[-1]
                if last.key is not None:
                    timeline = self._keys[(last.namespace, last.key)]
                    timeline.remove(record_id)
                    if not timeline:
                        del self._keys[(last.namespace, last.key)]
                self._touch(record_id)
                removed += 1
            return removed

    async def add_job(self, job: Job) -> None:
        """Store a pending extraction job (idempotent by id)."""
        with self._lock:
            self._jobs.setdefault(job.id, job)

    async def jobs(self) -> list[Job]:
        """The pending jobs, oldest first."""
        with self._lock:
            return list(self._jobs.values())

    async def drop_job(self, job_id: str) -> None:
        """Remove a pending job."""
        with self._lock:
            self._jobs.pop(job_id, None)

    async def close(self) -> None:
        """Nothing to release."""
