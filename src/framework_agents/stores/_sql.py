"""What the SQLite and PostgreSQL stores share: their logic, written once over SQL (internal).

Where the two backends do the same thing (a storage's put, get, list and delete; a
checkpoint's load, lock check and delete; a memory's commit and clear), the logic lives
here, in :class:`SqlStorage`, :class:`SqlCheckpointer` and :class:`SqlMemory`, as
*steps*: a generator that yields each :class:`Query` and is sent back its result (the
memory bank's logic, in the same form, is ``stores._sql_bank``). A backend keeps only its
dialect:

* the SQL text, a :class:`Dialect` of statements with named parameters (``:name`` for
  SQLite, ``%(name)s`` and the schema for PostgreSQL). SQLite keeps time with the
  caller's clock, passed as ``now``; PostgreSQL reads the server's and ignores ``now``;
* how steps run (:class:`SqlDb`): SQLite drives them in its database thread, inside
  one transaction (one hop off the event loop for the whole operation); PostgreSQL
  awaits each statement on a pooled connection;
* the hooks below (``_claim``, ``_ancestor_query``, ``_history``, ``_lock_key``,
  ``_replace``), where the SQL of one backend is not a statement of the other's.

What differs in substance stays in the backends' modules: SQLite's thread save and
memory append are Python over its rows where PostgreSQL's are server functions, and
their thread locks, storage logs and pruning differ too.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from types import EllipsisType
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

from .._crypto import Cipher
from .._retention import AutoPrune, check_ttl
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import CheckpointConflictError, InvalidArgumentError, StorageKeyInvalidError
from ..messages import Message
from ..sessions._base import (
    CompareAndPut,
    check_expected_tag,
    digest,
    validate_key,
    validate_prefix,
)
from ..sessions.memory_storage import as_bytes
from ._checkpointer import LeasedCheckpointer, SavePlan
from ._codec import ClosableStore, MergingMemory, appended_by_others, wall_clock
from ._sealed import MEMORY_MESSAGE, reseal_body, reseal_head, reseal_thread

__all__ = [
    "Dialect",
    "Fetch",
    "Query",
    "SqlCheckpointer",
    "SqlDb",
    "SqlMemory",
    "SqlStorage",
    "Stepper",
    "Steps",
]

T = TypeVar("T")

#: What a query's result is: its first row (``None``: none), all its rows, how many rows
#: it changed, nothing; ``many`` runs the statement once per parameter set (nothing back).
Fetch = Literal["one", "all", "count", "none", "many"]

#: One past the largest character a key may hold (keys are ASCII letters, digits, ``._-/``).
KEY_END = "\x7f"


class Query(NamedTuple):
    """One statement of a dialect, its parameters and what to fetch."""

    sql: str
    params: Mapping[str, Any] | Sequence[Any]
    fetch: Fetch = "none"


#: Logic over SQL: yields each query, is sent its result, returns the outcome.
Steps = Generator[Query, Any, T]


class Dialect(NamedTuple):
    """The statements the shared logic runs, in one backend's SQL (named parameters)."""

    #: ``key`` -> its value's bytes.
    kv_get: str
    #: ``low``, ``high`` -> the keys in ``[low, high)``, sorted.
    kv_keys: str
    #: ``low``, ``high`` -> a row if any key lies in ``(low, high)``.
    kv_under: str
    #: ``key``, ``data``, ``digest``, ``now``: overwrite a stored value (count: 1 if any).
    kv_update: str
    #: ``key``, ``data``, ``digest``, ``now``: store a new value.
    kv_insert: str
    #: ``key``: drop the value's log records.
    kv_drop_log: str
    #: ``key``: drop the value.
    kv_drop: str
    #: ``thread_id`` -> ``(version, length, head)`` of a stored checkpoint.
    thread_head: str
    #: ``thread_id`` -> the message bodies of the thread, in order.
    thread_bodies: str
    #: The ids of the stored threads, sorted.
    thread_ids: str
    #: ``thread_id``, ``now`` -> ``(owner, lease unexpired)`` of the thread's lock row.
    lock_state: str
    #: ``thread_id``: drop the thread's messages.
    thread_drop_messages: str
    #: ``thread_id``: drop the thread's head.
    thread_drop: str
    #: ``key`` -> the key's marker (0: never written).
    memory_marker: str
    #: ``key`` -> ``(shape, body, message id)`` of each stored message, in order.
    memory_stored: str
    #: ``thread_id`` -> ``(length, head)`` of a stored checkpoint, its row locked.
    rotate_head: str
    #: ``thread_id`` -> ``(seq, body)`` of the thread's messages, in order, locked.
    rotate_bodies: str
    #: ``thread_id``, ``head``: a head sealed again.
    set_head: str
    #: ``thread_id``, ``seq``, ``body``: a message sealed again.
    set_body: str
    #: The keys that hold memory messages.
    memory_keys: str
    #: ``key`` -> ``(seq, body)`` of the key's messages, in order, locked.
    rotate_memory: str
    #: ``key``, ``seq``, ``body``: a memory message sealed again.
    set_memory_body: str

    def mapped(self, edit: Callable[[str], str]) -> Dialect:
        """The dialect with ``edit`` applied to every statement (a schema filled in)."""
        return Dialect(*(edit(text) for text in self))


class SqlDb(Protocol):
    """A database as the shared logic uses it (``SqliteDb``, ``PgDb``)."""

    @property
    def dialect(self) -> Dialect:
        """The backend's statements."""
        ...

    @property
    def place(self) -> str:
        """Where the data is, as error messages name it (a path, a schema)."""
        ...

    async def transact(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one write transaction; its outcome."""
        ...

    async def snapshot(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one read transaction (a consistent snapshot); its outcome."""
        ...

    async def query(self, query: Query) -> Any:
        """The result of one read statement."""
        ...

    async def close(self) -> None:
        """Close the database's connections (idempotent)."""
        ...


class Stepper(Generic[T]):
    """Steps being run: :meth:`next` takes a query's result and gives the next query."""

    __slots__ = ("_steps", "outcome")

    outcome: T

    def __init__(self, steps: Steps[T]) -> None:
        """Run ``steps``; ``outcome`` is set once :meth:`next` gives ``None``."""
        self._steps = steps

    def next(self, result: Any = None) -> Query | None:
        """The next query, sent ``result`` of the last one (``None``: the steps are done)."""
        try:
            return self._steps.send(result)
        except StopIteration as done:
            self.outcome = done.value
            return None


# -- storage ------------------------------------------------------------------------------


class SqlStorage(ClosableStore[SqlDb], AutoPrune, CompareAndPut):
    """The storage logic of the SQL backends (table ``fa_kv``, logs in ``fa_kv_log``).

    A subclass adds ``read_logged``, ``append_logged`` and ``prune``, and the hooks
    :meth:`_claim` and :meth:`_ancestor_query`.
    """

    def __init__(self, db: SqlDb, *, ttl: float | None) -> None:
        """Set up the store; nothing connects before the first operation."""
        self._db = db
        self.ttl = check_ttl(ttl)

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (a key is a value or a directory, never both)."""
        await self._put(key, data)

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """Store ``data`` only if ``key`` is still in the state tagged ``expected``.

        ``None``: no value. Otherwise CHECKPOINT_CONFLICT and nothing is written.
        """
        check_expected_tag(expected, optional=True)
        await self._put(key, data, conditional=True, expected=expected)

    async def _put(
        self, key: str, data: bytes, *, conditional: bool = False, expected: str | None = None
    ) -> None:
        """Store ``data``; when ``conditional``, only over the state tagged ``expected``."""
        segments = validate_key(key)
        value = as_bytes(data)
        value_digest = digest(value)
        ancestors = ["/".join(segments[:i]) for i in range(1, len(segments))]
        sql = self._db.dialect

        def write() -> Steps[None]:
            yield from self._claim(key, segments, expected if conditional else ...)
            row = {"key": key, "data": value, "digest": value_digest, "now": wall_clock()}
            if (yield Query(sql.kv_update, row, "count")):
                yield Query(sql.kv_drop_log, row)
                return
            if ancestors:
                found = yield self._ancestor_query(ancestors)
                if found is not None:
                    raise StorageKeyInvalidError(
                        f"cannot store {key!r}: {found[0]!r} already holds a value"
                    )
            if (yield Query(sql.kv_under, {"low": key + "/", "high": key + "0"}, "one")):
                raise StorageKeyInvalidError(
                    f"cannot store {key!r}: other keys are stored under it"
                )
            yield Query(sql.kv_insert, row)

        await self._db.transact(write)
        await self._after_write()

    def _claim(
        self, key: str, segments: Sequence[str], expected: str | EllipsisType | None
    ) -> Steps[None]:
        """A put's first steps: lock what it needs; check the tag unless ``expected`` is ``...``.

        CHECKPOINT_CONFLICT (nothing written) when the stored state is not ``expected``.
        """
        raise NotImplementedError

    def _ancestor_query(self, ancestors: builtins.list[str]) -> Query:
        """The query of the first of ``ancestors`` that holds a value (one row or none)."""
        raise NotImplementedError

    async def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``."""
        validate_key(key)
        row = await self._db.query(Query(self._db.dialect.kv_get, {"key": key}, "one"))
        return None if row is None else bytes(row[0])

    async def delete(self, key: str) -> None:
        """Remove ``key`` and its log (no-op when missing)."""
        validate_key(key)
        sql = self._db.dialect

        def write() -> Steps[None]:
            yield Query(sql.kv_drop_log, {"key": key})
            yield Query(sql.kv_drop, {"key": key})

        await self._db.transact(write)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Stored keys starting with ``prefix``, sorted."""
        validate_prefix(prefix)
        bounds = {"low": prefix, "high": prefix + KEY_END}
        rows = await self._db.query(Query(self._db.dialect.kv_keys, bounds, "all"))
        return [r[0] for r in rows]

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of those ``keys`` that are stored, in one read.

        What a page of entries needs: one statement (``key IN (...)``), not one per key.
        """
        for key in keys:
            validate_key(key)
        if not keys:
            return {}
        head, _, placeholder = self._db.dialect.kv_get.partition(" WHERE key = ")
        table = head.removeprefix("SELECT data FROM ")
        marks = ", ".join(placeholder.replace("key", f"k{i}") for i in range(len(keys)))
        params = {f"k{i}": key for i, key in enumerate(keys)}
        sql = f"SELECT key, data FROM {table} WHERE key IN ({marks})"
        rows = await self._db.query(Query(sql, params, "all"))
        return {str(r[0]): bytes(r[1]) for r in rows}

    async def list_after(self, prefix: str, after: str | None, limit: int) -> builtins.list[str]:
        """Up to ``limit`` keys starting with ``prefix`` and greater than ``after``, sorted.

        One range read of the key index (O(log n + limit)): what a keyset page needs.
        """
        validate_prefix(prefix)
        if after is not None:
            validate_prefix(after)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgumentError(f"limit must be a positive int, got {limit!r:.40}")
        # Keys use characters above \x01 only: "key > after" is "key >= after + \x01".
        low = prefix if after is None or after < prefix else after + "\x01"
        bounds = {"low": low, "high": prefix + KEY_END}
        query = Query(f"{self._db.dialect.kv_keys} LIMIT {limit}", bounds, "all")
        rows = await self._db.query(query)
        return [r[0] for r in rows]

    async def count_after(self, prefix: str, after: str | None, before: str | None = None) -> int:
        """How many keys under ``prefix`` are above ``after`` and below ``before``.

        ``None``: no bound. One ``count(*)`` over that range of the key index: no key is
        sent back, but the database still walks the range (O(log n + counted)).
        """
        validate_prefix(prefix)
        for bound in (after, before):
            if bound is not None:
                validate_prefix(bound)
        low = prefix if after is None or after < prefix else after + "\x01"
        high = prefix + KEY_END
        if before is not None and before < high:
            high = before
        _select, _, rest = self._db.dialect.kv_keys.partition(" FROM ")
        sql = "SELECT count(*) FROM " + rest.removesuffix(" ORDER BY key")
        row = await self._db.query(Query(sql, {"low": low, "high": high}, "one"))
        return 0 if row is None else int(row[0])


# -- checkpointer -------------------------------------------------------------------------


class SqlCheckpointer(ClosableStore[SqlDb], LeasedCheckpointer):
    """The checkpoint logic of the SQL backends: load, list, delete, the lock check.

    A subclass adds ``_store`` (a save's write), ``prune`` and the lock's three operations.
    """

    #: What a run that finds its lock gone may have lost it to (for CHECKPOINT_CONFLICT).
    _lost_by = "lease expired or taken by another run"

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint, or ``None`` (CHECKPOINT_CORRUPT when unreadable)."""
        check_thread_id(thread_id)
        sql, params = self._db.dialect, {"thread_id": thread_id}

        def read() -> Steps[tuple[Any, builtins.list[Any]]]:
            head = yield Query(sql.thread_head, params, "one")
            if head is None:
                return None, []
            return head, (yield Query(sql.thread_bodies, params, "all"))

        head, rows = await self._db.snapshot(read)
        if head is None:
            self._forget(thread_id)
            return None
        version, length, data = head
        source = f"checkpoint of thread {thread_id!r} in {self._db.place}"
        bodies = [bytes(b[0]) for b in rows]
        return self._loaded(thread_id, version, length, bytes(data), bodies, source=source)

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        rows = await self._db.query(Query(self._db.dialect.thread_ids, {}, "all"))
        return [r[0] for r in rows]

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Store ``checkpoint``, writing only the messages that are not stored yet.

        CHECKPOINT_CONFLICT (nothing written) when the thread changed since this instance
        last read or wrote it, or when another run holds it or took it from this one.
        """
        plan = self._plan(checkpoint)
        try:
            version = await self._store(plan)
        except CheckpointConflictError:
            self._forget(plan.thread_id)
            raise
        self._saved(plan, version)
        await self._after_write()

    async def _store(self, plan: SavePlan) -> int:
        """Write ``plan`` in one transaction: the thread's new version.

        CHECKPOINT_CONFLICT (nothing written) when the lock or the version says no.
        """
        raise NotImplementedError

    def _check_lock(self, thread_id: str) -> Steps[None]:
        """CHECKPOINT_CONFLICT unless this run holds the thread, or nobody does."""
        params = {"thread_id": thread_id, "now": wall_clock()}
        row = yield Query(self._db.dialect.lock_state, params, "one")
        owner = self._owner(thread_id)
        if owner is not None:
            if row is None or row[0] != owner or not row[1]:
                raise CheckpointConflictError(
                    f"thread {thread_id!r}: this run lost its lock ({self._lost_by}); "
                    "nothing was written"
                )
        elif row is not None and row[0] is not None and row[1]:
            raise CheckpointConflictError(
                f"thread {thread_id!r} is held by another run; nothing was written"
            )

    async def rotate(self, *, migrate: bool = False) -> int:
        """Seal every head and message under ``cipher.current``, one thread per transaction.

        Writers of other threads never wait; a writer of the thread being rotated waits
        for one short transaction. ``migrate``: seal plain ones too (a store written
        without ``cipher=``), else a plain one is STORE_INTEGRITY. Re-running it after a
        crash finishes the job (what is current is authenticated and skipped). The number
        of values written.
        """
        if self._cipher is None:
            raise InvalidArgumentError("rotate() needs a checkpointer with cipher=")
        written = 0
        for thread_id in await self.list_threads():
            written += await self._rotate_one(thread_id, migrate)
        return written

    async def _rotate_one(self, thread_id: str, migrate: bool) -> int:
        """Re-seal one thread in one transaction; how many values changed."""
        cipher, sql = self._cipher, self._db.dialect
        assert cipher is not None

        def write() -> Steps[int]:
            params = {"thread_id": thread_id}
            row = yield Query(sql.rotate_head, params, "one")
            if row is None:
                return 0
            written = 0
            head = reseal_head(cipher, thread_id, int(row[0]), bytes(row[1]), migrate=migrate)
            if head is not None:
                yield Query(sql.set_head, {"thread_id": thread_id, "head": head})
                written += 1
            rows = yield Query(sql.rotate_bodies, params, "all")
            bodies = [bytes(body) for _seq, body in rows]
            for index, new in reseal_thread(cipher, thread_id, bodies, migrate=migrate):
                values = {"thread_id": thread_id, "seq": rows[index][0], "body": new}
                yield Query(sql.set_body, values)
                written += 1
            return written

        return await self._db.transact(write)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (no error when there is none)."""
        check_thread_id(thread_id)
        sql, params = self._db.dialect, {"thread_id": thread_id}

        def write() -> Steps[None]:
            yield from self._check_lock(thread_id)
            yield Query(sql.thread_drop_messages, params)
            yield Query(sql.thread_drop, params)

        self._forget(thread_id)
        await self._db.transact(write)


# -- memory -------------------------------------------------------------------------------


def _rotate_memory(db: SqlDb, cipher: Cipher, key: str, migrate: bool) -> Steps[int]:
    """Re-seal memory ``key``'s messages (inside its transaction); how many changed."""
    sql = db.dialect
    written = 0
    for seq, body in (yield Query(sql.rotate_memory, {"key": key}, "all")):
        new = reseal_body(cipher, MEMORY_MESSAGE, key, bytes(body), migrate=migrate)
        if new is not None:
            yield Query(sql.set_memory_body, {"key": key, "seq": seq, "body": new})
            written += 1
    return written


class SqlMemory(MergingMemory, ClosableStore[SqlDb]):
    """The memory logic of the SQL backends: load, commit, clear, the marker.

    A subclass adds ``save`` and ``_append_if``, and the hooks :meth:`_history`,
    :meth:`_lock_key` and :meth:`_replace`.
    """

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (MEMORY_CORRUPT)."""
        bodies, marker = await self._history()
        return self._loaded(bodies, marker, source=f"memory {self.key!r} in {self._db.place}")

    async def _history(self) -> tuple[list[bytes], int]:
        """The stored message bodies and the key's marker, read together."""
        raise NotImplementedError

    async def _read_marker(self) -> int:
        row = await self._db.query(Query(self._db.dialect.memory_marker, {"key": self.key}, "one"))
        return int(row[0])

    def _lock_key(self) -> Steps[None]:
        """Lock the key before a commit reads its rows (default: the transaction does)."""
        yield from ()

    def _replace(self, rows: Sequence[tuple[int, bytes]]) -> Steps[int]:
        """Replace the stored rows with ``rows`` (windowed); the marker after.

        Replacing with nothing (a clear) moves the marker too, so every write is seen.
        """
        raise NotImplementedError

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """:meth:`MergingMemory.commit`, in one transaction (no save slips in between)."""
        kept, ids, merge_base = self._commit_parts(messages, base)
        rows = self._rows(kept)

        def merge() -> Steps[int]:
            yield from self._lock_key()  # before the stored rows are read
            others: list[tuple[int, bytes]] = []
            if merge_base is not None:
                query = Query(self._db.dialect.memory_stored, {"key": self.key}, "all")
                stored = yield query
                chosen = appended_by_others([r[2] for r in stored], merge_base, ids)
                others = [(stored[i][0], bytes(stored[i][1])) for i in chosen]
            return (yield from self._replace(rows + others))

        self._wrote(await self._db.transact(merge))
        self._seen = ids

    async def clear(self) -> None:
        """Forget the stored history (the marker moves on)."""
        self._wrote(await self._db.transact(lambda: self._replace([])))
        self._seen = set()

    @staticmethod
    async def rotate_all(db: SqlDb, cipher: Cipher, migrate: bool = False) -> int:
        """Re-seal every memory in ``db`` under ``cipher.current``, one key per transaction.

        The messages are sealed again in place (the key's marker does not move: nothing
        changed for its readers). ``migrate``: seal plain messages too; else a plain one
        is STORE_INTEGRITY. The number of messages written.
        """
        sql = db.dialect
        keys = [r[0] for r in await db.query(Query(sql.memory_keys, {}, "all"))]
        written = 0
        for key in keys:
            written += await db.transact(
                functools.partial(_rotate_memory, db, cipher, key, migrate)
            )
        return written
