"""The on-disk form of a graph store: the asserted quads in one SQLite database (blocking).

SQLite (standard library) in WAL mode with ``synchronous=FULL``: every mutation is one
transaction that is on disk when it returns, and a crash or kill at any instant leaves the
database as of the last committed transaction (SQLite's journal rolls a torn write back on
the next open). Only asserted quads are stored; every transaction also bumps the
``generation`` in ``meta``, which tells whether a closure snapshot (:mod:`._snapshot`)
still matches the database. A :class:`~._lock.StoreLock` keeps the store to one opener
from open to close. The directory is created 0700 and the database 0600 (SQLite gives
its ``-wal`` and ``-shm`` files the database's mode).

Failures are AgentErrors: a path that cannot hold a store (a file, or a file on the way)
is ``INVALID_ARGUMENT``; a database that is not a graph store, or is damaged, is
``GRAPH_STORE_CORRUPT``; a store that cannot be opened or written for lack of permission,
space or a lock is ``GRAPH_STORE_IO``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import AgentError, GraphStoreCorruptError, GraphStoreIOError, InvalidArgumentError
from ._lock import StoreLock, graph_io_error

__all__ = ["DB_NAME", "FORMAT", "GRAPH_DB_FORMAT_VERSION", "Disk", "Row"]

DB_NAME = "graph.sqlite3"
FORMAT = "framework-agents.graph"
#: Version of the database layout; newer databases are refused, version 1 is upgraded.
#: 2: ``meta`` holds the ``generation``, bumped by every write transaction.
GRAPH_DB_FORMAT_VERSION = 2

#: One stored quad: subject, predicate, object as JSON text, graph ("" = default graph).
Row = tuple[str, str, str, str]

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE quads (s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, g TEXT NOT NULL,"
    " PRIMARY KEY (s, p, o, g)) WITHOUT ROWID",
)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL mode, waiting out other openers as a busy timeout would.

    SQLite answers a journal-mode change with SQLITE_BUSY at once, without its busy
    handler, while another connection has the file open mid-statement (processes
    creating the same store at the same moment), so retry for up to _BUSY_SECONDS.
    """
    deadline, delay = time.monotonic() + _BUSY_SECONDS, 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _create(conn: sqlite3.Connection) -> None:
    """Create the schema once: processes racing to create a store all end up opening it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _tables(conn):  # checked again under the write lock: another may have won
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
            conn.execute("INSERT INTO meta VALUES ('version', ?)", (str(GRAPH_DB_FORMAT_VERSION),))
            conn.execute("INSERT INTO meta VALUES ('generation', '0')")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


#: How long a connection waits for another's lock (SQLite's default busy timeout).
_BUSY_SECONDS = 5.0

#: SQLite result codes that say "cannot get at the file now", not "the file is bad".
_IO_CODES = frozenset(
    {
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_AUTH,
    }
)
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


#: The ``errno`` a SQLite result code stands for (SQLite does not pass the OS's on).
_ERRNO = {
    sqlite3.SQLITE_FULL: errno.ENOSPC,
    sqlite3.SQLITE_IOERR: errno.EIO,
    sqlite3.SQLITE_READONLY: errno.EROFS,
    sqlite3.SQLITE_PERM: errno.EACCES,
    sqlite3.SQLITE_AUTH: errno.EACCES,
    sqlite3.SQLITE_BUSY: errno.EBUSY,
    sqlite3.SQLITE_LOCKED: errno.EBUSY,
    sqlite3.SQLITE_NOMEM: errno.ENOMEM,
}


def _failure(file: Path, exc: sqlite3.Error, *, opening: bool) -> AgentError:
    """The AgentError for a SQLite failure on ``file`` (on open, unknown means corrupt).

    An I/O failure is ``GRAPH_STORE_IO`` with the ``errno`` its SQLite code stands for
    (``ENOSPC`` for a full disk); SQLite rolls a failed transaction back, so nothing of
    it landed.
    """
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(file).st_mode):
            return InvalidArgumentError(f"graph store database {file} is a directory, not a file")
    if code in _IO_CODES or (not opening and code not in _CORRUPT_CODES):
        doing = "open" if opening else "write to"
        return GraphStoreIOError(
            f"cannot {doing} graph store {file}: {exc}; nothing was written",
            errno=_ERRNO.get(code),
            may_have_landed=False,
        )
    return GraphStoreCorruptError(f"{file} is unreadable: {exc}; it was left untouched")


def _upgrade(conn: sqlite3.Connection) -> None:
    """Layout 1 -> 2: add the generation (a closure snapshot cannot exist for layout 1)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('generation', '0')")
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'version'", (str(GRAPH_DB_FORMAT_VERSION),)
        )
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def encode_object(data: str | dict[str, str]) -> str:
    """The canonical JSON text of a term's JSON form (unique per term)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class Disk:
    """One open database; the caller serialises every call (the store's lock)."""

    def __init__(self, directory: Path, *, lock_timeout: float = 0.0) -> None:
        """A database in ``directory`` (not opened yet); see :meth:`open`."""
        self.directory = directory
        self.file = directory / DB_NAME
        self.generation = 0
        self._lock_timeout = lock_timeout
        self._lock = StoreLock(directory)
        self._conn: sqlite3.Connection | None = None

    def open(self) -> None:
        """Lock the store and open its database, creating both if missing."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise InvalidArgumentError(
                f"graph store path {self.directory} is not a directory: {exc.strerror}"
            ) from exc
        except OSError as exc:
            raise graph_io_error(
                exc, f"cannot create graph store directory {self.directory}"
            ) from exc
        self._check_file()
        self._lock.acquire(self._lock_timeout)
        try:
            self._conn = self._connect()
        except BaseException:
            self._lock.release()
            raise

    def _check_file(self) -> None:
        """Refuse what is not a regular file (or nothing) where the database belongs."""
        try:
            mode = os.lstat(self.file).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise graph_io_error(exc, f"cannot look at graph store {self.file}") from exc
        if stat.S_ISDIR(mode):
            raise InvalidArgumentError(f"graph store database {self.file} is not a file")
        if not stat.S_ISREG(mode):
            raise GraphStoreCorruptError(
                f"graph store database {self.file} is not a regular file (a symlink, FIFO "
                "or device); it was left untouched"
            )

    def _connect(self) -> sqlite3.Connection:
        try:
            # Owner-only from the first byte (SQLite gives -wal and -shm the same mode).
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            os.close(os.open(self.file, flags, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            raise graph_io_error(exc, f"cannot create graph store {self.file}") from exc
        try:
            conn = sqlite3.connect(
                self.file, timeout=_BUSY_SECONDS, check_same_thread=False, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise _failure(self.file, exc, opening=True) from exc
        try:
            self.generation = self._check(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise _failure(self.file, exc, opening=True) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _check(self, conn: sqlite3.Connection) -> int:
        """Create or validate (and upgrade) the schema; the database's generation."""
        conn.execute("PRAGMA synchronous=FULL")  # this connection only: writes nothing
        if not _tables(conn):  # a new file, or one a crash left before its schema
            _wal(conn)
            _create(conn)
        # Look before switching to WAL (which rewrites the file): never alter a
        # database that is not a graph store.
        tables = _tables(conn)
        if not {"meta", "quads"} <= tables:
            raise GraphStoreCorruptError(
                f"{self.file} is not a framework-agents graph store "
                f"(it holds the tables {sorted(tables)})"
            )
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT or not str(meta.get("version", "")).isdigit():
            raise GraphStoreCorruptError(f"{self.file} is not a framework-agents graph store")
        if int(meta["version"]) > GRAPH_DB_FORMAT_VERSION:
            raise GraphStoreCorruptError(
                f"{self.file} has layout version {meta['version']}, newer than "
                f"{GRAPH_DB_FORMAT_VERSION}; upgrade framework-agents to read it"
            )
        _wal(conn)  # already so for a store made here
        if int(meta["version"]) < GRAPH_DB_FORMAT_VERSION:
            _upgrade(conn)
            return 0
        generation = str(meta.get("generation", ""))
        if not generation.isdigit():
            raise GraphStoreCorruptError(f"{self.file} has no valid generation in its meta table")
        return int(generation)

    def rows(self) -> list[Row]:
        """Every stored quad."""
        return self._read("SELECT s, p, o, g FROM quads")

    def count(self) -> int:
        """How many quads are stored."""
        [(count,)] = self._read("SELECT count(*) FROM quads")
        return int(count)

    def _read(self, sql: str) -> list[Any]:
        conn = self._conn
        assert conn is not None, "graph store database is not open"
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.Error as exc:
            raise _failure(self.file, exc, opening=True) from exc

    def _write(self, sql: str, rows: Iterable[Row], *, wipe: bool = False) -> None:
        conn = self._conn
        assert conn is not None, "graph store database is not open"
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if wipe:
                    conn.execute("DELETE FROM quads")
                conn.executemany(sql, rows)
                bump = str(self.generation + 1)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'generation'", (bump,))
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _failure(self.file, exc, opening=False) from exc
        self.generation += 1

    def insert(self, rows: Iterable[Row]) -> None:
        """Durably add ``rows`` in one transaction."""
        self._write("INSERT OR IGNORE INTO quads VALUES (?, ?, ?, ?)", rows)

    def delete(self, rows: Iterable[Row]) -> None:
        """Durably delete ``rows`` in one transaction."""
        self._write("DELETE FROM quads WHERE s = ? AND p = ? AND o = ? AND g = ?", rows)

    def replace(self, rows: Iterable[Row]) -> None:
        """Durably replace every stored quad by ``rows`` in one transaction."""
        self._write("INSERT OR IGNORE INTO quads VALUES (?, ?, ?, ?)", rows, wipe=True)

    def close(self) -> None:
        """Close the database and let the lock go (idempotent)."""
        try:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        finally:
            self._lock.release()
