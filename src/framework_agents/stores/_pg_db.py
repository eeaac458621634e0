"""One PostgreSQL database (and schema) behind a psycopg 3 async pool (internal).

The pool holds autocommit connections (no pipeline mode); each write is one explicit
transaction. Reads ask for binary results (``binary=True``): a ``bytea`` (every stored
body) then arrives as its bytes instead of hex text to decode. Tables live in ``schema``
(default ``public``), created idempotently under an advisory transaction lock, and
mirror the SQLite layout (``stores._sqlite_db``) with server time
(``clock_timestamp()``) for leases and ages, so machines need not agree on their clocks.
The memory bank's tables (``fa_bank_*``, ``stores._sql_bank``) add ``fa_bank_counter``,
the one row whose lock serialises bank writers. Tables added since a schema version are
created on every start (``IF NOT EXISTS``), so they need no new version (see
``stores._sqlite_db``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import BackendUnavailableError, InvalidArgumentError
from ._codec import DATABASE_FORMAT_VERSION, SchemaTooNewError, redact, unavailable
from ._sql import Dialect, Query, Stepper, Steps

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncPipeline
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "CONFLICT_SQLSTATE",
    "NOW",
    "POSTGRES",
    "PgDb",
    "drive",
    "execute",
    "import_psycopg",
]

T = TypeVar("T")

#: The SQLSTATE with which ``fa_save_thread`` refuses a write (CHECKPOINT_CONFLICT).
CONFLICT_SQLSTATE = "FA409"

#: Server time in seconds since the epoch.
NOW = "extract(epoch from clock_timestamp())"

#: The statements of the logic shared with SQLite (``stores._sql``); ``{s}``: the schema.
POSTGRES = Dialect(
    kv_get="SELECT data FROM {s}.fa_kv WHERE key = %(key)s",
    kv_keys="SELECT key FROM {s}.fa_kv WHERE key >= %(low)s AND key < %(high)s ORDER BY key",
    kv_under="SELECT 1 FROM {s}.fa_kv WHERE key > %(low)s AND key < %(high)s LIMIT 1",
    kv_update=f"UPDATE {{s}}.fa_kv SET data = %(data)s, digest = %(digest)s, updated_at = {NOW} "
    "WHERE key = %(key)s",
    kv_insert="INSERT INTO {s}.fa_kv (key, data, digest, updated_at) "
    f"VALUES (%(key)s, %(data)s, %(digest)s, {NOW})",
    kv_drop_log="DELETE FROM {s}.fa_kv_log WHERE key = %(key)s",
    kv_drop="DELETE FROM {s}.fa_kv WHERE key = %(key)s",
    # A head of version 0 is the row a save makes to lock before it writes: no checkpoint.
    thread_head="SELECT version, length, head FROM {s}.fa_threads "
    "WHERE thread_id = %(thread_id)s AND version > 0",
    thread_bodies="SELECT body FROM {s}.fa_thread_messages WHERE thread_id = %(thread_id)s "
    "ORDER BY seq",
    thread_ids="SELECT thread_id FROM {s}.fa_threads WHERE version > 0 "
    'ORDER BY thread_id COLLATE "C"',
    lock_state=f"SELECT owner, expires_at > {NOW} FROM {{s}}.fa_locks "
    "WHERE thread_id = %(thread_id)s FOR SHARE",
    thread_drop_messages="DELETE FROM {s}.fa_thread_messages WHERE thread_id = %(thread_id)s",
    thread_drop="DELETE FROM {s}.fa_threads WHERE thread_id = %(thread_id)s",
    memory_marker="SELECT coalesce((SELECT next_seq FROM {s}.fa_memories WHERE key = %(key)s), 0)",
    memory_stored="SELECT shape, body, {s}.fa_message_id(body) FROM {s}.fa_memory_messages "
    "WHERE key = %(key)s ORDER BY seq",
    # The thread's head row first, as a save locks it: saves of the thread wait.
    rotate_head="SELECT length, head FROM {s}.fa_threads "
    "WHERE thread_id = %(thread_id)s AND version > 0 FOR UPDATE",
    rotate_bodies="SELECT seq, body FROM {s}.fa_thread_messages "
    "WHERE thread_id = %(thread_id)s ORDER BY seq FOR UPDATE",
    set_head="UPDATE {s}.fa_threads SET head = %(head)s WHERE thread_id = %(thread_id)s",
    set_body="UPDATE {s}.fa_thread_messages SET body = %(body)s "
    "WHERE thread_id = %(thread_id)s AND seq = %(seq)s",
    memory_keys="SELECT DISTINCT key FROM {s}.fa_memory_messages ORDER BY key",
    # The key's fa_memories row first, as every write of the key locks it.
    rotate_memory="SELECT m.seq, m.body FROM {s}.fa_memory_messages m, "
    "(SELECT 1 FROM {s}.fa_memories WHERE key = %(key)s FOR UPDATE) AS l "
    "WHERE m.key = %(key)s ORDER BY m.seq FOR UPDATE OF m",
    set_memory_body="UPDATE {s}.fa_memory_messages SET body = %(body)s "
    "WHERE key = %(key)s AND seq = %(seq)s",
)


async def execute(
    conn: AsyncConnection[Any], query: Query, pipeline: AsyncPipeline | None = None
) -> Any:
    """Run one query on ``conn``; what it fetches.

    In ``pipeline`` mode a statement whose result is not read is only queued (sent with
    the next one that is read, or with the transaction's end); a count syncs.
    """
    if query.fetch == "many":
        async with conn.cursor() as many:
            await many.executemany(query.sql, query.params)
        return None
    # Results in binary: a bytea comes back as its bytes, not hex text parsed again (a
    # 10,000-row read took 14 ms in text, 5.8 in binary); every type read has a loader.
    cursor = await conn.execute(query.sql, query.params, binary=True)
    if query.fetch == "one":
        return await cursor.fetchone()
    if query.fetch == "all":
        return await cursor.fetchall()
    if query.fetch != "count":
        return None
    if pipeline is not None:
        await pipeline.sync()
    return cursor.rowcount


async def drive(
    conn: AsyncConnection[Any], steps: Steps[T], pipeline: AsyncPipeline | None = None
) -> T:
    """Run ``steps`` on ``conn``, one statement after the other; their outcome."""
    stepper = Stepper(steps)
    query = stepper.next()
    while query is not None:
        query = stepper.next(await execute(conn, query, pipeline))
    return stepper.outcome


_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")

_TABLES = """
CREATE TABLE IF NOT EXISTS {s}.fa_schema (
    id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.fa_kv (
    key TEXT COLLATE "C" PRIMARY KEY, data BYTEA NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, digest TEXT);
CREATE TABLE IF NOT EXISTS {s}.fa_kv_log (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key TEXT COLLATE "C" NOT NULL,
    record BYTEA NOT NULL);
CREATE INDEX IF NOT EXISTS fa_kv_log_key ON {s}.fa_kv_log (key, seq);
CREATE TABLE IF NOT EXISTS {s}.fa_threads (
    thread_id TEXT PRIMARY KEY, version BIGINT NOT NULL, length BIGINT NOT NULL,
    head BYTEA NOT NULL, pending BOOLEAN NOT NULL, updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.fa_thread_messages (
    thread_id TEXT NOT NULL, seq BIGINT NOT NULL, body BYTEA NOT NULL,
    PRIMARY KEY (thread_id, seq));
CREATE TABLE IF NOT EXISTS {s}.fa_locks (
    thread_id TEXT PRIMARY KEY, fence BIGINT NOT NULL, owner TEXT,
    expires_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.fa_memories (
    key TEXT PRIMARY KEY, first_seq BIGINT NOT NULL, next_seq BIGINT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.fa_memory_messages (
    key TEXT NOT NULL, seq BIGINT NOT NULL, shape SMALLINT NOT NULL, body BYTEA NOT NULL,
    PRIMARY KEY (key, seq));
CREATE TABLE IF NOT EXISTS {s}.fa_bank_records (
    id TEXT COLLATE "C" PRIMARY KEY, namespace TEXT NOT NULL, key TEXT, revision BIGINT NOT NULL,
    valid_from BIGINT NOT NULL, valid_to BIGINT, expires_at BIGINT);
CREATE INDEX IF NOT EXISTS fa_bank_records_key
    ON {s}.fa_bank_records (namespace, key, valid_from, id);
CREATE TABLE IF NOT EXISTS {s}.fa_bank_revisions (
    id TEXT NOT NULL, revision BIGINT NOT NULL, body BYTEA NOT NULL, vector BYTEA,
    PRIMARY KEY (id, revision));
CREATE TABLE IF NOT EXISTS {s}.fa_bank_changes (
    seq BIGINT PRIMARY KEY, record_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.fa_bank_counter (
    id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL);
INSERT INTO {s}.fa_bank_counter VALUES (1, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS {s}.fa_bank_jobs (
    created BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL, payload BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.fa_bank_keys (
    namespace TEXT COLLATE "C" PRIMARY KEY, wrapped BYTEA NOT NULL)
"""


#: A thread save in one round trip: lock check, version check, log trim, append, head.
#: A conflict raises (SQLSTATE FA409), so the statement writes nothing.
_SAVE_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.fa_save_thread(
    p_thread TEXT, p_owner TEXT, p_expected BIGINT, p_keep BIGINT, p_head BYTEA,
    p_pending BOOLEAN, p_length BIGINT, p_bodies BYTEA[]) RETURNS BIGINT
LANGUAGE plpgsql AS $fn$
DECLARE
    l_owner TEXT;
    l_live BOOLEAN;
    l_version BIGINT;
    l_stored BIGINT;
    l_now DOUBLE PRECISION := extract(epoch from clock_timestamp());
BEGIN
    SELECT owner, expires_at > l_now INTO l_owner, l_live
        FROM {s}.fa_locks WHERE thread_id = p_thread FOR SHARE;
    IF p_owner IS NOT NULL THEN
        IF l_owner IS DISTINCT FROM p_owner OR NOT coalesce(l_live, false) THEN
            RAISE EXCEPTION 'this run lost its lock (lease expired, connection lost or taken '
                'by another run)' USING ERRCODE = 'FA409';
        END IF;
    ELSIF l_owner IS NOT NULL AND l_live THEN
        RAISE EXCEPTION 'another run holds the thread' USING ERRCODE = 'FA409';
    END IF;
    INSERT INTO {s}.fa_threads VALUES (p_thread, 0, 0, '', false, 0) ON CONFLICT DO NOTHING;
    SELECT version, length INTO l_version, l_stored
        FROM {s}.fa_threads WHERE thread_id = p_thread FOR UPDATE;
    IF p_expected IS NOT NULL AND l_version <> p_expected THEN
        RAISE EXCEPTION 'the thread changed since this instance read it (version %, now %)',
            p_expected, l_version USING ERRCODE = 'FA409';
    END IF;
    IF l_stored > p_keep THEN
        DELETE FROM {s}.fa_thread_messages WHERE thread_id = p_thread AND seq >= p_keep;
    END IF;
    IF cardinality(p_bodies) > 0 THEN
        INSERT INTO {s}.fa_thread_messages (thread_id, seq, body)
            SELECT p_thread, p_keep + o - 1, b FROM unnest(p_bodies) WITH ORDINALITY AS u(b, o);
    END IF;
    UPDATE {s}.fa_threads SET version = l_version + 1, length = p_length, head = p_head,
        pending = p_pending, updated_at = l_now WHERE thread_id = p_thread;
    RETURN l_version + 1;
END
$fn$
"""


#: A record appended to a storage value, in one round trip: the value's tag (its digest,
#: then ``digest:<seq of its last record>``) must still be ``p_expected``; returns the new
#: tag. A missing value or digest (a row written by schema version 1) is a conflict.
_APPEND_KV_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.fa_append_kv(p_key TEXT, p_expected TEXT, p_record BYTEA)
    RETURNS TEXT
LANGUAGE plpgsql AS $fn$
DECLARE
    l_digest TEXT;
    l_last BIGINT;
    l_tag TEXT;
    l_seq BIGINT;
BEGIN
    SELECT digest INTO l_digest FROM {s}.fa_kv WHERE key = p_key FOR UPDATE;
    IF l_digest IS NOT NULL THEN
        SELECT max(seq) INTO l_last FROM {s}.fa_kv_log WHERE key = p_key;
        l_tag := l_digest || coalesce(':' || l_last, '');
    END IF;
    IF l_tag IS NULL OR p_expected IS DISTINCT FROM l_tag THEN
        RAISE EXCEPTION 'storage key % changed since it was read', p_key
            USING ERRCODE = 'FA409';
    END IF;
    INSERT INTO {s}.fa_kv_log (key, record) VALUES (p_key, p_record) RETURNING seq INTO l_seq;
    UPDATE {s}.fa_kv SET updated_at = extract(epoch from clock_timestamp()) WHERE key = p_key;
    RETURN l_digest || ':' || l_seq;
END
$fn$
"""


#: A stored message's id, NULL for an unreadable body: the expression of the index a save
#: looks ids up with. IMMUTABLE (the bytes alone decide it), so it may index.
_MESSAGE_ID_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.fa_message_id(p_body BYTEA) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    RETURN convert_from(p_body, 'UTF8')::jsonb ->> 'id';
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$fn$
"""

#: Made after the function, on every start: a schema of an earlier release gains it.
_MESSAGE_ID_INDEX = """
CREATE INDEX IF NOT EXISTS fa_memory_message_ids
    ON {s}.fa_memory_messages (key, {s}.fa_message_id(body))
"""

#: A memory append (or, with ``p_fresh``, a replace) in one round trip, windowed like
#: ``memory._window.window_start``: keep the newest ``p_max``, cut between groups.
_APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.fa_append_memory(
    p_key TEXT, p_max BIGINT, p_fresh BOOLEAN, p_shapes SMALLINT[], p_bodies BYTEA[])
    RETURNS BIGINT
LANGUAGE plpgsql AS $fn$
DECLARE
    l_start BIGINT;
    l_end BIGINT;
    l_first BIGINT;
    l_head BIGINT;
    l_stored TEXT[];
    l_seqs BIGINT[];
    l_tail SMALLINT[];
    l_m INT;
    l_i INT;
    l_n BIGINT;
BEGIN
    INSERT INTO {s}.fa_memories VALUES (p_key, 0, 0, 0) ON CONFLICT DO NOTHING;
    SELECT next_seq, first_seq INTO l_start, l_head FROM {s}.fa_memories
        WHERE key = p_key FOR UPDATE;
    IF p_fresh THEN
        DELETE FROM {s}.fa_memory_messages WHERE key = p_key;
        l_head := l_start;
    END IF;
    -- An append skips a message whose id is stored already or came earlier in it (a
    -- retried save stores nothing twice). The given ids are looked up through
    -- fa_memory_message_ids first, in a statement planned with their values (EXECUTE):
    -- planned once for any ids, a lookup can become a hash of every stored id of the
    -- key, a pass over the whole history per save.
    IF NOT p_fresh THEN
        EXECUTE 'SELECT coalesce(array_agg({s}.fa_message_id(m.body)), ''{}'') '
             || 'FROM {s}.fa_memory_messages AS m '
             || 'WHERE m.key = $1 AND {s}.fa_message_id(m.body) = ANY($2)'
            INTO l_stored
            USING p_key, ARRAY(SELECT {s}.fa_message_id(b) FROM unnest(p_bodies) AS b);
    END IF;
    INSERT INTO {s}.fa_memory_messages (key, seq, shape, body)
        SELECT p_key, l_start + row_number() OVER (ORDER BY o) - 1, h, b
        FROM (SELECT h, b, o, mid, row_number() OVER (PARTITION BY mid ORDER BY o) AS nth
              FROM (SELECT h, b, o, {s}.fa_message_id(b) AS mid
                    FROM unnest(p_shapes, p_bodies) WITH ORDINALITY AS u(h, b, o)) AS u
             ) AS given
        WHERE p_fresh OR given.mid IS NULL OR (given.nth = 1 AND given.mid <> ALL(l_stored));
    GET DIAGNOSTICS l_n = ROW_COUNT;
    IF l_n = 0 AND NOT p_fresh THEN
        RETURN l_start - l_head;  -- nothing changes (not even the window: that is a write's)
    END IF;
    l_end := l_start + l_n;
    -- A key's rows lie in [first_seq, next_seq): when that many fit the window, nothing
    -- is cut and the tail is not read (an append then costs what it adds).
    IF l_end - l_head <= p_max THEN
        UPDATE {s}.fa_memories SET first_seq = l_head, next_seq = l_end,
            updated_at = extract(epoch from clock_timestamp()) WHERE key = p_key;
        RETURN l_end - l_head;
    END IF;
    SELECT array_agg(seq ORDER BY seq), array_agg(shape ORDER BY seq) INTO l_seqs, l_tail
        FROM (SELECT seq, shape FROM {s}.fa_memory_messages WHERE key = p_key
              ORDER BY seq DESC LIMIT p_max + 1) AS t;
    l_m := coalesce(cardinality(l_seqs), 0);
    l_first := CASE WHEN l_m > 0 THEN l_seqs[1] ELSE l_end END;
    IF l_m > p_max THEN
        l_i := l_m - p_max + 1;
        WHILE l_i <= l_m AND l_tail[l_i] = 1 LOOP l_i := l_i + 1; END LOOP;
        WHILE l_i <= l_m LOOP
            IF l_tail[l_i] = 1 THEN
                l_i := l_i + 1;
            ELSIF l_tail[l_i] = 2 THEN
                l_i := l_i + 1;
                WHILE l_i <= l_m AND l_tail[l_i] = 1 LOOP l_i := l_i + 1; END LOOP;
            ELSE
                EXIT;
            END IF;
        END LOOP;
        l_first := CASE WHEN l_i <= l_m THEN l_seqs[l_i] ELSE l_end END;
        DELETE FROM {s}.fa_memory_messages WHERE key = p_key AND seq < l_first;
    END IF;
    UPDATE {s}.fa_memories SET first_seq = l_first, next_seq = l_end,
        updated_at = extract(epoch from clock_timestamp()) WHERE key = p_key;
    RETURN l_end - l_first;
END
$fn$
"""


def import_psycopg() -> tuple[Any, Any]:
    """``(psycopg, psycopg_pool)``, or ImportError saying what to install."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ImportError(
            "the PostgreSQL stores need psycopg 3 and its pool: "
            "pip install 'psycopg[binary]' psycopg-pool"
        ) from exc
    return psycopg, psycopg_pool


class PgDb:
    """A lazily opened pool of autocommit connections to one database and schema."""

    def __init__(
        self, dsn: str, *, schema: str = "public", connect_timeout: float = 5.0, max_size: int = 10
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        if not isinstance(dsn, str) or not dsn:
            raise InvalidArgumentError(f"a PostgreSQL dsn must be a non-empty str, not {dsn!r:.40}")
        if not isinstance(schema, str) or not _IDENT.match(schema):
            raise InvalidArgumentError(
                f"schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*), not {schema!r}"
            )
        self.dsn = dsn
        self.schema = schema
        self.connect_timeout = connect_timeout
        self.max_size = max_size
        self._pool: AsyncConnectionPool[Any] | None = None
        self._closed = False
        self._opening: asyncio.Lock | None = None

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"PgDb({redact(self.dsn)!r}, schema={self.schema!r})"

    @cached_property
    def dialect(self) -> Dialect:
        """The statements of the logic shared with SQLite, in this schema."""
        return POSTGRES.mapped(self.sql)

    @property
    def place(self) -> str:
        """The schema, as error messages name it."""
        return repr(self.schema)

    def sql(self, text: str) -> Any:
        """``text`` with ``{s}`` replaced by the quoted schema (a query for psycopg)."""
        return text.replace("{s}", f'"{self.schema}"')

    async def connect(self) -> AsyncConnection[Any]:
        """A new autocommit connection of its own (thread locks hold one for a run)."""
        psycopg, _ = import_psycopg()
        try:
            conn: AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
            )
        except psycopg.Error as exc:
            raise unavailable(self.dsn, exc) from None
        return conn

    async def _create(self, conn: AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"framework-agents schema {self.schema}",),
            )
            await conn.execute(self.sql("CREATE SCHEMA IF NOT EXISTS {s}"))
            for statement in self.sql(_TABLES).split(";"):
                await conn.execute(statement)
            await conn.execute(
                self.sql("INSERT INTO {s}.fa_schema VALUES (1, %s) ON CONFLICT DO NOTHING"),
                (DATABASE_FORMAT_VERSION,),
            )
            cur = await conn.execute(self.sql("SELECT version FROM {s}.fa_schema"))
            row = await cur.fetchone()
            version = row[0] if row else DATABASE_FORMAT_VERSION
            if version > DATABASE_FORMAT_VERSION:  # rolled back: a newer schema is left as it is
                raise SchemaTooNewError(
                    f"schema {self.schema!r} of {redact(self.dsn)} has version {version}, "
                    f"newer than this framework-agents understands ({DATABASE_FORMAT_VERSION}); "
                    "upgrade to use it"
                )
            if version < 2:  # 2: value digests (NULL: unknown) and value logs
                await conn.execute(
                    self.sql("ALTER TABLE {s}.fa_kv ADD COLUMN IF NOT EXISTS digest TEXT")
                )
            if version < DATABASE_FORMAT_VERSION:
                await conn.execute(
                    self.sql("UPDATE {s}.fa_schema SET version = %s"), (DATABASE_FORMAT_VERSION,)
                )
            for function in (
                _SAVE_FUNCTION,
                _MESSAGE_ID_FUNCTION,
                _MESSAGE_ID_INDEX,
                _APPEND_FUNCTION,
                _APPEND_KV_FUNCTION,
            ):
                await conn.execute(self.sql(function))

    async def pool(self) -> AsyncConnectionPool[Any]:
        """The open pool (the first call connects, creates the schema and opens it)."""
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            return await self._open()

    async def _open(self) -> AsyncConnectionPool[Any]:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise InvalidArgumentError(f"{self!r} is closed")
        psycopg, psycopg_pool = import_psycopg()
        first = await self.connect()
        try:
            await self._create(first)
        except psycopg.Error as exc:
            raise unavailable(self.dsn, exc) from None
        finally:
            await first.close()
        pool: AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self.max_size,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self.connect_timeout))},
            check=psycopg_pool.AsyncConnectionPool.check_connection,
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout)
        except psycopg_pool.PoolTimeout as exc:
            await pool.close()
            raise unavailable(self.dsn, exc) from None
        self._pool = pool
        return pool

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection inside one transaction (BACKEND_UNAVAILABLE if it drops)."""
        psycopg, _ = import_psycopg()
        pool = await self.pool()
        try:
            async with pool.connection() as conn, conn.transaction():
                yield conn
        except psycopg.OperationalError as exc:
            if exc.sqlstate == CONFLICT_SQLSTATE:  # raised by fa_save_thread, not a lost link
                raise
            raise unavailable(self.dsn, exc) from None

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled autocommit connection (reads; BACKEND_UNAVAILABLE if it drops)."""
        psycopg, _ = import_psycopg()
        pool = await self.pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            if exc.sqlstate == CONFLICT_SQLSTATE:  # raised by fa_save_thread, not a lost link
                raise
            raise unavailable(self.dsn, exc) from None

    async def read(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``fn(conn)`` on a pooled connection, for reads.

        Retried once on a fresh connection when the first one drops; then
        BACKEND_UNAVAILABLE.
        """
        psycopg, _ = import_psycopg()
        pool = await self.pool()
        for attempt in range(2):
            try:
                async with pool.connection() as conn:
                    return await fn(conn)
            except psycopg.OperationalError as exc:
                if attempt:
                    raise unavailable(self.dsn, exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def fetch(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of one read query (``{s}`` is the schema), retried like :meth:`read`."""

        async def run(conn: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(self.sql(query), params, binary=True)
            return await cur.fetchall()

        return await self.read(run)

    async def transact(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one transaction on a pooled connection."""
        async with self.transaction() as conn:
            return await drive(conn, steps())

    async def transact_pipelined(self, steps: Callable[[], Steps[T]]) -> T:
        """:meth:`transact` in pipeline mode: fewer round trips.

        ``BEGIN`` goes with the first statement, each statement whose result the steps do
        not read with the next one they do, and the last ones with ``COMMIT``.
        """
        psycopg, _ = import_psycopg()
        pool = await self.pool()
        try:
            async with (
                pool.connection() as conn,
                conn.pipeline() as pipeline,
                conn.transaction(),
            ):
                return await drive(conn, steps(), pipeline)
        except psycopg.OperationalError as exc:
            raise unavailable(self.dsn, exc) from None

    async def snapshot(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one repeatable-read transaction, retried like :meth:`read`."""

        async def run(conn: AsyncConnection[Any]) -> T:
            async with conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return await drive(conn, steps())

        return await self.read(run)

    async def query(self, query: Query) -> Any:
        """The result of one read statement, retried like :meth:`read`."""
        return await self.read(lambda conn: execute(conn, query))

    async def close(self) -> None:
        """Close the pool (idempotent)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` is a BACKEND_UNAVAILABLE error."""
    return isinstance(exc, BackendUnavailableError)
