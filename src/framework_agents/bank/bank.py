"""``MemoryBank``: what an agent learns, kept across sessions, found by words, meaning and time.

The records, their revisions and the change log are the truth, kept by a backend
(:mod:`._backend`); the search index is derived from them in each process
(:mod:`._index`) and brought up to date from the change log before every read, so every
process sharing a bank sees every record whose ``remember`` returned before its search
started. See ``docs/memory-bank.md``.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, MemoryNotFoundError
from ..messages import Message
from ._backend import BankBackend, InMemoryBankBackend, Job, Revision
from ._index import BankIndex, Filter
from ._records import (
    MAX_KEY,
    MAX_KIND,
    MAX_TEXT,
    MemoryHit,
    MemoryRecord,
    Namespace,
    Row,
    check_count,
    check_kinds,
    check_metadata,
    check_namespace,
    check_new_record_id,
    check_record_id,
    check_short,
    check_text,
    check_ttl_seconds,
    derived_id,
    new_record_id,
    to_micros,
)

if TYPE_CHECKING:
    from ..stores._base import Store

__all__ = ["Embedder", "MemoryBank"]

#: An embedder: ``"minilm"``, or a callable ``texts -> vectors`` (sync or async).
Embedder = str | Callable[[list[str]], Any]

#: A query longer than this is cut (in characters) before it is analysed.
MAX_QUERY = 1_000_000
#: An index larger than this is searched off the event loop.
_IN_LOOP = 20_000


def _now() -> int:
    """The wall clock in microseconds since the epoch (one place, so tests can move it)."""
    return time.time_ns() // 1000


class _Embedding:
    """An embedder behind one call: ``texts -> float32 unit vectors`` (off the event loop)."""

    def __init__(self, embedder: Embedder) -> None:
        if embedder == "minilm":
            self._model: Any = None
            self._fn: Callable[[list[str]], Any] | None = None
        elif callable(embedder) and not isinstance(embedder, str):
            self._fn = embedder
        else:
            raise InvalidArgumentError(
                f"embedder must be 'minilm' or a callable texts -> vectors, not {embedder!r:.60}"
            )
        try:
            import numpy
        except ImportError:
            raise ImportError(
                "ranking by meaning needs numpy: pip install 'framework-agents[embeddings]'"
            ) from None
        self.np = numpy

    async def __call__(self, texts: list[str]) -> Any:
        """The unit vectors of ``texts``, one float32 row each."""
        np_ = self.np
        if self._fn is None:
            vectors = await asyncio.to_thread(self._minilm, texts)
        elif inspect.iscoroutinefunction(self._fn):
            vectors = await self._fn(texts)
        else:
            vectors = self._fn(texts)
            if inspect.isawaitable(vectors):
                vectors = await vectors
        try:
            array = np_.asarray(vectors, dtype=np_.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"the embedder returned no vectors: {exc}") from None
        if array.ndim != 2 or array.shape[0] != len(texts) or not np_.isfinite(array).all():
            raise InvalidArgumentError(
                f"the embedder must return one finite vector per text, got shape {array.shape}"
            )
        norms = np_.linalg.norm(array, axis=1, keepdims=True)
        return array / np_.clip(norms, 1e-12, None)

    def _minilm(self, texts: list[str]) -> Any:
        if self._model is None:
            from ..graph.embedding import MiniLM

            self._model = MiniLM()
        return self._model.embed(texts)

    def encode(self, vector: Any) -> bytes:
        """A vector as stored: float32, little-endian."""
        return bytes(self.np.asarray(vector, dtype="<f4").tobytes())

    def decode(self, data: bytes) -> Any:
        """Stored bytes as a float32 vector."""
        return self.np.frombuffer(data, dtype="<f4").astype(self.np.float32)


class MemoryBank:
    """Long-term memory: records in namespaces, searched by words and meaning, with two clocks.

    ``MemoryBank()`` keeps the records in this process; ``MemoryBank(url)`` in any store
    :func:`~framework_agents.stores.open_store` takes (a directory, ``sqlite:///...``,
    ``postgresql://...``, ``redis://...``), which many processes may share. ``embedder``
    (``"minilm"`` or a callable ``texts -> vectors``, sync or async) adds ranking by
    meaning; vectors are computed when a record is remembered and stored with it.
    """

    def __init__(
        self, url: str | os.PathLike[str] | None = None, *, embedder: Embedder | None = None
    ) -> None:
        """Open the bank at ``url`` (``None``: in this process); nothing connects yet."""
        self._embedding = None if embedder is None else _Embedding(embedder)
        self._store: Store | None = None
        if url is None:
            backend: BankBackend = InMemoryBankBackend()
        else:
            from ..stores._base import open_store

            self._store = open_store(url)
            backend = self._store.bank_backend()
        self._backend = backend
        decode = None if self._embedding is None else self._embedding.decode
        self._index = BankIndex(decode)
        self._catching_up: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def over(cls, backend: BankBackend, *, embedder: Embedder | None = None) -> MemoryBank:
        """A bank over an open backend (what ``Store.bank()`` returns; the store owns it)."""
        bank = cls(embedder=embedder)
        bank._backend = backend
        return bank

    def __repr__(self) -> str:
        """The bank and its backend."""
        where = self._store if self._store is not None else self._backend
        return f"MemoryBank({where!r}, {len(self._index)} records indexed)"

    async def __aenter__(self) -> MemoryBank:
        """The bank itself (closed on exit)."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the bank."""
        await self.close()

    async def close(self) -> None:
        """Close the connections the bank opened (idempotent; a store's bank: the store's)."""
        if self._store is not None:
            store, self._store = self._store, None
            await store.close()

    # -- writing -----------------------------------------------------------------------

    async def remember(
        self,
        text: str,
        *,
        namespace: Namespace,
        kind: str = "fact",
        key: str | None = None,
        metadata: dict[str, Any] | None = None,
        valid_from: datetime | None = None,
        ttl: float | None = None,
    ) -> MemoryRecord:
        """Store ``text`` as a new record in ``namespace``; the stored record.

        A ``key`` with a current record in the same namespace closes it (its ``valid_to``
        becomes this record's ``valid_from``, default now). ``ttl`` (seconds) expires it.
        """
        row = self._new_row(
            text,
            namespace=namespace,
            kind=kind,
            key=key,
            metadata=metadata,
            valid_from=valid_from,
            ttl=ttl,
        )
        stored = await self._insert([row])
        return stored[0].record()

    def _new_row(
        self,
        text: object,
        *,
        namespace: object,
        kind: object = "fact",
        key: object = None,
        metadata: object = None,
        valid_from: object = None,
        ttl: object = None,
        record_id: str | None = None,
    ) -> Row:
        now = _now()
        seconds = check_ttl_seconds(ttl)
        return Row(
            id=new_record_id() if record_id is None else check_new_record_id(record_id),
            revision=1,
            namespace=check_namespace(namespace),
            kind=check_short(kind, "kind", MAX_KIND) or "fact",
            key=check_short(key, "key", MAX_KEY, optional=True),
            text=check_text(text),
            metadata=check_metadata(metadata),
            valid_from=now if valid_from is None else to_micros(valid_from, "valid_from"),  # type: ignore[arg-type]
            valid_to=None,
            recorded_at=now,
            expires_at=None if seconds is None else now + int(seconds * 1_000_000),
        )

    async def _with_vectors(self, rows: list[Row]) -> list[Row]:
        if self._embedding is None or not rows:
            return rows
        vectors = await self._embedding([r.text for r in rows])
        encode = self._embedding.encode
        return [_with_vector(r, encode(v)) for r, v in zip(rows, vectors, strict=True)]

    async def _insert(self, rows: list[Row], *, job: str | None = None) -> list[Row]:
        stored = await self._backend.insert(await self._with_vectors(rows), job=job)
        return stored or []

    async def remember_messages(
        self, messages: Sequence[Message], *, namespace: Namespace
    ) -> list[MemoryRecord]:
        """Store each user and assistant message with text as an ``"episode"`` record.

        Idempotent by message id: a message remembered before gives its stored record.
        ``metadata`` holds ``message_id`` and ``role``.
        """
        namespace = check_namespace(namespace)
        if isinstance(messages, Message) or not isinstance(messages, Sequence):
            raise InvalidArgumentError("messages must be a list of Message")
        rows = [
            self._episode_row(message, namespace) for message in messages if _is_episode(message)
        ]
        if not rows:
            return []
        # Known messages are not embedded again; the insert is idempotent by id anyway.
        stored = {r.id: r for r in await self._backend.latest([r.id for r in rows])}
        fresh = [r for r in rows if r.id not in stored]
        if fresh:
            stored.update((r.id, r) for r in await self._insert(fresh))
        return [stored[r.id].record() for r in rows]

    def _episode_row(self, message: Message, namespace: Namespace) -> Row:
        """The ``"episode"`` row of ``message`` (its id derived from the message id)."""
        return self._new_row(
            message.text[:MAX_TEXT],
            namespace=namespace,
            kind="episode",
            metadata={"message_id": message.id, "role": message.role},
            record_id=derived_id("episode", *namespace, message.id),
        )

    async def update(
        self, record_id: str, *, text: str | None = None, metadata: dict[str, Any] | None = None
    ) -> MemoryRecord:
        """Correct a record: a new revision (``revision`` + 1) with the new text or metadata.

        ``MEMORY_NOT_FOUND`` for an unknown (or expired) record.
        """
        check_record_id(record_id)
        new_text = None if text is None else check_text(text)
        new_metadata = None if metadata is None else check_metadata(metadata)
        vector = None
        if new_text is not None and self._embedding is not None:
            vector = self._embedding.encode((await self._embedding([new_text]))[0])
        current = await self.get(record_id)
        if current is None:
            raise MemoryNotFoundError(f"no memory record {record_id!r}")
        row = await self._backend.revise(
            record_id, Revision(new_text, new_metadata, vector, _now())
        )
        if row is None:
            raise MemoryNotFoundError(f"no memory record {record_id!r}")
        return row.record()

    async def forget(self, record_id: str) -> bool:
        """Remove a record with every revision; whether it was there."""
        check_record_id(record_id)
        return await self._backend.delete([record_id]) > 0

    async def forget_namespace(self, namespace: Namespace) -> int:
        """Remove every record in ``namespace`` and under it (and its pending jobs); how many.

        On a store opened with ``cipher=``, the data keys of those namespaces are then
        destroyed, so every copy of their text (journals not yet compacted, database pages
        not yet vacuumed, backups) is unreadable too.
        """
        namespace = check_namespace(namespace)
        await self._catch_up()
        seen = Filter(namespace, now=0)
        ids = [row.id for row in self._index.rows(seen)]
        for job in await self._backend.jobs():
            if job.namespace[: len(namespace)] == namespace:
                await self._backend.drop_job(job.id)
        removed = await self._backend.delete(ids) if ids else 0
        forget_keys = getattr(self._backend, "forget_keys", None)
        if callable(forget_keys):
            await forget_keys(namespace)
        return removed

    async def prune(self, older_than: timedelta) -> int:
        """Remove the records older than ``older_than``, and the expired ones; how many.

        A record is older when it stopped holding (``valid_to``) before ``now -
        older_than``, or its latest revision was recorded before then.
        """
        if not isinstance(older_than, timedelta) or older_than < timedelta(0):
            raise InvalidArgumentError(
                f"older_than must be a datetime.timedelta >= 0, not {older_than!r:.60}"
            )
        async with self._lock():
            swept = await self._catch_up_locked()
        now = _now()
        cutoff = now - (older_than // timedelta(microseconds=1))
        ids = [
            row.id
            for row in self._index.rows(Filter((), now=0))
            if row.expired(now)
            or row.recorded_at < cutoff
            or (row.valid_to is not None and row.valid_to < cutoff)
        ]
        return swept + (await self._backend.delete(ids) if ids else 0)

    # -- reading -----------------------------------------------------------------------

    async def get(self, record_id: str) -> MemoryRecord | None:
        """The latest revision of a record; ``None`` if unknown or expired."""
        check_record_id(record_id)
        rows = await self._backend.latest([record_id])
        if not rows or rows[0].expired(_now()):
            return None
        return rows[0].record()

    async def revisions(self, record_id: str) -> list[MemoryRecord]:
        """Every revision of a record, oldest first (``[]`` if unknown)."""
        check_record_id(record_id)
        rows = await self._backend.revisions(record_id)
        if rows and rows[-1].expired(_now()):
            return []
        return [row.record() for row in rows]

    async def list(
        self,
        namespace: Namespace,
        *,
        kinds: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> builtins.list[MemoryRecord]:
        """Records in ``namespace`` and under it, current and past, oldest first.

        ``after`` (a record id from a previous page) continues a listing.
        """
        seen = self._filter(namespace, kinds, where, include_past=True)
        limit = check_count(limit, "limit")
        await self._catch_up()
        position = 0
        if after is not None:
            found = self._index.after(check_record_id(after))
            if found is None:
                raise InvalidArgumentError(f"after={after!r} is not a record of this bank")
            position = found
        return [row.record() for row in self._index.listing(seen, limit, position)]

    async def search(
        self,
        query: str,
        *,
        namespace: Namespace,
        k: int = 8,
        kinds: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        as_of: datetime | None = None,
        include_past: bool = False,
    ) -> builtins.list[MemoryHit]:
        """The ``k`` records of ``namespace`` (and under it) most relevant to ``query``.

        Records valid now, or at ``as_of``, or all with ``include_past``; ranked by words
        and, with an embedder, meaning (see ``docs/memory-bank.md``).
        """
        if not isinstance(query, str):
            raise InvalidArgumentError(f"query must be a string, not {query!r:.60}")
        seen = self._filter(namespace, kinds, where, as_of=as_of, include_past=include_past)
        k = check_count(k, "k")
        query = query[:MAX_QUERY]
        vector = None
        if self._embedding is not None and query.strip():
            vector = (await self._embedding([query[:4000]]))[0]
        async with self._lock():
            await self._catch_up_locked()
            await self._vectors_for_missing()
            if len(self._index) > _IN_LOOP:
                hits = await asyncio.to_thread(self._index.search, query, seen, k, vector)
            else:
                hits = self._index.search(query, seen, k, vector)
        return [MemoryHit(row.record(), score) for row, score in hits]

    def _filter(
        self,
        namespace: object,
        kinds: object,
        where: object,
        *,
        as_of: object = None,
        include_past: object = False,
    ) -> Filter:
        namespace = check_namespace(namespace)
        if not isinstance(include_past, bool):
            raise InvalidArgumentError(f"include_past must be a bool, not {include_past!r:.40}")
        now = _now()
        moment: int | None = now
        if as_of is not None:
            moment = to_micros(as_of, "as_of")  # type: ignore[arg-type]
        elif include_past:
            moment = None
        conditions = None if where is None else check_metadata(where, "where")
        return Filter(namespace, check_kinds(kinds), conditions or None, moment, now)

    # -- the index ---------------------------------------------------------------------

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._catching_up is None or self._lock_loop is not loop:
            self._catching_up, self._lock_loop = asyncio.Lock(), loop
        return self._catching_up

    async def _catch_up(self) -> None:
        """Apply the change log since the index's position; sweep what expired."""
        async with self._lock():
            await self._catch_up_locked()

    async def _catch_up_locked(self) -> int:
        """Catch up (the caller holds the lock); how many expired records it removed."""
        swept = 0
        for _ in range(2):
            entries = await self._backend.changes(self._index.seq)
            if entries:
                ids = list(dict.fromkeys(rid for _, rid in entries))
                rows = {row.id: row for row in await self._backend.latest(ids)}
                self._index.apply(entries, rows)
            expired = self._index.expired(_now())
            if not expired:
                break
            swept += await self._backend.delete(expired)
        return swept

    async def _vectors_for_missing(self) -> None:
        """Embed records stored without a vector (kept in this process only)."""
        if self._embedding is None:
            return
        missing = self._index.missing_vectors()
        for start in range(0, len(missing), 64):
            chunk = missing[start : start + 64]
            vectors = await self._embedding([r.text for r in chunk])
            for row, vector in zip(chunk, vectors, strict=True):
                self._index.set_vector(row.id, vector)

    # -- extraction jobs (BankMemory) --------------------------------------------------

    async def add_job(self, job: Job) -> None:
        """Store a pending extraction job (idempotent by id)."""
        await self._backend.add_job(job)

    async def pending_jobs(self) -> builtins.list[Job]:
        """The pending extraction jobs, oldest first."""
        return await self._backend.jobs()

    async def complete_job(
        self, job_id: str, rows: builtins.list[Row]
    ) -> builtins.list[MemoryRecord] | None:
        """Store ``rows`` and complete ``job_id`` atomically; ``None`` if it was done already."""
        stored = await self._backend.insert(await self._with_vectors(rows), job=job_id)
        return None if stored is None else [row.record() for row in stored]

    def new_row(self, text: str, **fields: Any) -> Row:
        """A checked row for :meth:`complete_job` (the arguments of :meth:`remember`)."""
        return self._new_row(text, **fields)


def _with_vector(row: Row, vector: bytes) -> Row:
    return replace(row, vector=vector)


def _is_episode(message: object) -> bool:
    """Whether ``message`` is remembered as an episode: user or assistant text, not recalled."""
    if not isinstance(message, Message):
        raise InvalidArgumentError(f"messages must hold Message, not {message!r:.60}")
    if message.role not in ("user", "assistant") or not message.text.strip():
        return False
    return message.metadata.get("kind") not in ("grounding", "recall")
