"""SQLite stores: one database file shared by the processes of one machine.

:class:`SqliteStorage`, :class:`SqliteCheckpointer` and :class:`SqliteMemory` keep their
data in the tables drawn in ``stores._sqlite_db``. Use SQLite when every process runs on
one machine (a local volume: SQLite's locking is unreliable over network file systems);
use PostgreSQL or Redis when several machines share a thread. What they do as the
PostgreSQL stores do is written once in ``stores._sql``; this module keeps SQLite's own
SQL (the thread save, the memory append, the lock, the storage logs).
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from types import EllipsisType
from typing import Unpack

from .._crypto import Cipher
from .._retention import check_older_than
from ..errors import CheckpointConflictError
from ..memory._base import window_start
from ..messages import Message
from ..sessions._base import check_expected_tag, check_tag, digest, validate_key
from ..sessions.memory_storage import as_bytes
from ._checkpointer import LeaseSettings, SavePlan
from ._codec import log_tag, wall_clock
from ._sql import Query, SqlCheckpointer, SqlMemory, SqlStorage, Steps
from ._sql_bank import SqlBankBackend, bank_sql
from ._sqlite_db import MESSAGE_ID, SqliteDb, drive

__all__ = ["SqliteBankBackend", "SqliteCheckpointer", "SqliteMemory", "SqliteStorage"]

#: What ``read_logged`` returns: the value, its log records, its tag.
_Logged = tuple[bytes | None, builtins.list[bytes], str | None]


def _db(path: str | os.PathLike[str] | SqliteDb) -> SqliteDb:
    return path if isinstance(path, SqliteDb) else SqliteDb(path)


# -- storage ------------------------------------------------------------------------------


class SqliteStorage(SqlStorage):
    """The :class:`~framework_agents.sessions.Storage` contract in table ``fa_kv``.

    It keeps logs too (:class:`~framework_agents.sessions._base.LoggedStorage`): a
    record appended to a value is one row of ``fa_kv_log``, so a session's save writes
    what is new, not its history again.
    """

    _db: SqliteDb

    def __init__(
        self, path: str | os.PathLike[str] | SqliteDb, *, ttl: float | None = None
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        super().__init__(_db(path), ttl=ttl)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"SqliteStorage({str(self._db.path)!r})"

    def _claim(
        self, key: str, segments: Sequence[str], expected: str | EllipsisType | None
    ) -> Steps[None]:
        # BEGIN IMMEDIATE holds the database's write lock: nothing more to lock.
        if expected is not ...:
            tag, _ = yield from _tag(key)
            check_tag(key, tag, expected)

    def _ancestor_query(self, ancestors: builtins.list[str]) -> Query:
        marks = ",".join("?" * len(ancestors))
        return Query(f"SELECT key FROM fa_kv WHERE key IN ({marks}) LIMIT 1", ancestors, "one")

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The value of ``key``, the records appended since it was stored, and its tag.

        A value whose stored digest is missing or wrong (written by schema version 1) is
        given its digest, and any log beside it dropped, before it is returned.
        """
        validate_key(key)

        def read(conn: sqlite3.Connection) -> _Logged:
            row = conn.execute("SELECT data, digest FROM fa_kv WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None, [], None
            value = bytes(row[0])
            if row[1] != digest(value):
                return value, [], None  # repaired below
            rows = conn.execute(
                "SELECT seq, record FROM fa_kv_log WHERE key = ? ORDER BY seq", (key,)
            ).fetchall()
            tag = log_tag(row[1], rows[-1][0] if rows else None)
            return value, [bytes(r[1]) for r in rows], tag

        def repair(conn: sqlite3.Connection) -> _Logged:
            row = conn.execute("SELECT data, digest FROM fa_kv WHERE key = ?", (key,)).fetchone()
            actual = None if row is None else digest(bytes(row[0]))
            if row is not None and row[1] != actual:
                conn.execute("DELETE FROM fa_kv_log WHERE key = ?", (key,))
                conn.execute("UPDATE fa_kv SET digest = ? WHERE key = ?", (actual, key))
            return read(conn)

        value, records, tag = await self._db.read(read)
        if value is not None and tag is None:
            value, records, tag = await self._db.run(repair)
        return value, records, tag

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Append ``record`` to the log of ``key`` if its tag is still ``expected``.

        One row, one transaction; CHECKPOINT_CONFLICT (nothing written) when another
        writer stored or appended since. Returns the new tag.
        """
        validate_key(key)
        data = as_bytes(record)
        check_expected_tag(expected, optional=False)

        def write(conn: sqlite3.Connection) -> str:
            tag, value_digest = drive(conn, _tag(key))
            check_tag(key, tag, expected)
            seq = conn.execute(
                "INSERT INTO fa_kv_log (key, record) VALUES (?, ?)", (key, data)
            ).lastrowid
            conn.execute(
                "UPDATE fa_kv SET digest = ?, updated_at = ? WHERE key = ?",
                (value_digest, wall_clock(), key),
            )
            return log_tag(value_digest, seq)

        tag: str = await self._db.run(write)
        await self._after_write()
        return tag

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove values (and logs) not written for ``older_than`` (default: ``ttl``).

        Returns how many values went.
        """
        cutoff = wall_clock() - check_older_than(older_than, self.ttl)

        def write(conn: sqlite3.Connection) -> int:
            conn.execute(
                "DELETE FROM fa_kv_log WHERE key IN (SELECT key FROM fa_kv WHERE updated_at < ?)",
                (cutoff,),
            )
            count: int = conn.execute("DELETE FROM fa_kv WHERE updated_at < ?", (cutoff,)).rowcount
            return count

        return await self._db.run(write)


def _tag(key: str) -> Steps[tuple[str | None, str]]:
    """The tag of ``key`` as stored (``None``: no value), and its value's digest."""
    row = yield Query(
        "SELECT digest, CASE WHEN digest IS NULL THEN data END FROM fa_kv WHERE key = ?",
        (key,),
        "one",
    )
    if row is None:
        return None, ""
    value_digest: str = row[0] or digest(bytes(row[1]))  # NULL: stored by schema version 1
    (last,) = yield Query("SELECT max(seq) FROM fa_kv_log WHERE key = ?", (key,), "one")
    return log_tag(value_digest, last), value_digest


# -- checkpointer -----------------------------------------------------------------------


class SqliteCheckpointer(SqlCheckpointer):
    """Thread checkpoints as a head row plus an append-only message log, with a leased lock.

    Layout: ``fa_threads`` holds one head row per thread (``version``, ``length``, the
    checkpoint's JSON without its messages, whether an approval is pending);
    ``fa_thread_messages`` holds the history, one row per message. A save writes only
    the messages past the part of the history that is already stored.

    Lock and fencing: ``fa_locks`` holds one row per thread (``owner``, ``expires_at``,
    ``fence``). :meth:`thread_lock` takes the row when it is free or its lease ran out,
    bumping ``fence``, and renews the lease while the run lasts. Every save is one
    ``BEGIN IMMEDIATE`` transaction that checks (1) the lock row: this instance's run
    still owns an unexpired lease, or nobody else does, and (2) the head's ``version``
    is the one this instance last read or wrote. Otherwise nothing is written and the
    save raises CHECKPOINT_CONFLICT.
    """

    _db: SqliteDb

    def __init__(
        self, path: str | os.PathLike[str] | SqliteDb, **settings: Unpack[LeaseSettings]
    ) -> None:
        """Threads in the SQLite file at ``path`` (or in a ``SqliteDb`` that others share).

        Nothing connects before the first operation. ``settings``: ``lock_timeout``,
        ``lease``, ``ttl`` and ``cipher`` (:class:`~._checkpointer.LeaseSettings`).
        """
        self._db = _db(path)
        self._set_up(**settings)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"SqliteCheckpointer({str(self._db.path)!r})"

    async def _store(self, plan: SavePlan) -> int:
        thread_id, keep = plan.thread_id, plan.keep

        def write(conn: sqlite3.Connection) -> int:
            drive(conn, self._check_lock(thread_id))
            now = wall_clock()
            row = conn.execute(
                "SELECT version, length FROM fa_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if plan.expected is not None and (row is None or row[0] != plan.expected):
                raise CheckpointConflictError(
                    f"thread {thread_id!r} changed since this instance read it (version "
                    f"{plan.expected}, now {None if row is None else row[0]}); nothing was "
                    "written"
                )
            version = 1 if row is None else row[0] + 1
            if row is not None and row[1] > keep:
                conn.execute(
                    "DELETE FROM fa_thread_messages WHERE thread_id = ? AND seq >= ?",
                    (thread_id, keep),
                )
            conn.executemany(
                "INSERT INTO fa_thread_messages (thread_id, seq, body) VALUES (?, ?, ?)",
                [(thread_id, keep + i, b) for i, b in enumerate(plan.bodies)],
            )
            conn.execute(
                "INSERT INTO fa_threads (thread_id, version, length, head, pending, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET "
                "version = excluded.version, length = excluded.length, head = excluded.head, "
                "pending = excluded.pending, updated_at = excluded.updated_at",
                (thread_id, version, plan.length, plan.head, int(plan.pending), now),
            )
            return version

        return await self._db.run(write)

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove threads not saved for ``older_than`` (default: ``ttl``); how many went.

        A thread that is held (an unexpired lock) or waits for an approval is kept.
        """
        age = check_older_than(older_than, self.ttl)

        def write(conn: sqlite3.Connection) -> int:
            now = wall_clock()
            doomed = [
                r[0]
                for r in conn.execute(
                    "SELECT t.thread_id FROM fa_threads t LEFT JOIN fa_locks l "
                    "ON l.thread_id = t.thread_id WHERE t.updated_at < ? AND t.pending = 0 "
                    "AND (l.owner IS NULL OR l.expires_at <= ?)",
                    (now - age, now),
                ).fetchall()
            ]
            for thread_id in doomed:
                conn.execute("DELETE FROM fa_thread_messages WHERE thread_id = ?", (thread_id,))
                conn.execute("DELETE FROM fa_threads WHERE thread_id = ?", (thread_id,))
            return len(doomed)

        return await self._db.run(write)

    # -- the thread lock ------------------------------------------------------------------

    async def _try_acquire(self, thread_id: str, owner: str) -> int | None:
        def write(conn: sqlite3.Connection) -> int | None:
            now = wall_clock()
            row = conn.execute(
                "SELECT fence, owner, expires_at FROM fa_locks WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if row is not None and row[1] is not None and row[2] > now:
                return None
            fence = 1 if row is None else row[0] + 1
            conn.execute(
                "INSERT INTO fa_locks (thread_id, fence, owner, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (thread_id) DO UPDATE SET fence = excluded.fence, "
                "owner = excluded.owner, expires_at = excluded.expires_at",
                (thread_id, fence, owner, now + self.lease),
            )
            return fence

        return await self._db.run(write)

    async def _renew(self, thread_id: str, owner: str) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            now = wall_clock()
            return bool(
                conn.execute(
                    "UPDATE fa_locks SET expires_at = ? WHERE thread_id = ? AND owner = ? "
                    "AND expires_at > ?",
                    (now + self.lease, thread_id, owner, now),
                ).rowcount
            )

        return await self._db.run(write)

    async def _release(self, thread_id: str, owner: str) -> None:
        await self._db.run(
            lambda c: c.execute(
                "UPDATE fa_locks SET owner = NULL, expires_at = 0 "
                "WHERE thread_id = ? AND owner = ?",
                (thread_id, owner),
            )
        )


# -- memory -------------------------------------------------------------------------------


class SqliteMemory(SqlMemory):
    """A windowed history under ``key``; ``save()`` appends and trims in one transaction."""

    _db: SqliteDb

    def __init__(
        self,
        path: str | os.PathLike[str] | SqliteDb,
        key: str,
        max_messages: int = 50,
        *,
        cipher: Cipher | None = None,
    ) -> None:
        """The history under ``key`` in the SQLite file at ``path`` (or a shared ``SqliteDb``).

        Nothing connects before the first operation. ``cipher``: seal every message at
        rest (``docs/security.md``).
        """
        super().__init__(key, max_messages, cipher)
        self._db = _db(path)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return (
            f"SqliteMemory({str(self._db.path)!r}, {self.key!r}, max_messages={self.max_messages})"
        )

    async def _history(self) -> tuple[list[bytes], int]:
        def read() -> Steps[tuple[list[bytes], int]]:
            rows = yield Query(
                "SELECT body FROM fa_memory_messages WHERE key = ? ORDER BY seq", (self.key,), "all"
            )
            marker, _ = yield from self._head()
            return [bytes(r[0]) for r in rows], marker

        return await self._db.snapshot(read)

    def _head(self) -> Steps[tuple[int, int]]:
        """``(next_seq, first_seq)`` of the key: its rows lie in ``[first_seq, next_seq)``.

        ``next_seq`` is the key's marker, which every write moves forward (0: none yet).
        """
        row = yield Query(
            "SELECT next_seq, first_seq FROM fa_memories WHERE key = ?", (self.key,), "one"
        )
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def _append(self, rows: Sequence[tuple[int, bytes]], *, fresh: bool) -> Steps[tuple[int, int]]:
        """Append ``rows`` (after deleting all when ``fresh``), then trim to the window.

        Returns the marker after and how many stored rows the trim removed. A write that
        changes anything moves the marker (``next_seq``) forward, a fresh write of no
        rows (a clear) too; appending nothing leaves it.
        """
        key, limit = self.key, self.max_messages
        start, head = yield from self._head()
        if not rows and not fresh:
            return start, 0  # nothing changes (not even the window: that is a write's)
        if fresh:
            yield Query("DELETE FROM fa_memory_messages WHERE key = ?", (key,))
            head = start
        yield Query(
            "INSERT INTO fa_memory_messages (key, seq, shape, body) VALUES (?, ?, ?, ?)",
            [(key, start + i, shape, body) for i, (shape, body) in enumerate(rows)],
            "many",
        )
        end = start + (len(rows) or int(fresh))
        first, trimmed = (head if rows else end), 0
        # A key's rows lie in [first_seq, next_seq): when that many fit the window,
        # nothing is cut and the tail is not read (an append costs what it adds).
        tail = []
        if start + len(rows) - head > limit:
            tail = (
                yield Query(
                    "SELECT seq, shape FROM fa_memory_messages WHERE key = ? "
                    "ORDER BY seq DESC LIMIT ?",
                    (key, limit + 1),
                    "all",
                )
            )[::-1]
            first = tail[0][0] if tail else end
        if len(tail) > limit:
            cut = window_start([s for _, s in tail], limit)
            first = tail[cut][0] if cut < len(tail) else end
            trimmed = yield Query(
                "DELETE FROM fa_memory_messages WHERE key = ? AND seq < ?", (key, first), "count"
            )
        yield Query(
            "INSERT INTO fa_memories (key, first_seq, next_seq, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET first_seq = excluded.first_seq, "
            "next_seq = excluded.next_seq, updated_at = excluded.updated_at",
            (key, first, end, wall_clock()),
        )
        return end, trimmed

    def _replace(self, rows: Sequence[tuple[int, bytes]]) -> Steps[int]:
        marker, _ = yield from self._append(rows, fresh=True)
        return marker

    def _not_stored(self, conn: sqlite3.Connection, ids: Sequence[str]) -> list[int]:
        """The positions in ``ids`` of those neither stored already nor earlier in it."""
        wanted = sorted(set(ids))
        stored: set[str] = set()
        for k in range(0, len(wanted), 500):  # an index lookup: the window is never scanned
            chunk = wanted[k : k + 500]
            stored.update(
                found
                for (found,) in conn.execute(
                    f"SELECT {MESSAGE_ID} FROM fa_memory_messages INDEXED BY "
                    f"fa_memory_message_ids WHERE key = ? AND "
                    f"{MESSAGE_ID} IN ({', '.join('?' * len(chunk))})",
                    (self.key, *chunk),
                )
            )
        fresh = []
        for i, found in enumerate(ids):
            if found not in stored:
                fresh.append(i)
                stored.add(found)
        return fresh

    async def _append_new(self, given: list[Message]) -> None:
        # One transaction: the ids not stored, then their rows appended and windowed.
        rows, ids = self._rows(given), [m.id for m in given]

        def append(conn: sqlite3.Connection) -> tuple[int, bool]:
            fresh = self._not_stored(conn, ids)
            marker, _ = drive(conn, self._append([rows[i] for i in fresh], fresh=False))
            return marker, bool(fresh)

        marker, wrote = await self._db.run(append)
        if wrote:
            self._wrote(marker)
        else:
            self._observe(marker)

    async def _append_if(
        self, given: list[Message], rows: list[tuple[int, bytes]], expected: int
    ) -> tuple[int, int] | None:
        ids = [m.id for m in given]

        def append(conn: sqlite3.Connection) -> tuple[int, int] | None:
            start, head = drive(conn, self._head())
            if start != expected or start - head > self.max_messages:
                # Written since; or the key holds more than this window (another
                # instance's wider one): the caller's view is not the stored rows.
                return None
            if len(self._not_stored(conn, ids)) != len(ids):
                return None
            return drive(conn, self._append(rows, fresh=False))

        return await self._db.run(append)


# -- memory bank ----------------------------------------------------------------------------

#: The bank's statements (``stores._sql_bank``): ``BEGIN IMMEDIATE`` is the bank's write
#: lock, so the log's last seq is its largest (an indexed read of the primary key).
SQLITE_BANK = bank_sql(
    claim="SELECT coalesce(max(seq), 0) FROM {s}.fa_bank_changes",
    advance="",
    in_ids="IN (SELECT value FROM json_each(:ids))",
    schema=None,
)


class SqliteBankBackend(SqlBankBackend):
    """A memory bank in the SQLite database (tables ``fa_bank_*``, see ``stores._sql_bank``).

    Forgetting leaves no byte of the text in any file: the connection runs with
    ``secure_delete`` (deleted cells, freed pages and overflow pages are zeroed), and after
    a delete the write-ahead log, which still holds the pages as they were, is
    checkpointed into the database and truncated (``wal_checkpoint(TRUNCATE)``).
    """

    _db: SqliteDb

    def __init__(self, db: str | os.PathLike[str] | SqliteDb) -> None:
        """The bank in the database at ``db``; nothing connects before the first operation."""
        super().__init__(_db(db), SQLITE_BANK, json.dumps)

    async def _forgotten(self) -> None:
        def checkpoint(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

        await self._db.run(checkpoint, write=False)
