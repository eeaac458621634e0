"""PostgreSQL stores: sessions, threads and memories shared by every machine (extra ``postgres``).

Same layout as SQLite (``stores._pg_db``); the thread lock is a session-level advisory
lock, ``pg_try_advisory_lock(hashtextextended(<schema>/<thread_id>, 0))``, taken on a
connection of its own that the run keeps. That connection sets
``idle_session_timeout`` to the lease and renews the lease row every third of it, so a
holder that dies *or stops* (a paused VM, a SIGSTOP) loses the lock within the lease.
Fencing never rests on the advisory lock alone: ``fa_locks`` holds the owner token and a
fencing counter bumped by each acquisition, and every save checks them and the thread's
version in its transaction (CHECKPOINT_CONFLICT otherwise). What these stores do as
the SQLite ones do is written once in ``stores._sql``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import EllipsisType
from typing import Any, TypeVar, Unpack

from .._crypto import Cipher
from .._retention import check_older_than
from ..errors import CheckpointConflictError
from ..messages import Message
from ..sessions._base import check_expected_tag, digest, validate_key
from ..sessions.memory_storage import as_bytes
from ._base import Store, db_store
from ._checkpointer import LeaseSettings, SavePlan
from ._codec import log_tag, redact, unavailable
from ._pg_db import CONFLICT_SQLSTATE, NOW, PgDb, import_psycopg
from ._sql import Query, SqlCheckpointer, SqlMemory, SqlStorage, Steps
from ._sql_bank import SqlBankBackend, bank_sql

__all__ = [
    "PostgresBankBackend",
    "PostgresCheckpointer",
    "PostgresMemory",
    "PostgresStorage",
    "postgres_store",
]

T = TypeVar("T")

#: The tag of a value written without a digest (schema version 1): it matches no tag.
_NO_TAG = object()
#: Lock connections kept open between runs (a new connection costs a round trip or more).
_IDLE_LOCK_CONNECTIONS = 4


def _db(dsn: str | PgDb, schema: str) -> PgDb:
    return dsn if isinstance(dsn, PgDb) else PgDb(dsn, schema=schema)


class PostgresStorage(SqlStorage):
    """The :class:`~framework_agents.sessions.Storage` contract in table ``fa_kv``.

    It keeps logs too (:class:`~framework_agents.sessions._base.LoggedStorage`): a
    record appended to a value is one row of ``fa_kv_log`` (one round trip), so a
    session's save writes what is new, not its history again.
    """

    _db: PgDb

    def __init__(
        self, dsn: str | PgDb, *, schema: str = "public", ttl: float | None = None
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        super().__init__(_db(dsn, schema), ttl=ttl)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PostgresStorage({redact(self._db.dsn)!r})"

    def _claim(
        self, key: str, segments: Sequence[str], expected: str | EllipsisType | None
    ) -> Steps[None]:
        sql = self._db.sql
        # Puts under one top-level segment are serialised: the value/directory rule
        # looks at other keys, which no row lock covers.
        yield Query(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"{self._db.schema}/kv/{segments[0]}",),
        )
        if expected is ...:
            return
        stored = yield Query(
            sql("SELECT digest FROM {s}.fa_kv WHERE key = %s FOR UPDATE"), (key,), "one"
        )
        found: object = None  # the stored tag; a value without digest has none
        if stored is not None:
            last_row = yield Query(
                sql("SELECT max(seq) FROM {s}.fa_kv_log WHERE key = %s"), (key,), "one"
            )
            (last,) = last_row or (None,)
            found = _NO_TAG if stored[0] is None else log_tag(stored[0], last)
        if found != expected:
            raise CheckpointConflictError(
                f"storage key {key!r} changed since it was read; nothing was written"
            )

    def _ancestor_query(self, ancestors: builtins.list[str]) -> Query:
        return Query(
            self._db.sql("SELECT key FROM {s}.fa_kv WHERE key = ANY(%s) LIMIT 1"),
            (ancestors,),
            "one",
        )

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The value of ``key``, the records appended since it was stored, and its tag.

        A value whose stored digest is missing or wrong (written by schema version 1) is
        given its digest, and any log beside it dropped, before it is returned.
        """
        validate_key(key)
        sql = self._db.sql

        async def read(conn: Any) -> tuple[Any, builtins.list[Any]]:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur = await conn.execute(
                    sql("SELECT data, digest FROM {s}.fa_kv WHERE key = %s"), (key,), binary=True
                )
                row = await cur.fetchone()
                if row is None:
                    return None, []
                cur = await conn.execute(
                    sql("SELECT seq, record FROM {s}.fa_kv_log WHERE key = %s ORDER BY seq"),
                    (key,),
                    binary=True,
                )
                return row, await cur.fetchall()

        for _ in range(3):
            row, logged = await self._db.read(read)
            if row is None:
                return None, [], None
            value = bytes(row[0])
            if row[1] == digest(value):
                tag = log_tag(row[1], logged[-1][0] if logged else None)
                return value, [bytes(r[1]) for r in logged], tag
            await self._repair_digest(key, value)
        raise CheckpointConflictError(f"storage key {key!r} keeps changing; read it again")

    async def _repair_digest(self, key: str, value: bytes) -> None:
        """Give ``key`` the digest of ``value`` and drop its log, if it still holds ``value``."""
        sql = self._db.sql
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                sql("UPDATE {s}.fa_kv SET digest = %s WHERE key = %s AND data = %s"),
                (digest(value), key, value),
            )
            if cur.rowcount:
                await conn.execute(sql("DELETE FROM {s}.fa_kv_log WHERE key = %s"), (key,))

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Append ``record`` to the log of ``key`` if its tag is still ``expected``.

        One row in one round trip; CHECKPOINT_CONFLICT (nothing written) when another
        writer stored or appended since. Returns the new tag.
        """
        validate_key(key)
        data = as_bytes(record)
        check_expected_tag(expected, optional=False)
        psycopg, _ = import_psycopg()
        try:
            async with self._db.connection() as conn:
                cur = await conn.execute(
                    self._db.sql("SELECT {s}.fa_append_kv(%s, %s, %s)"), (key, expected, data)
                )
                row = await cur.fetchone()
        except psycopg.Error as exc:
            if exc.sqlstate != CONFLICT_SQLSTATE:
                raise
            raise CheckpointConflictError(
                f"storage key {key!r} changed since it was read; nothing was written"
            ) from None
        assert row is not None
        tag: str = row[0]
        await self._after_write()
        return tag

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove values (and logs) not written for ``older_than`` (default: ``ttl``).

        Returns how many values went.
        """
        age = check_older_than(older_than, self.ttl)
        sql = self._db.sql
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                sql(f"DELETE FROM {{s}}.fa_kv WHERE updated_at < {NOW} - %s RETURNING key"),
                (age,),
            )
            gone = [r[0] for r in await cur.fetchall()]
            if gone:
                await conn.execute(sql("DELETE FROM {s}.fa_kv_log WHERE key = ANY(%s)"), (gone,))
        return len(gone)


class PostgresCheckpointer(SqlCheckpointer):
    """Thread checkpoints (head row + append-only message log) with an advisory thread lock.

    See the module docstring for the lock and fencing design, and
    :class:`~framework_agents.stores.SqliteCheckpointer` for the layout and the rules.
    """

    _db: PgDb
    _lost_by = "lease expired, connection lost or taken by another run"

    def __init__(
        self,
        dsn: str | PgDb,
        *,
        schema: str = "public",
        **settings: Unpack[LeaseSettings],
    ) -> None:
        """Threads in the database at ``dsn`` (or a shared ``PgDb``), tables in ``schema``.

        Nothing connects before the first operation. ``settings``: ``lock_timeout``,
        ``lease``, ``ttl`` and ``cipher`` (:class:`~._checkpointer.LeaseSettings`).
        """
        self._db = _db(dsn, schema)
        self._lock_conns: dict[str, Any] = {}
        self._idle_lock_conns: list[Any] = []
        self._closing = False
        self._set_up(self._give_up, **settings)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PostgresCheckpointer({redact(self._db.dsn)!r})"

    async def _store(self, plan: SavePlan) -> int:
        thread_id = plan.thread_id
        psycopg, _ = import_psycopg()
        try:
            async with self._db.connection() as conn:
                cur = await conn.execute(
                    self._db.sql(
                        "SELECT {s}.fa_save_thread(%s, %s, %s, %s, %s, %s, %s, %s::bytea[])"
                    ),
                    (
                        thread_id,
                        self._owner(thread_id),
                        plan.expected,
                        plan.keep,
                        plan.head,
                        plan.pending,
                        plan.length,
                        plan.bodies,
                    ),
                )
                row = await cur.fetchone()
        except psycopg.Error as exc:
            if exc.sqlstate != CONFLICT_SQLSTATE:
                raise
            detail = exc.diag.message_primary or "conflict"
            raise CheckpointConflictError(
                f"thread {thread_id!r}: {detail}; nothing was written"
            ) from None
        assert row is not None
        return int(row[0])

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove threads not saved for ``older_than`` (default: ``ttl``); how many went.

        A thread that is held (an unexpired lock) or waits for an approval is kept.
        """
        age = check_older_than(older_than, self.ttl)
        sql = self._db.sql
        async with self._db.transaction() as conn:
            cur = await conn.execute(
                sql(
                    "DELETE FROM {s}.fa_threads t WHERE t.version > 0 AND NOT t.pending "
                    f"AND t.updated_at < {NOW} - %s AND NOT EXISTS (SELECT 1 "
                    "FROM {s}.fa_locks l WHERE l.thread_id = t.thread_id "
                    f"AND l.owner IS NOT NULL AND l.expires_at > {NOW}) "
                    "RETURNING t.thread_id"
                ),
                (age,),
            )
            doomed = [r[0] for r in await cur.fetchall()]
            if doomed:
                await conn.execute(
                    sql("DELETE FROM {s}.fa_thread_messages WHERE thread_id = ANY(%s)"), (doomed,)
                )
        return len(doomed)

    # -- the thread lock ------------------------------------------------------------------

    def _lock_key(self, thread_id: str) -> str:
        return f"{self._db.schema}/{thread_id}"

    async def _lock_conn(self, owner: str) -> Any:
        """The connection of one acquisition: a reused idle one, or a new one."""
        conn = self._lock_conns.get(owner)
        if conn is not None:
            return conn
        while self._idle_lock_conns:
            conn = self._idle_lock_conns.pop()
            if not conn.closed:
                break
        else:
            await self._db.pool()  # the schema exists before the first lock row
            conn = await self._db.connect()
        self._lock_conns[owner] = conn
        return conn

    async def _try_acquire(self, thread_id: str, owner: str) -> int | None:
        psycopg, _ = import_psycopg()
        for attempt in range(2):
            conn = await self._lock_conn(owner)
            try:
                # The session dies when idle for a lease: a stopped holder loses its lock.
                cur = await conn.execute(
                    "SELECT set_config('idle_session_timeout', %s, false), "
                    "pg_try_advisory_lock(hashtextextended(%s, 0))",
                    (str(int(self.lease * 1000)), self._lock_key(thread_id)),
                )
                row = await cur.fetchone()
                break
            except psycopg.OperationalError as exc:  # a reused connection the server closed
                self._lock_conns.pop(owner, None)
                await conn.close()
                # The server dropped its sessions (a restart, a failover): the other idle
                # ones are as dead, so the retry opens a new connection.
                idle, self._idle_lock_conns = self._idle_lock_conns, []
                for stale in idle:
                    await stale.close()
                if attempt:
                    raise unavailable(self._db.dsn, exc) from None
        if not row or not row[1]:
            return None
        cur = await conn.execute(
            self._db.sql(
                "INSERT INTO {s}.fa_locks AS l (thread_id, fence, owner, expires_at) "
                f"VALUES (%s, 1, %s, {NOW} + %s) ON CONFLICT (thread_id) DO UPDATE SET "
                "fence = l.fence + 1, owner = excluded.owner, expires_at = excluded.expires_at "
                "RETURNING fence"
            ),
            (thread_id, owner, self.lease),
        )
        fence = await cur.fetchone()
        assert fence is not None
        return int(fence[0])

    async def _renew(self, thread_id: str, owner: str) -> bool:
        conn = self._lock_conns.get(owner)
        if conn is None or conn.closed:
            return False
        cur = await conn.execute(
            self._db.sql(
                f"UPDATE {{s}}.fa_locks SET expires_at = {NOW} + %s WHERE thread_id = %s "
                "AND owner = %s"
            ),
            (self.lease, thread_id, owner),
        )
        return bool(cur.rowcount)

    async def _park(self, conn: Any) -> None:
        """Unlock the session of ``conn`` and keep the connection for the next run."""
        psycopg, _ = import_psycopg()
        try:  # unlock whatever the session holds, even after a failure half-way
            await conn.execute(
                "SELECT pg_advisory_unlock_all(), set_config('idle_session_timeout', '0', false)"
            )
        except psycopg.Error:
            await conn.close()  # the session is gone, and its advisory lock with it
            return
        if len(self._idle_lock_conns) < _IDLE_LOCK_CONNECTIONS and not self._closing:
            self._idle_lock_conns.append(conn)
        else:
            await conn.close()

    async def _release(self, thread_id: str, owner: str) -> None:
        conn = self._lock_conns.pop(owner, None)
        if conn is None:
            return
        psycopg, _ = import_psycopg()
        try:
            await conn.execute(
                self._db.sql(
                    "UPDATE {s}.fa_locks SET owner = NULL, expires_at = 0 "
                    "WHERE thread_id = %s AND owner = %s"
                ),
                (thread_id, owner),
            )
        except psycopg.Error:
            await conn.close()  # the session is gone, and its advisory lock with it
            return
        await self._park(conn)

    async def _give_up(self, thread_id: str, owner: str) -> None:
        conn = self._lock_conns.pop(owner, None)
        if conn is not None:
            await self._park(conn)

    async def close(self) -> None:
        """Close the pool and any lock connection still open (idempotent)."""
        self._closing = True
        conns = [*self._lock_conns.values(), *self._idle_lock_conns]
        self._lock_conns.clear()
        self._idle_lock_conns.clear()
        for conn in conns:
            await conn.close()
        await self._db.close()


class PostgresMemory(SqlMemory):
    """A windowed history under ``key``; ``save()`` appends and trims in one transaction."""

    _db: PgDb

    def __init__(
        self,
        dsn: str | PgDb,
        key: str,
        max_messages: int = 50,
        *,
        schema: str = "public",
        cipher: Cipher | None = None,
    ) -> None:
        """The history under ``key`` in the database at ``dsn`` (or a ``PgDb``), in ``schema``.

        Nothing connects before the first operation. ``cipher``: seal every message at
        rest (``docs/security.md``).
        """
        super().__init__(key, max_messages, cipher)
        self._db = _db(dsn, schema)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PostgresMemory({redact(self._db.dsn)!r}, {self.key!r})"

    async def _history(self) -> tuple[list[bytes], int]:
        # One statement: the rows and the key's marker from one snapshot.
        rows = await self._db.fetch(
            "SELECT coalesce((SELECT next_seq FROM {s}.fa_memories WHERE key = %s), 0), "
            "array(SELECT body FROM {s}.fa_memory_messages WHERE key = %s ORDER BY seq)",
            (self.key, self.key),
        )
        marker, bodies = rows[0]
        return [bytes(b) for b in bodies], int(marker)

    def _replace(self, rows: Sequence[tuple[int, bytes]]) -> Steps[int]:
        # fa_append_memory replaces, windows and moves the head in one statement; a
        # replace with nothing moves the marker (next_seq) here.
        sql = self._db.sql
        start, _ = yield from self._head()
        yield Query(
            sql("SELECT {s}.fa_append_memory(%s, %s, true, %s::smallint[], %s::bytea[])"),
            (self.key, self.max_messages, *_columns(rows)),
        )
        if rows:
            return start + len(rows)
        yield Query(
            sql("UPDATE {s}.fa_memories SET next_seq = %s, first_seq = %s WHERE key = %s"),
            (start + 1, start + 1, self.key),
        )
        return start + 1

    def _lock_key(self) -> Steps[None]:
        # Every write of the key takes its fa_memories row lock, a save too.
        yield from self._head()

    def _head(self) -> Steps[tuple[int, int]]:
        """``(next_seq, first_seq)`` of the key, its row locked (made when missing).

        The row every write of the key locks: writers wait until this transaction ends.
        ``next_seq`` is the key's marker, which every write moves forward.
        """
        sql = self._db.sql
        query = Query(
            sql("SELECT next_seq, first_seq FROM {s}.fa_memories WHERE key = %s FOR UPDATE"),
            (self.key,),
            "one",
        )
        row = yield query
        if row is None:  # the key's first write
            yield Query(
                sql("INSERT INTO {s}.fa_memories VALUES (%s, 0, 0, 0) ON CONFLICT DO NOTHING"),
                (self.key,),
            )
            row = yield query
        assert row is not None
        return int(row[0]), int(row[1])

    async def _append_new(self, given: list[Message]) -> None:
        # One statement: fa_append_memory skips the stored ids and windows.
        async with self._db.connection() as conn:
            await conn.execute(
                self._db.sql(
                    "SELECT {s}.fa_append_memory(%s, %s, false, %s::smallint[], %s::bytea[])"
                ),
                (self.key, self.max_messages, *_columns(self._rows(given))),
            )
        self._wrote(None)  # where the marker is now is learnt by the next load

    async def _append_if(
        self, given: list[Message], rows: list[tuple[int, bytes]], expected: int
    ) -> tuple[int, int] | None:
        sql = self._db.sql

        def append() -> Steps[tuple[int, int] | None]:  # one transaction, under the row lock
            start, first = yield from self._head()
            if start != expected or start - first > self.max_messages:
                # Written since; or the key holds more than this window (another
                # instance's wider one): the caller's view is not the stored rows.
                return None
            found = yield Query(
                sql(
                    "SELECT EXISTS (SELECT 1 FROM {s}.fa_memory_messages WHERE key = %s "
                    "AND {s}.fa_message_id(body) = ANY(%s)), "
                    "(SELECT min(seq) FROM {s}.fa_memory_messages WHERE key = %s)"
                ),
                (self.key, [m.id for m in given], self.key),
                "one",
            )
            if found is None or found[0]:
                return None
            lowest = start if found[1] is None else int(found[1])
            kept = yield Query(
                sql("SELECT {s}.fa_append_memory(%s, %s, false, %s::smallint[], %s::bytea[])"),
                (self.key, self.max_messages, *_columns(rows)),
                "one",
            )
            assert kept is not None
            # Every row was appended (no id was stored). The key's rows are contiguous,
            # so the window cut those below its new head, end - kept (the head a cut-free
            # append leaves may lie lower, where nothing was cut).
            end = start + len(rows)
            return end, max(0, end - int(kept[0]) - lowest)

        return await self._db.transact(append)


def _columns(rows: Sequence[tuple[int, bytes]]) -> tuple[list[int], list[bytes]]:
    """The shapes and the bodies of memory rows, as ``fa_append_memory`` takes them."""
    return [r[0] for r in rows], [r[1] for r in rows]


def postgres_store(
    url: str,
    *,
    lease: float,
    ttl: float | None,
    lock_timeout: float | None,
    schema: str = "public",
) -> Store:
    """The :class:`Store` of a PostgreSQL URL (one pool for the whole bundle)."""
    db, classes = (
        PgDb(url, schema=schema),
        (
            PostgresStorage,
            PostgresCheckpointer,
            PostgresMemory,
            PostgresBankBackend,
        ),
    )
    return db_store(url, db, classes, lease=lease, ttl=ttl, lock_timeout=lock_timeout)


class PostgresBankBackend(SqlBankBackend):
    """A memory bank in the PostgreSQL schema (tables ``fa_bank_*``, see ``stores._sql_bank``).

    Bank writers are serialised by the row lock of ``fa_bank_counter``, taken first in
    each write transaction and moved to the log's last seq before it commits: the log's
    entries commit in seq order (a sequence's values would not), and a key's current
    record is read under the lock, so two machines remembering one key leave one current
    record.
    """

    _db: PgDb

    def __init__(self, db: str | PgDb, *, schema: str = "public") -> None:
        """The bank in ``schema``; nothing connects before the first operation."""
        pg = _db(db, schema)
        sql = bank_sql(
            claim="SELECT seq FROM {s}.fa_bank_counter WHERE id = 1 FOR UPDATE",
            advance="UPDATE {s}.fa_bank_counter SET seq = :seq WHERE id = 1",
            in_ids="= ANY(:ids)",
            schema=pg.schema,
            named="%({})s",
        )
        super().__init__(pg, sql, list)

    async def _transact(self, steps: Callable[[], Steps[T]]) -> T:
        # Pipelined: a remember is three round trips (claim, the ids' check, the writes
        # with COMMIT) where one a statement would be eight.
        return await self._db.transact_pipelined(steps)
