"""One SQLite database file driven from a dedicated worker thread (internal).

The stdlib ``sqlite3`` module blocks, so every statement runs in one thread per
database object, which owns the connection; the event loop only awaits futures. The
database runs in WAL mode (readers never wait for the writer) with ``busy_timeout``,
and every write transaction starts with ``BEGIN IMMEDIATE`` so two processes never
deadlock upgrading a read lock ("database is locked" in the middle of a transaction).

Tables (schema version :data:`~._codec.DATABASE_FORMAT_VERSION`, created idempotently)::

    fa_schema           (id = 1, version)                    newer than the code: refused
    fa_kv               (key, data, digest, updated_at)      SqliteStorage
    fa_kv_log           (seq, key, record)                   records appended to a value
    fa_threads          (thread_id, version, length, head, pending, updated_at)
    fa_thread_messages  (thread_id, seq, body)               append-only message log
    fa_locks            (thread_id, fence, owner, expires_at) thread lock + fencing token
    fa_memories         (key, first_seq, next_seq, updated_at)
    fa_memory_messages  (key, seq, shape, body)              windowed by deleting old seqs
    fa_bank_records, fa_bank_revisions, fa_bank_changes, fa_bank_jobs: the memory bank
                        (``stores._sql_bank``)

Tables added since a schema version are created on every open (``IF NOT EXISTS``): a
database of an earlier release gains them without a migration, and an earlier release
ignores them, so they need no new version. The connection runs with
``secure_delete`` on: deleted rows (a forgotten memory) are overwritten with zeros.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from .._persist import FILE_MODE, fsync_dir, make_private_dirs
from ..errors import InvalidArgumentError, LockTimeoutError, StorageIOError
from ._codec import DATABASE_FORMAT_VERSION, SchemaTooNewError
from ._sql import Dialect, Query, Stepper, Steps

__all__ = ["MESSAGE_ID", "SQLITE", "SqliteDb", "drive", "execute", "sqlite_path"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fa_schema (
    id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS fa_kv (
    key TEXT PRIMARY KEY, data BLOB NOT NULL, updated_at REAL NOT NULL, digest TEXT);
CREATE TABLE IF NOT EXISTS fa_kv_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, record BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS fa_kv_log_key ON fa_kv_log (key, seq);
CREATE TABLE IF NOT EXISTS fa_threads (
    thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, length INTEGER NOT NULL,
    head BLOB NOT NULL, pending INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS fa_thread_messages (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (thread_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fa_locks (
    thread_id TEXT PRIMARY KEY, fence INTEGER NOT NULL, owner TEXT,
    expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS fa_memories (
    key TEXT PRIMARY KEY, first_seq INTEGER NOT NULL, next_seq INTEGER NOT NULL,
    updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS fa_memory_messages (
    key TEXT NOT NULL, seq INTEGER NOT NULL, shape INTEGER NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fa_bank_records (
    id TEXT PRIMARY KEY, namespace TEXT NOT NULL, key TEXT, revision INTEGER NOT NULL,
    valid_from INTEGER NOT NULL, valid_to INTEGER, expires_at INTEGER);
CREATE INDEX IF NOT EXISTS fa_bank_records_key
    ON fa_bank_records (namespace, key, valid_from, id);
CREATE TABLE IF NOT EXISTS fa_bank_revisions (
    id TEXT NOT NULL, revision INTEGER NOT NULL, body BLOB NOT NULL, vector BLOB,
    PRIMARY KEY (id, revision));
CREATE TABLE IF NOT EXISTS fa_bank_changes (
    seq INTEGER PRIMARY KEY, record_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fa_bank_jobs (
    created INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, namespace TEXT NOT NULL,
    payload BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS fa_bank_keys (
    namespace TEXT PRIMARY KEY, wrapped BLOB NOT NULL);
"""

#: A stored message's id (NULL for an unreadable body): the expression of the index a save
#: looks ids up with, so a retried save stores nothing twice. Created on every open, so
#: a database of an earlier release gains it too.
MESSAGE_ID = (
    "CASE WHEN json_valid(CAST(body AS TEXT)) THEN json_extract(CAST(body AS TEXT), '$.id') END"
)
_SCHEMA += (
    f"CREATE INDEX IF NOT EXISTS fa_memory_message_ids ON fa_memory_messages (key, {MESSAGE_ID});\n"
)


#: The statements of the logic shared with PostgreSQL (``stores._sql``).
SQLITE = Dialect(
    kv_get="SELECT data FROM fa_kv WHERE key = :key",
    kv_keys="SELECT key FROM fa_kv WHERE key >= :low AND key < :high ORDER BY key",
    kv_under="SELECT 1 FROM fa_kv WHERE key > :low AND key < :high LIMIT 1",
    kv_update="UPDATE fa_kv SET data = :data, digest = :digest, updated_at = :now WHERE key = :key",
    kv_insert="INSERT INTO fa_kv (key, data, digest, updated_at) "
    "VALUES (:key, :data, :digest, :now)",
    kv_drop_log="DELETE FROM fa_kv_log WHERE key = :key",
    kv_drop="DELETE FROM fa_kv WHERE key = :key",
    thread_head="SELECT version, length, head FROM fa_threads WHERE thread_id = :thread_id",
    thread_bodies="SELECT body FROM fa_thread_messages WHERE thread_id = :thread_id ORDER BY seq",
    thread_ids="SELECT thread_id FROM fa_threads ORDER BY thread_id",
    lock_state="SELECT owner, expires_at > :now FROM fa_locks WHERE thread_id = :thread_id",
    thread_drop_messages="DELETE FROM fa_thread_messages WHERE thread_id = :thread_id",
    thread_drop="DELETE FROM fa_threads WHERE thread_id = :thread_id",
    memory_marker="SELECT coalesce((SELECT next_seq FROM fa_memories WHERE key = :key), 0)",
    memory_stored=f"SELECT shape, body, {MESSAGE_ID} FROM fa_memory_messages "
    "WHERE key = :key ORDER BY seq",
    # BEGIN IMMEDIATE holds the write lock: no row lock needed.
    rotate_head="SELECT length, head FROM fa_threads WHERE thread_id = :thread_id",
    rotate_bodies="SELECT seq, body FROM fa_thread_messages WHERE thread_id = :thread_id "
    "ORDER BY seq",
    set_head="UPDATE fa_threads SET head = :head WHERE thread_id = :thread_id",
    set_body="UPDATE fa_thread_messages SET body = :body "
    "WHERE thread_id = :thread_id AND seq = :seq",
    memory_keys="SELECT DISTINCT key FROM fa_memory_messages ORDER BY key",
    rotate_memory="SELECT seq, body FROM fa_memory_messages WHERE key = :key ORDER BY seq",
    set_memory_body="UPDATE fa_memory_messages SET body = :body WHERE key = :key AND seq = :seq",
)


def execute(conn: sqlite3.Connection, query: Query) -> Any:
    """Run one query on ``conn``; what it fetches."""
    if query.fetch == "many":
        conn.executemany(query.sql, query.params)
        return None
    cursor = conn.execute(query.sql, query.params)
    if query.fetch == "one":
        return cursor.fetchone()
    if query.fetch == "all":
        return cursor.fetchall()
    return cursor.rowcount if query.fetch == "count" else None


def drive(conn: sqlite3.Connection, steps: Steps[T]) -> T:
    """Run ``steps`` on ``conn`` (in the database thread); their outcome."""
    stepper = Stepper(steps)
    query = stepper.next()
    while query is not None:
        query = stepper.next(execute(conn, query))
    return stepper.outcome


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a database of schema ``version`` to :data:`DATABASE_FORMAT_VERSION`.

    Runs in the caller's transaction.
    """
    if version < 2:  # 2: value digests (NULL: computed when needed) and the value logs
        columns = {row[1] for row in conn.execute("PRAGMA table_info(fa_kv)")}
        if "digest" not in columns:
            conn.execute("ALTER TABLE fa_kv ADD COLUMN digest TEXT")
    conn.execute("UPDATE fa_schema SET version = ? WHERE id = 1", (DATABASE_FORMAT_VERSION,))


#: How long one statement waits for another process's write transaction (ms).
BUSY_TIMEOUT_MS = 10_000


def sqlite_path(path: object) -> Path:
    """``path`` as a :class:`Path` (INVALID_ARGUMENT for anything else)."""
    if not isinstance(path, str | os.PathLike) or not isinstance(os.fspath(path), str):
        raise InvalidArgumentError(f"a SQLite path must be a str or os.PathLike, not {path!r:.60}")
    text = os.fspath(path)
    if not text or "\0" in text:
        raise InvalidArgumentError(f"invalid SQLite path {text!r}")
    return Path(text)


def _io_error(path: Path, exc: sqlite3.Error, *, write: bool) -> Exception:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return LockTimeoutError(
            f"SQLite database {str(path)!r} is locked by another writer (waited up to "
            f"{BUSY_TIMEOUT_MS / 1000:.0f}s)"
        )
    code = errno.ENOSPC if "full" in text else errno.EIO
    return StorageIOError(
        f"SQLite database {str(path)!r}: {text}", errno=code, may_have_landed=False
    )


def _create_private(path: Path) -> None:
    """Create ``path`` empty and owner-only (``0600``), and missing parents ``0700``.

    SQLite would create the file with its default mode (``0644`` less the umask); it
    gives the ``-wal`` and ``-shm`` files the database file's mode, so creating the file
    first makes all three owner-only, like the file stores' files. An existing file keeps
    the mode its owner gave it.
    """
    if str(path) == ":memory:":
        return
    make_private_dirs(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        os.close(os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE))
    except FileExistsError:
        return
    fsync_dir(path.parent)


class SqliteDb:
    """A connection to one database file, used from its own thread only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Set up the store; nothing connects before the first operation."""
        self.path = sqlite_path(path)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fa-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"SqliteDb({str(self.path)!r})"

    @property
    def dialect(self) -> Dialect:
        """The statements of the logic shared with PostgreSQL."""
        return SQLITE

    @property
    def place(self) -> str:
        """The database file, as error messages name it."""
        return repr(str(self.path))

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            _create_private(self.path)
        except OSError as exc:
            raise StorageIOError(
                f"cannot create SQLite database {str(self.path)!r}: {exc.strerror or exc}",
                errno=exc.errno,
            ) from exc
        # Processes opening a new database at once can get "database is locked" from the
        # switch to WAL without SQLite's busy handler being called: try again a while.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                return self._open()
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                    raise
            time.sleep(random.uniform(0.005, 0.05))  # the database thread, not the loop

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")  # an acknowledged commit survives power loss
            conn.execute("PRAGMA secure_delete = ON")  # a forgotten memory leaves no bytes
            conn.execute("BEGIN IMMEDIATE")  # schema created under the write lock
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO fa_schema (id, version) VALUES (1, ?) ON CONFLICT DO NOTHING",
                (DATABASE_FORMAT_VERSION,),
            )
            (version,) = conn.execute("SELECT version FROM fa_schema WHERE id = 1").fetchone()
            if version < DATABASE_FORMAT_VERSION:
                _migrate(conn, version)
                version = DATABASE_FORMAT_VERSION
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.close()
            raise
        if version > DATABASE_FORMAT_VERSION:
            conn.close()
            raise SchemaTooNewError(
                f"SQLite database {str(self.path)!r} has schema version {version}, newer than "
                f"this framework-agents understands ({DATABASE_FORMAT_VERSION}); upgrade to use it"
            )
        self._conn = conn
        return conn

    def _call(self, fn: Callable[[sqlite3.Connection], T], write: bool) -> T:
        if self._closed:
            raise InvalidArgumentError(f"{self!r} is closed")
        try:
            conn = self._connect()
            if not write:
                return fn(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result
        except sqlite3.DatabaseError as exc:
            if self._conn is not None and self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise _io_error(self.path, exc, write=write) from exc

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        """Run ``fn(conn)`` in the database thread.

        When ``write``, inside a ``BEGIN IMMEDIATE`` transaction, committed when ``fn``
        returns and rolled back when it raises.

        A cancelled caller still waits for the thread, so a transaction is never left
        half-way and the connection is never used by two statements at once.
        """
        future: Future[T] = self._pool.submit(self._call, fn, write)
        cancelled = False
        while True:
            try:
                result = await asyncio.shield(asyncio.wrap_future(future))
            except asyncio.CancelledError:
                if not future.done():
                    cancelled = True
                    continue
                raise
            break
        if cancelled:
            raise asyncio.CancelledError()
        return result

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` inside one read transaction (a consistent snapshot)."""

        def snapshot(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")

        return await self.run(snapshot, write=False)

    async def transact(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one ``BEGIN IMMEDIATE`` transaction (the database thread)."""
        return await self.run(lambda conn: drive(conn, steps()))

    async def snapshot(self, steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one read transaction (the database thread)."""
        return await self.read(lambda conn: drive(conn, steps()))

    async def query(self, query: Query) -> Any:
        """The result of one read statement."""
        return await self.run(lambda conn: execute(conn, query), write=False)

    async def close(self) -> None:
        """Close the connection and stop the thread (idempotent)."""
        if self._closed:
            return

        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        if os.getpid() == self._pid:
            await asyncio.wrap_future(self._pool.submit(shut))
        self._closed = True
        self._pool.shutdown(wait=False)
