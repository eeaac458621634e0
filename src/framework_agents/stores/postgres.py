"""PostgreSQL stores: sessions, threads and memories shared by every machine (extra ``postgres``).

Same layout as SQLite (``stores._pg_db``); the thread lock is a session-level advisory
lock, ``pg_try_advisory_lock(hashtextextended(<schema>/<thread_id>, 0))``, taken on a
connection of its own that the run keeps. That connection sets
``idle_session_timeout`` to the lease and renews the lease row every third of it, so a
holder that dies *or stops* (a paused VM, a SIGSTOP) loses the lock within the lease.
Fencing never rests on the advisory lock alone: ``fa_locks`` holds the owner token and a
fencing counter bumped by each acquisition, and every save checks them and the thread's
version in its transaction (CHECKPOINT_CONFLICT otherwise).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .._retention import AutoPrune, check_older_than, check_ttl
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import CheckpointConflictError, StorageKeyInvalidError
from ..memory._window import (
    bounded_view,
    check_max_messages,
    check_messages,
)
from ..messages import Message
from ..sessions._base import CompareAndPut, check_expected_tag, digest
from ..sessions._keys import validate_key, validate_prefix
from ..sessions.memory_storage import as_bytes
from ._base import Store
from ._checkpointer import LeasedCheckpointer
from ._codec import (
    ClosableStore,
    MergingMemory,
    appended_by_others,
    decode_messages,
    log_tag,
    memory_rows,
    redact,
    unavailable,
)
from ._pg_db import CONFLICT_SQLSTATE, NOW, PgDb, import_psycopg

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresCheckpointer", "PostgresMemory", "PostgresStorage", "postgres_store"]

_KEY_END = "\x7f"
#: The tag of a value written without a digest (schema version 1): it matches no tag.
_NO_TAG = object()
#: Lock connections kept open between runs (a new connection costs a round trip or more).
_IDLE_LOCK_CONNECTIONS = 4


_Closable = ClosableStore[PgDb]


def _db(dsn: str | PgDb, schema: str) -> PgDb:
    return dsn if isinstance(dsn, PgDb) else PgDb(dsn, schema=schema)


class PostgresStorage(_Closable, AutoPrune, CompareAndPut):
    """The :class:`~framework_agents.sessions.Storage` contract in table ``fa_kv``.

    It keeps logs too (:class:`~framework_agents.sessions._base.LoggedStorage`): a
    record appended to a value is one row of ``fa_kv_log`` (one round trip), so a
    session's save writes what is new, not its history again.
    """

    def __init__(
        self, dsn: str | PgDb, *, schema: str = "public", ttl: float | None = None
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        self._db = _db(dsn, schema)
        self.ttl = check_ttl(ttl)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PostgresStorage({redact(self._db.dsn)!r})"

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
        sql = self._db.sql
        async with self._db.transaction() as conn:
            # Puts under one top-level segment are serialised: the value/directory rule
            # looks at other keys, which no row lock covers.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{self._db.schema}/kv/{segments[0]}",),
            )
            cur = await conn.execute(
                sql("SELECT data, digest FROM {s}.fa_kv WHERE key = %s FOR UPDATE"), (key,)
            )
            stored = await cur.fetchone()
            if conditional:
                found: object = None  # the stored tag; a value without digest has none
                if stored is not None:
                    cur = await conn.execute(
                        sql("SELECT max(seq) FROM {s}.fa_kv_log WHERE key = %s"), (key,)
                    )
                    (last,) = await cur.fetchone() or (None,)
                    found = _NO_TAG if stored[1] is None else log_tag(stored[1], last)
                if found != expected:
                    raise CheckpointConflictError(
                        f"storage key {key!r} changed since it was read; nothing was written"
                    )
            if stored is not None:
                await conn.execute(
                    sql(
                        f"UPDATE {{s}}.fa_kv SET data = %s, digest = %s, updated_at = {NOW} "
                        "WHERE key = %s"
                    ),
                    (value, value_digest, key),
                )
                await conn.execute(sql("DELETE FROM {s}.fa_kv_log WHERE key = %s"), (key,))
                return
            cur = await conn.execute(
                sql("SELECT key FROM {s}.fa_kv WHERE key = ANY(%s) LIMIT 1"), (ancestors,)
            )
            row = await cur.fetchone()
            if row is not None:
                raise StorageKeyInvalidError(
                    f"cannot store {key!r}: {row[0]!r} already holds a value"
                )
            cur = await conn.execute(
                sql("SELECT 1 FROM {s}.fa_kv WHERE key > %s AND key < %s LIMIT 1"),
                (key + "/", key + "0"),
            )
            if await cur.fetchone() is not None:
                raise StorageKeyInvalidError(
                    f"cannot store {key!r}: other keys are stored under it"
                )
            await conn.execute(
                sql(
                    "INSERT INTO {s}.fa_kv (key, data, digest, updated_at) "
                    f"VALUES (%s, %s, %s, {NOW})"
                ),
                (key, value, value_digest),
            )
        await self._after_write()

    async def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``."""
        validate_key(key)
        rows = await self._db.fetch("SELECT data FROM {s}.fa_kv WHERE key = %s", (key,))
        return bytes(rows[0][0]) if rows else None

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
                    sql("SELECT data, digest FROM {s}.fa_kv WHERE key = %s"), (key,)
                )
                row = await cur.fetchone()
                if row is None:
                    return None, []
                cur = await conn.execute(
                    sql("SELECT seq, record FROM {s}.fa_kv_log WHERE key = %s ORDER BY seq"),
                    (key,),
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

    async def delete(self, key: str) -> None:
        """Remove ``key`` and its log (no-op when missing)."""
        validate_key(key)
        async with self._db.transaction() as conn:
            await conn.execute(self._db.sql("DELETE FROM {s}.fa_kv_log WHERE key = %s"), (key,))
            await conn.execute(self._db.sql("DELETE FROM {s}.fa_kv WHERE key = %s"), (key,))

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Stored keys starting with ``prefix``, sorted."""
        validate_prefix(prefix)
        rows = await self._db.fetch(
            "SELECT key FROM {s}.fa_kv WHERE key >= %s AND key < %s ORDER BY key",
            (prefix, prefix + _KEY_END),
        )
        return [r[0] for r in rows]

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


class PostgresCheckpointer(_Closable, LeasedCheckpointer):
    """Thread checkpoints (head row + append-only message log) with an advisory thread lock.

    See the module docstring for the lock and fencing design, and
    :class:`~framework_agents.stores.SqliteCheckpointer` for the layout and the rules.
    """

    def __init__(
        self,
        dsn: str | PgDb,
        *,
        schema: str = "public",
        lock_timeout: float | None = 10.0,
        lease: float = 30.0,
        ttl: float | None = None,
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        self._db = _db(dsn, schema)
        self._lock_conns: dict[str, Any] = {}
        self._idle_lock_conns: list[Any] = []
        self._closing = False
        self._set_up(
            lock_timeout=lock_timeout,
            lease=lease,
            ttl=ttl,
            try_acquire=self._try_acquire,
            renew=self._renew,
            release=self._release,
            give_up=self._give_up,
        )

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PostgresCheckpointer({redact(self._db.dsn)!r})"

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint, or ``None`` (CHECKPOINT_CORRUPT when unreadable)."""
        check_thread_id(thread_id)
        sql = self._db.sql

        async def read(conn: Any) -> tuple[Any, list[Any]]:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cur = await conn.execute(
                    sql("SELECT version, length, head FROM {s}.fa_threads WHERE thread_id = %s"),
                    (thread_id,),
                )
                head = await cur.fetchone()
                if head is None or head[0] == 0:
                    return head, []
                cur = await conn.execute(
                    sql(
                        "SELECT body FROM {s}.fa_thread_messages WHERE thread_id = %s ORDER BY seq"
                    ),
                    (thread_id,),
                )
                return head, await cur.fetchall()

        head, rows = await self._db.read(read)
        if head is None or head[0] == 0:
            self._forget(thread_id)
            return None
        version, length, data = head
        source = f"checkpoint of thread {thread_id!r} in {self._db.schema!r}"
        bodies = [bytes(b[0]) for b in rows]
        return self._loaded(thread_id, version, length, bytes(data), bodies, source=source)

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        rows = await self._db.fetch(
            'SELECT thread_id FROM {s}.fa_threads WHERE version > 0 ORDER BY thread_id COLLATE "C"',
            (),
        )
        return [r[0] for r in rows]

    async def _check_lock(self, conn: Any, thread_id: str) -> None:
        cur = await conn.execute(
            self._db.sql(
                f"SELECT owner, expires_at > {NOW} FROM {{s}}.fa_locks WHERE thread_id = %s "
                "FOR SHARE"
            ),
            (thread_id,),
        )
        row = await cur.fetchone()
        owner = self._owner(thread_id)
        if owner is not None:
            if row is None or row[0] != owner or not row[1]:
                raise CheckpointConflictError(
                    f"thread {thread_id!r}: this run lost its lock (lease expired, connection "
                    "lost or taken by another run); nothing was written"
                )
        elif row is not None and row[0] is not None and row[1]:
            raise CheckpointConflictError(
                f"thread {thread_id!r} is held by another run; nothing was written"
            )

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Store ``checkpoint``, writing only the messages that are not stored yet.

        CHECKPOINT_CONFLICT (nothing written) when the thread changed since this instance
        last read or wrote it, or when another run holds it or took it from this one.
        """
        plan = self._plan(checkpoint)
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
                assert row is not None
                version = int(row[0])
        except psycopg.Error as exc:
            if exc.sqlstate != CONFLICT_SQLSTATE:
                raise
            self._forget(thread_id)
            detail = exc.diag.message_primary or "conflict"
            raise CheckpointConflictError(
                f"thread {thread_id!r}: {detail}; nothing was written"
            ) from None
        self._saved(plan, version)
        await self._after_write()

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (no error when there is none)."""
        check_thread_id(thread_id)
        self._forget(thread_id)
        async with self._db.transaction() as conn:
            await self._check_lock(conn, thread_id)
            await conn.execute(
                self._db.sql("DELETE FROM {s}.fa_thread_messages WHERE thread_id = %s"),
                (thread_id,),
            )
            await conn.execute(
                self._db.sql("DELETE FROM {s}.fa_threads WHERE thread_id = %s"), (thread_id,)
            )

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


class PostgresMemory(MergingMemory, _Closable):
    """A windowed history under ``key``; ``save()`` appends and trims in one transaction."""

    def __init__(
        self, dsn: str | PgDb, key: str, max_messages: int = 50, *, schema: str = "public"
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        validate_key(key)
        self._db = _db(dsn, schema)
        self.key = key
        self.max_messages: int = check_max_messages(max_messages)
        # Ids of the history this instance last loaded or wrote (the base of a merge).
        self._seen: set[str] | None = None

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PostgresMemory({redact(self._db.dsn)!r}, {self.key!r})"

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (MEMORY_CORRUPT)."""
        # One statement: the rows and the key's marker from one snapshot.
        rows = await self._db.fetch(
            "SELECT coalesce((SELECT next_seq FROM {s}.fa_memories WHERE key = %s), 0), "
            "array(SELECT body FROM {s}.fa_memory_messages WHERE key = %s ORDER BY seq)",
            (self.key, self.key),
        )
        marker, bodies = rows[0]
        source = f"memory {self.key!r} in {self._db.schema!r}"
        messages = decode_messages([bytes(b) for b in bodies], source=source)
        self._seen = {m.id for m in messages}
        self._observe(int(marker))
        return bounded_view(messages, self.max_messages)

    async def _replace_rows(
        self, conn: AsyncConnection[Any], rows: Sequence[tuple[int, bytes]]
    ) -> int:
        """Replace the stored rows with ``rows`` (windowed), in the caller's transaction.

        Returns the marker after. ``fa_append_memory`` replaces, windows and moves the
        head in one statement; replacing with nothing (a clear) moves the marker
        (``next_seq``) itself, so that every write is seen.
        """
        start, _ = await self._head(conn)
        await conn.execute(
            self._db.sql("SELECT {s}.fa_append_memory(%s, %s, true, %s::smallint[], %s::bytea[])"),
            (self.key, self.max_messages, *_columns(rows)),
        )
        if rows:
            return start + len(rows)
        await conn.execute(
            self._db.sql("UPDATE {s}.fa_memories SET next_seq = %s, first_seq = %s WHERE key = %s"),
            (start + 1, start + 1, self.key),
        )
        return start + 1

    async def _head(self, conn: AsyncConnection[Any]) -> tuple[int, int]:
        """``(next_seq, first_seq)`` of the key, its row locked (made when missing).

        The row every write of the key locks: writers wait until this transaction ends.
        ``next_seq`` is the key's marker, which every write moves forward.
        """
        query = self._db.sql(
            "SELECT next_seq, first_seq FROM {s}.fa_memories WHERE key = %s FOR UPDATE"
        )
        row = await (await conn.execute(query, (self.key,))).fetchone()
        if row is None:  # the key's first write
            await conn.execute(
                self._db.sql(
                    "INSERT INTO {s}.fa_memories VALUES (%s, 0, 0, 0) ON CONFLICT DO NOTHING"
                ),
                (self.key,),
            )
            row = await (await conn.execute(query, (self.key,))).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages``, then keep the newest ``max_messages`` (one statement).

        Idempotent by message id: a message whose id is stored already (or given twice) is
        not appended again, so a save retried after a dropped connection stores nothing
        twice.
        """
        given = check_messages(messages)
        async with self._db.connection() as conn:
            await conn.execute(
                self._db.sql(
                    "SELECT {s}.fa_append_memory(%s, %s, false, %s::smallint[], %s::bytea[])"
                ),
                (self.key, self.max_messages, *_columns(memory_rows(given))),
            )
        self._saved(given)
        self._wrote(None)  # where the marker is now is learnt by the next load

    async def _read_marker(self) -> int:
        rows = await self._db.fetch(
            "SELECT coalesce((SELECT next_seq FROM {s}.fa_memories WHERE key = %s), 0)",
            (self.key,),
        )
        return int(rows[0][0])

    async def _append_if(
        self, given: list[Message], rows: list[tuple[int, bytes]], expected: int
    ) -> tuple[int, int] | None:
        # One transaction, under the key's row lock.
        async with self._db.transaction() as conn:
            start, first = await self._head(conn)
            if start != expected or start - first > self.max_messages:
                # Written since; or the key holds more than this window (another
                # instance's wider one): the caller's view is not the stored rows.
                return None
            cursor = await conn.execute(
                self._db.sql(
                    "SELECT EXISTS (SELECT 1 FROM {s}.fa_memory_messages WHERE key = %s "
                    "AND {s}.fa_message_id(body) = ANY(%s)), "
                    "(SELECT min(seq) FROM {s}.fa_memory_messages WHERE key = %s)"
                ),
                (self.key, [m.id for m in given], self.key),
            )
            found = await cursor.fetchone()
            if found is None or found[0]:
                return None
            lowest = start if found[1] is None else int(found[1])
            cursor = await conn.execute(
                self._db.sql(
                    "SELECT {s}.fa_append_memory(%s, %s, false, %s::smallint[], %s::bytea[])"
                ),
                (self.key, self.max_messages, *_columns(rows)),
            )
            kept = await cursor.fetchone()
        assert kept is not None
        # Every row was appended (no id was stored). The key's rows are contiguous, so
        # the window cut those below its new head, end - kept (the head a cut-free
        # append leaves may lie lower, where nothing was cut).
        end = start + len(rows)
        return end, max(0, end - int(kept[0]) - lowest)

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """:meth:`MergingMemory.commit`, in one transaction.

        It holds the key's ``fa_memories`` row lock, which every save takes too.
        """
        kept, ids, merge_base = self._commit_parts(messages, base)
        rows = memory_rows(kept)
        async with self._db.transaction() as conn:
            await self._head(conn)  # locked before the stored rows are read
            others: list[tuple[int, bytes]] = []
            if merge_base is not None:
                cursor = await conn.execute(
                    self._db.sql(
                        "SELECT shape, body, {s}.fa_message_id(body) FROM {s}.fa_memory_messages "
                        "WHERE key = %s ORDER BY seq"
                    ),
                    (self.key,),
                )
                stored = await cursor.fetchall()
                chosen = appended_by_others([r[2] for r in stored], merge_base, ids)
                others = [(stored[i][0], bytes(stored[i][1])) for i in chosen]
            marker = await self._replace_rows(conn, rows + others)
        self._wrote(marker)
        self._seen = ids

    async def clear(self) -> None:
        """Forget the stored history (the marker moves on)."""
        async with self._db.transaction() as conn:
            marker = await self._replace_rows(conn, [])
        self._wrote(marker)
        self._seen = set()


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
    db = PgDb(url, schema=schema)
    return Store(
        url,
        storage=PostgresStorage(db, ttl=ttl),
        checkpointer=PostgresCheckpointer(db, lease=lease, ttl=ttl, lock_timeout=lock_timeout),
        memory=lambda key, n: PostgresMemory(db, key, n),
        close=db.close,
    )
