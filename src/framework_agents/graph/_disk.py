"""The on-disk form of a graph store: the asserted quads in one SQLite database (blocking).

SQLite (standard library) in WAL mode with ``synchronous=FULL``: every mutation is one
transaction that is on disk when it returns, and a crash or kill at any instant leaves the
database as of the last committed transaction (SQLite's journal rolls a torn write back on
the next open). Only asserted quads are stored; the closure is recomputed on open.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from ..errors import GraphStoreCorruptError

__all__ = ["DB_NAME", "FORMAT", "STORE_VERSION", "Disk", "Row"]

DB_NAME = "graph.sqlite3"
FORMAT = "framework-agents.graph"
#: Version of the database layout; newer databases are refused.
STORE_VERSION = 1

#: One stored quad: subject, predicate, object as JSON text, graph ("" = default graph).
Row = tuple[str, str, str, str]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS quads (
    s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, g TEXT NOT NULL,
    PRIMARY KEY (s, p, o, g)
) WITHOUT ROWID;
"""


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
        self.directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.file, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not tables.fetchall():  # a new file, or one a crash left before its schema
                conn.executescript(
                    f"BEGIN IMMEDIATE; {_SCHEMA} INSERT INTO meta VALUES ('format', '{FORMAT}');"
                    f" INSERT INTO meta VALUES ('version', '{STORE_VERSION}'); COMMIT;"
                )
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format") != FORMAT or not meta.get("version", "").isdigit():
                raise GraphStoreCorruptError(f"{self.file} is not a framework-agents graph store")
            if int(meta["version"]) > STORE_VERSION:
                raise GraphStoreCorruptError(
                    f"{self.file} has layout version {meta['version']}, newer than "
                    f"{STORE_VERSION}; upgrade framework-agents to read it"
                )
            rows: list[Row] = conn.execute("SELECT s, p, o, g FROM quads").fetchall()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise GraphStoreCorruptError(f"{self.file} is unreadable: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return rows

    def _write(self, sql: str, rows: Iterable[Row], *, wipe: bool = False) -> None:
        conn = self._conn
        assert conn is not None, "graph store database is not open"
        conn.execute("BEGIN IMMEDIATE")
        try:
            if wipe:
                conn.execute("DELETE FROM quads")
            conn.executemany(sql, rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

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
