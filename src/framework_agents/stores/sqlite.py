"""SQLite stores: one database file shared by the processes of one machine.

:class:`SqliteStorage`, :class:`SqliteCheckpointer` and :class:`SqliteMemory` keep their
data in the tables drawn in ``stores._sqlite_db``. Use SQLite when every process runs on
one machine (a local volume: SQLite's locking is unreliable over network file systems);
use PostgreSQL or Redis when several machines share a thread.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
from collections.abc import Collection, Sequence
from datetime import timedelta

from .._retention import AutoPrune, check_older_than, check_ttl
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import CheckpointConflictError, StorageKeyInvalidError
from ..memory._window import (
    bounded_view,
    check_max_messages,
    check_messages,
    window_start,
)
from ..messages import Message
from ..sessions._base import CompareAndPut, check_expected_tag, check_tag, digest
from ..sessions._keys import validate_key, validate_prefix
from ..sessions.memory_storage import as_bytes
from ._checkpointer import LeasedCheckpointer
from ._codec import (
    ClosableStore,
    MergingMemory,
    appended_by_others,
    decode_messages,
    log_tag,
    memory_rows,
    wall_clock,
)
from ._sqlite_db import MESSAGE_ID, SqliteDb

__all__ = ["SqliteCheckpointer", "SqliteMemory", "SqliteStorage"]

#: One past the largest character a key may hold (keys are ASCII letters, digits, ``._-/``).
_KEY_END = "\x7f"


_Closable = ClosableStore[SqliteDb]
#: What ``read_logged`` returns: the value, its log records, its tag.
_Logged = tuple[bytes | None, builtins.list[bytes], str | None]


def _db(path: str | os.PathLike[str] | SqliteDb) -> SqliteDb:
    return path if isinstance(path, SqliteDb) else SqliteDb(path)


# -- storage ------------------------------------------------------------------------------


class SqliteStorage(_Closable, AutoPrune, CompareAndPut):
    """The :class:`~framework_agents.sessions.Storage` contract in table ``fa_kv``.

    It keeps logs too (:class:`~framework_agents.sessions._base.LoggedStorage`): a
    record appended to a value is one row of ``fa_kv_log``, so a session's save writes
    what is new, not its history again.
    """

    def __init__(
        self, path: str | os.PathLike[str] | SqliteDb, *, ttl: float | None = None
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        self._db = _db(path)
        self.ttl = check_ttl(ttl)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"SqliteStorage({str(self._db.path)!r})"

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

        def write(conn: sqlite3.Connection) -> None:
            now = wall_clock()
            if conditional:
                check_tag(key, _tag(conn, key)[0], expected)
            updated = conn.execute(
                "UPDATE fa_kv SET data = ?, digest = ?, updated_at = ? WHERE key = ?",
                (value, value_digest, now, key),
            ).rowcount
            if updated:
                conn.execute("DELETE FROM fa_kv_log WHERE key = ?", (key,))
                return
            if ancestors:
                marks = ",".join("?" * len(ancestors))
                found = conn.execute(
                    f"SELECT key FROM fa_kv WHERE key IN ({marks}) LIMIT 1", ancestors
                ).fetchone()
                if found is not None:
                    raise StorageKeyInvalidError(
                        f"cannot store {key!r}: {found[0]!r} already holds a value"
                    )
            if conn.execute(
                "SELECT 1 FROM fa_kv WHERE key > ? AND key < ? LIMIT 1", (key + "/", key + "0")
            ).fetchone():
                raise StorageKeyInvalidError(
                    f"cannot store {key!r}: other keys are stored under it"
                )
            conn.execute(
                "INSERT INTO fa_kv (key, data, digest, updated_at) VALUES (?, ?, ?, ?)",
                (key, value, value_digest, now),
            )

        await self._db.run(write)
        await self._after_write()

    async def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``."""
        validate_key(key)
        row = await self._db.run(
            lambda c: c.execute("SELECT data FROM fa_kv WHERE key = ?", (key,)).fetchone(),
            write=False,
        )
        return None if row is None else bytes(row[0])

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
            tag, value_digest = _tag(conn, key)
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

    async def delete(self, key: str) -> None:
        """Remove ``key`` and its log (no-op when missing)."""
        validate_key(key)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM fa_kv_log WHERE key = ?", (key,))
            conn.execute("DELETE FROM fa_kv WHERE key = ?", (key,))

        await self._db.run(write)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Stored keys starting with ``prefix``, sorted."""
        validate_prefix(prefix)
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT key FROM fa_kv WHERE key >= ? AND key < ? ORDER BY key",
                (prefix, prefix + _KEY_END),
            ).fetchall(),
            write=False,
        )
        return [r[0] for r in rows]

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


def _tag(conn: sqlite3.Connection, key: str) -> tuple[str | None, str]:
    """The tag of ``key`` as stored (``None``: no value), and its value's digest."""
    row = conn.execute(
        "SELECT digest, CASE WHEN digest IS NULL THEN data END FROM fa_kv WHERE key = ?", (key,)
    ).fetchone()
    if row is None:
        return None, ""
    value_digest: str = row[0] or digest(bytes(row[1]))  # NULL: stored by schema version 1
    (last,) = conn.execute("SELECT max(seq) FROM fa_kv_log WHERE key = ?", (key,)).fetchone()
    return log_tag(value_digest, last), value_digest


# -- checkpointer -----------------------------------------------------------------------


class SqliteCheckpointer(_Closable, LeasedCheckpointer):
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

    def __init__(
        self,
        path: str | os.PathLike[str] | SqliteDb,
        *,
        lock_timeout: float | None = 10.0,
        lease: float = 30.0,
        ttl: float | None = None,
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        self._db = _db(path)
        self._set_up(
            lock_timeout=lock_timeout,
            lease=lease,
            ttl=ttl,
            try_acquire=self._try_acquire,
            renew=self._renew,
            release=self._release,
        )

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"SqliteCheckpointer({str(self._db.path)!r})"

    # -- reading ------------------------------------------------------------------------

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint, or ``None`` (CHECKPOINT_CORRUPT when unreadable)."""
        check_thread_id(thread_id)

        def read(conn: sqlite3.Connection) -> tuple[int, int, bytes, list[bytes]] | None:
            head = conn.execute(
                "SELECT version, length, head FROM fa_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if head is None:
                return None
            bodies = conn.execute(
                "SELECT body FROM fa_thread_messages WHERE thread_id = ? ORDER BY seq",
                (thread_id,),
            ).fetchall()
            return head[0], head[1], bytes(head[2]), [bytes(b[0]) for b in bodies]

        found = await self._db.read(read)
        if found is None:
            self._forget(thread_id)
            return None
        version, length, head, bodies = found
        source = f"checkpoint of thread {thread_id!r} in {str(self._db.path)!r}"
        return self._loaded(thread_id, version, length, head, bodies, source=source)

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        rows = await self._db.run(
            lambda c: c.execute("SELECT thread_id FROM fa_threads ORDER BY thread_id").fetchall(),
            write=False,
        )
        return [r[0] for r in rows]

    # -- writing ------------------------------------------------------------------------

    def _check_lock(self, conn: sqlite3.Connection, thread_id: str, now: float) -> None:
        row = conn.execute(
            "SELECT owner, expires_at FROM fa_locks WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        owner = self._owner(thread_id)
        if owner is not None:
            if row is None or row[0] != owner or row[1] <= now:
                raise CheckpointConflictError(
                    f"thread {thread_id!r}: this run lost its lock (lease expired or taken "
                    "by another run); nothing was written"
                )
        elif row is not None and row[0] is not None and row[1] > now:
            raise CheckpointConflictError(
                f"thread {thread_id!r} is held by another run; nothing was written"
            )

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Store ``checkpoint``, writing only the messages that are not stored yet.

        CHECKPOINT_CONFLICT (nothing written) when the thread changed since this instance
        last read or wrote it, or when another run holds it or took it from this one.
        """
        plan = self._plan(checkpoint)
        thread_id, keep = plan.thread_id, plan.keep

        def write(conn: sqlite3.Connection) -> int:
            now = wall_clock()
            self._check_lock(conn, thread_id, now)
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

        try:
            version = await self._db.run(write)
        except CheckpointConflictError:
            self._forget(thread_id)
            raise
        self._saved(plan, version)
        await self._after_write()

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (no error when there is none)."""
        check_thread_id(thread_id)

        def write(conn: sqlite3.Connection) -> None:
            self._check_lock(conn, thread_id, wall_clock())
            conn.execute("DELETE FROM fa_thread_messages WHERE thread_id = ?", (thread_id,))
            conn.execute("DELETE FROM fa_threads WHERE thread_id = ?", (thread_id,))

        self._forget(thread_id)
        await self._db.run(write)

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


class SqliteMemory(MergingMemory, _Closable):
    """A windowed history under ``key``; ``save()`` appends and trims in one transaction."""

    def __init__(
        self, path: str | os.PathLike[str] | SqliteDb, key: str, max_messages: int = 50
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        validate_key(key)
        self._db = _db(path)
        self.key = key
        self.max_messages: int = check_max_messages(max_messages)
        # Ids of the history this instance last loaded or wrote (the base of a merge).
        self._seen: set[str] | None = None

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return (
            f"SqliteMemory({str(self._db.path)!r}, {self.key!r}, max_messages={self.max_messages})"
        )

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (MEMORY_CORRUPT)."""

        def read(conn: sqlite3.Connection) -> tuple[list[bytes], int]:
            rows = conn.execute(
                "SELECT body FROM fa_memory_messages WHERE key = ? ORDER BY seq", (self.key,)
            ).fetchall()
            return [bytes(r[0]) for r in rows], self._marker_of(conn)

        bodies, marker = await self._db.read(read)
        source = f"memory {self.key!r} in {str(self._db.path)!r}"
        stored = decode_messages(bodies, source=source)
        self._seen = {m.id for m in stored}
        self._observe(marker)
        return bounded_view(stored, self.max_messages)

    def _marker_of(self, conn: sqlite3.Connection) -> int:
        """The key's marker: ``next_seq``, which every write moves forward (0: none yet)."""
        return self._head(conn)[0]

    def _head(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """``(next_seq, first_seq)`` of the key: its rows lie in ``[first_seq, next_seq)``."""
        row = conn.execute(
            "SELECT next_seq, first_seq FROM fa_memories WHERE key = ?", (self.key,)
        ).fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def _append(
        self, conn: sqlite3.Connection, rows: Sequence[tuple[int, bytes]], *, fresh: bool
    ) -> tuple[int, int]:
        """Append ``rows`` (after deleting all when ``fresh``), then trim to the window.

        Returns the marker after and how many stored rows the trim removed. A write that
        changes anything moves the marker (``next_seq``) forward, a fresh write of no
        rows (a clear) too; appending nothing leaves it.
        """
        key, limit = self.key, self.max_messages
        start, head = self._head(conn)
        if not rows and not fresh:
            return start, 0  # nothing changes (not even the window: that is a write's)
        if fresh:
            conn.execute("DELETE FROM fa_memory_messages WHERE key = ?", (key,))
            head = start
        conn.executemany(
            "INSERT INTO fa_memory_messages (key, seq, shape, body) VALUES (?, ?, ?, ?)",
            [(key, start + i, shape, body) for i, (shape, body) in enumerate(rows)],
        )
        end = start + (len(rows) or int(fresh))
        first, trimmed = (head if rows else end), 0
        # A key's rows lie in [first_seq, next_seq): when that many fit the window,
        # nothing is cut and the tail is not read (an append costs what it adds).
        tail = []
        if start + len(rows) - head > limit:
            tail = conn.execute(
                "SELECT seq, shape FROM fa_memory_messages WHERE key = ? ORDER BY seq DESC LIMIT ?",
                (key, limit + 1),
            ).fetchall()[::-1]
            first = tail[0][0] if tail else end
        if len(tail) > limit:
            cut = window_start([s for _, s in tail], limit)
            first = tail[cut][0] if cut < len(tail) else end
            trimmed = conn.execute(
                "DELETE FROM fa_memory_messages WHERE key = ? AND seq < ?", (key, first)
            ).rowcount
        conn.execute(
            "INSERT INTO fa_memories (key, first_seq, next_seq, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET first_seq = excluded.first_seq, "
            "next_seq = excluded.next_seq, updated_at = excluded.updated_at",
            (key, first, end, wall_clock()),
        )
        return end, trimmed

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

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages``, then keep the newest ``max_messages`` (one transaction).

        Idempotent by message id: a message whose id is stored already (or given twice) is
        not appended again, so a save retried after a dropped connection stores nothing
        twice.
        """
        given = check_messages(messages)
        rows, ids = memory_rows(given), [m.id for m in given]

        def append(conn: sqlite3.Connection) -> tuple[int, bool]:
            fresh = self._not_stored(conn, ids)
            marker, _ = self._append(conn, [rows[i] for i in fresh], fresh=False)
            return marker, bool(fresh)

        marker, wrote = await self._db.run(append)
        self._saved(given)
        if wrote:
            self._wrote(marker)
        else:
            self._observe(marker)

    async def _read_marker(self) -> int:
        return await self._db.run(self._marker_of, write=False)

    async def _append_if(
        self, given: list[Message], rows: list[tuple[int, bytes]], expected: int
    ) -> tuple[int, int] | None:
        ids = [m.id for m in given]

        def append(conn: sqlite3.Connection) -> tuple[int, int] | None:
            start, head = self._head(conn)
            if start != expected or start - head > self.max_messages:
                # Written since; or the key holds more than this window (another
                # instance's wider one): the caller's view is not the stored rows.
                return None
            if len(self._not_stored(conn, ids)) != len(ids):
                return None
            return self._append(conn, rows, fresh=False)

        return await self._db.run(append)

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """:meth:`MergingMemory.commit`. One transaction, so no save slips in between."""
        kept, ids, merge_base = self._commit_parts(messages, base)
        rows = memory_rows(kept)

        def merge(conn: sqlite3.Connection) -> int:
            others: list[tuple[int, bytes]] = []
            if merge_base is not None:
                stored = conn.execute(
                    f"SELECT shape, body, {MESSAGE_ID} FROM fa_memory_messages "
                    "WHERE key = ? ORDER BY seq",
                    (self.key,),
                ).fetchall()
                chosen = appended_by_others([r[2] for r in stored], merge_base, ids)
                others = [(stored[i][0], bytes(stored[i][1])) for i in chosen]
            return self._append(conn, rows + others, fresh=True)[0]

        self._wrote(await self._db.run(merge))
        self._seen = ids

    async def clear(self) -> None:
        """Forget the stored history (the marker moves on)."""
        self._wrote(await self._db.run(lambda c: self._append(c, [], fresh=True)[0]))
        self._seen = set()
