"""The on-disk form of a graph store: the asserted quads in one SQLite database (blocking).

SQLite (standard library) in WAL mode with ``synchronous=FULL``: every mutation is one
transaction that is on disk when it returns, and a crash or kill at any instant leaves the
database as of the last committed transaction (SQLite's journal rolls a torn write back on
the next open). Only asserted quads are stored; the closure is recomputed on open.

Failures are AgentErrors: a path that cannot hold a store (a file, or a file on the way)
is ``INVALID_ARGUMENT``; a database that is not a graph store, or is damaged, is
``GRAPH_STORE_CORRUPT``; a store that cannot be opened or written for lack of permission,
space or a lock is ``GRAPH_STORE_IO``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import AgentError, GraphStoreCorruptError, GraphStoreIOError, InvalidArgumentError

__all__ = ["DB_NAME", "FORMAT", "STORE_VERSION", "Disk", "Row"]

DB_NAME = "graph.sqlite3"
FORMAT = "framework-agents.graph"
#: Version of the database layout; newer databases are refused.
STORE_VERSION = 1

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
            conn.execute("INSERT INTO meta VALUES ('version', ?)", (str(STORE_VERSION),))
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


def _failure(file: Path, exc: sqlite3.Error, *, opening: bool) -> AgentError:
    """The AgentError for a SQLite failure on ``file`` (on open, unknown means corrupt)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if file.is_dir():
        return InvalidArgumentError(f"graph store database {file} is a directory, not a file")
    if code in _IO_CODES or (not opening and code not in _CORRUPT_CODES):
        doing = "open" if opening else "write to"
        return GraphStoreIOError(f"cannot {doing} graph store {file}: {exc}")
    return GraphStoreCorruptError(f"{file} is unreadable: {exc}")


def encode_object(data: str | dict[str, str]) -> str:
    """The canonical JSON text of a term's JSON form (unique per term)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class Disk:
    """One open database; the caller serialises every call (the store's lock)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file = directory / DB_NAME
        self._conn: sqlite3.Connection | None = None

    def open(self) -> list[Row]:
        """Open (creating if missing) and return every stored quad."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise InvalidArgumentError(
                f"graph store path {self.directory} is not a directory: {exc.strerror}"
            ) from exc
        except OSError as exc:
            raise GraphStoreIOError(
                f"cannot create graph store directory {self.directory}: {exc.strerror}"
            ) from exc
        if self.file.exists() and not self.file.is_file():
            raise InvalidArgumentError(f"graph store database {self.file} is not a file")
        try:
            conn = sqlite3.connect(
                self.file, timeout=_BUSY_SECONDS, check_same_thread=False, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise _failure(self.file, exc, opening=True) from exc
        try:
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
            if int(meta["version"]) > STORE_VERSION:
                raise GraphStoreCorruptError(
                    f"{self.file} has layout version {meta['version']}, newer than "
                    f"{STORE_VERSION}; upgrade framework-agents to read it"
                )
            _wal(conn)  # already so for a store made here
            rows: list[Row] = conn.execute("SELECT s, p, o, g FROM quads").fetchall()
        except sqlite3.Error as exc:
            conn.close()
            raise _failure(self.file, exc, opening=True) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return rows

    def _write(self, sql: str, rows: Iterable[Row], *, wipe: bool = False) -> None:
        conn = self._conn
        assert conn is not None, "graph store database is not open"
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if wipe:
                    conn.execute("DELETE FROM quads")
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _failure(self.file, exc, opening=False) from exc

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
        """Close the database (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
