"""Redis stores: sessions, threads and memories shared by every machine (extra ``redis``).

Only core commands and Lua scripts (the server needs no modules). Keys, under a prefix
(default ``fa:``)::

    <p>kv:data            hash   storage key -> bytes
    <p>kv:index           zset   storage keys (score 0: listed in lexical order)
    <p>kv:time            zset   storage key -> last write (server time), for prune
    <p>kv:digest          hash   storage key -> digest of its value
    <p>kv:last            hash   storage key -> sequence number of its last log record
    <p>kv:seq             int    INCR for every log record (numbers never reused)
    <p>kvlog:<key>        list   records appended to the value since it was stored
    <p>t:<thread_id>      hash   version, length, head (checkpoint JSON without messages),
                                 pending, updated
    <p>m:<thread_id>      list   the thread's messages, append-only
    <p>threads            zset   thread id -> last save
    <p>lock:<thread_id>   string owner token, SET NX PX <lease>, renewed while held
    <p>fence:<thread_id>  int    INCR on every acquisition: the fencing token
    <p>mem:<key>          list   "<shape digit><message JSON>", trimmed by the save script
    <p>bank:...                  the memory bank (records, key timelines, change log, jobs:
                                 see ``_bank_redis``)

A thread save is one Lua script: it checks that this run still owns the lock and that the
fencing token is still its own (or that nobody holds the thread), compares the version,
trims the list to the stored prefix and appends the new messages (CHECKPOINT_CONFLICT,
nothing written, otherwise). ``ttl=`` maps onto ``PEXPIRE`` (never for a pending thread).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any, Unpack

from .._crypto import Cipher
from .._retention import AutoPrune, check_older_than, check_ttl
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import (
    CheckpointConflictError,
    CheckpointCorruptError,
    InvalidArgumentError,
    MemoryCorruptError,
    StorageKeyInvalidError,
)
from ..messages import Message
from ..sessions._base import (
    CompareAndPut,
    check_expected_tag,
    digest,
    validate_key,
    validate_prefix,
)
from ..sessions.memory_storage import as_bytes
from . import _redis_lua as lua
from ._bank_redis import RedisBankBackend
from ._base import Store, db_store
from ._checkpointer import LeasedCheckpointer, LeaseSettings
from ._codec import (
    ClosableStore,
    MergingMemory,
    log_tag,
    redact,
)
from ._redis_db import RedisDb
from ._sealed import MEMORY_MESSAGE, reseal_body, reseal_head, reseal_thread

__all__ = ["RedisCheckpointer", "RedisDb", "RedisMemory", "RedisStorage", "redis_store"]

_Closable = ClosableStore[RedisDb]


def _db(url: str | RedisDb, prefix: str) -> RedisDb:
    return url if isinstance(url, RedisDb) else RedisDb(url, prefix=prefix)


class RedisStorage(_Closable, AutoPrune, CompareAndPut):
    """The :class:`~framework_agents.sessions.Storage` contract in hashes, zsets and lists.

    It keeps logs too (:class:`~framework_agents.sessions._base.LoggedStorage`): a
    record appended to a value is one ``RPUSH`` in one script, so a session's save writes
    what is new, not its history again.
    """

    def __init__(
        self, url: str | RedisDb, *, prefix: str = "fa:", ttl: float | None = None
    ) -> None:
        """Set up the store; nothing connects before the first operation."""
        self._db = _db(url, prefix)
        self.ttl = check_ttl(ttl)
        p = self._db.prefix
        self._data, self._index, self._times = f"{p}kv:data", f"{p}kv:index", f"{p}kv:time"
        self._digests, self._last, self._seq = f"{p}kv:digest", f"{p}kv:last", f"{p}kv:seq"

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"RedisStorage({redact(self._db.url)!r})"

    def _log(self, key: str) -> str:
        return f"{self._db.prefix}kvlog:{key}"

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (a key is a value or a directory, never both)."""
        await self._put(key, data, "put", b"")

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """Store ``data`` only if ``key`` is still in the state tagged ``expected``.

        ``None``: no value. Otherwise CHECKPOINT_CONFLICT and nothing is written.
        """
        check_expected_tag(expected, optional=True)
        if expected is None:
            await self._put(key, data, "absent", b"")
        else:
            await self._put(key, data, "tag", expected.encode())

    async def _put(self, key: str, data: bytes, mode: str, expected: bytes) -> None:
        segments = validate_key(key)
        value = as_bytes(data)
        ancestors = ["/".join(segments[:i]) for i in range(1, len(segments))]
        keys = [self._data, self._index, self._times, self._digests, self._last, self._log(key)]
        args = [key, value, mode, expected, digest(value), *ancestors]
        reply = await self._db.script("PUT", keys, args)
        if reply[0] == -2:
            raise CheckpointConflictError(
                f"storage key {key!r} changed since it was read; nothing was written"
            )
        if reply[0] == -3:
            other = reply[1].decode()
            raise StorageKeyInvalidError(f"cannot store {key!r}: {other!r} already holds a value")
        if reply[0] == -4:
            raise StorageKeyInvalidError(f"cannot store {key!r}: other keys are stored under it")
        await self._after_write()

    async def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``."""
        validate_key(key)
        value = await self._db.call("hget", self._data, key)
        return None if value is None else bytes(value)

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The value of ``key``, the records appended since it was stored, and its tag.

        A value whose stored digest is missing or wrong (written by a release before the
        value logs) is given its digest, and any log beside it dropped, first.
        """
        validate_key(key)
        log = self._log(key)
        for _ in range(3):
            value, stored_digest, last, records = await self._db.run(
                lambda pipe: (
                    pipe.hget(self._data, key)
                    .hget(self._digests, key)
                    .hget(self._last, key)
                    .lrange(log, 0, -1)
                )
            )
            if value is None:
                return None, [], None
            value = bytes(value)
            value_digest = digest(value)
            if stored_digest is not None and stored_digest.decode() == value_digest:
                tag = log_tag(value_digest, None if last is None else int(last))
                return value, [bytes(r) for r in records], tag
            await self._db.script(
                "REPAIR_DIGEST",
                [self._data, self._digests, self._last, log],
                [key, value, value_digest],
            )
        raise CheckpointConflictError(f"storage key {key!r} keeps changing; read it again")

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Append ``record`` to the log of ``key`` if its tag is still ``expected``.

        One script; CHECKPOINT_CONFLICT (nothing written) when another writer stored or
        appended since. Returns the new tag.
        """
        validate_key(key)
        data = as_bytes(record)
        check_expected_tag(expected, optional=False)
        keys = [self._data, self._times, self._digests, self._last, self._log(key), self._seq]
        reply = await self._db.script("APPEND_LOGGED", keys, [key, data, expected])
        if reply[0] != 1:
            raise CheckpointConflictError(
                f"storage key {key!r} changed since it was read; nothing was written"
            )
        await self._after_write()
        return str(reply[1].decode())

    async def delete(self, key: str) -> None:
        """Remove ``key`` and its log (no-op when missing)."""
        validate_key(key)
        await self._forget([key], "+inf")

    async def _forget(self, keys: builtins.list[str], cutoff: str) -> int:
        """Remove ``keys`` last written before ``cutoff`` (``+inf``: any); how many went."""
        gone = 0
        for start in range(0, len(keys), 256):
            batch = keys[start : start + 256]
            fixed = [self._data, self._index, self._times, self._digests, self._last]
            logs = [self._log(k) for k in batch]
            gone += int(await self._db.script("FORGET", [*fixed, *logs], [cutoff, *batch]))
        return gone

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Stored keys starting with ``prefix``, sorted."""
        validate_prefix(prefix)
        low = b"[" + prefix.encode() if prefix else b"-"
        high = b"(" + prefix.encode() + b"\x7f" if prefix else b"+"
        keys = await self._db.call("zrangebylex", self._index, low, high)
        return [k.decode() for k in keys]

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The values of those ``keys`` that are stored, in one ``HMGET``."""
        for key in keys:
            validate_key(key)
        if not keys:
            return {}
        values = await self._db.call("hmget", self._data, list(keys))
        return {k: bytes(v) for k, v in zip(keys, values, strict=True) if v is not None}

    async def list_after(self, prefix: str, after: str | None, limit: int) -> builtins.list[str]:
        """Up to ``limit`` keys starting with ``prefix`` and greater than ``after``, sorted.

        One ``ZRANGEBYLEX ... LIMIT`` of the key index (O(log n + limit)): a keyset page.
        """
        validate_prefix(prefix)
        if after is not None:
            validate_prefix(after)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgumentError(f"limit must be a positive int, got {limit!r:.40}")
        if after is not None and after >= prefix:
            low = b"(" + after.encode()
        else:
            low = b"[" + prefix.encode() if prefix else b"-"
        high = b"(" + prefix.encode() + b"\x7f" if prefix else b"+"
        keys = await self._db.call("zrangebylex", self._index, low, high, 0, limit)
        return [k.decode() for k in keys]

    async def count_after(self, prefix: str, after: str | None, before: str | None = None) -> int:
        """How many keys under ``prefix`` are above ``after`` and below ``before``.

        ``None``: no bound. One ``ZLEXCOUNT`` of the key index (O(log n)).
        """
        for bound in (prefix, after, before):
            if bound is not None:
                validate_prefix(bound)
        low = b"[" + prefix.encode() if prefix else b"-"
        if after is not None and after >= prefix:
            low = b"(" + after.encode()
        end = prefix + "\x7f" if prefix else None
        if before is not None and (end is None or before < end):
            end = before
        high = b"+" if end is None else b"(" + end.encode()
        return int(await self._db.call("zlexcount", self._index, low, high))

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove values (and logs) not written for ``older_than`` (default: ``ttl``).

        Returns how many values went; one written meanwhile is kept.
        """
        age = check_older_than(older_than, self.ttl)
        now = await self._db.call("time")
        cutoff = now[0] + now[1] / 1e6 - age
        keys = await self._db.call("zrangebyscore", self._times, "-inf", f"({cutoff}")
        return await self._forget([k.decode() for k in keys], repr(cutoff))


class RedisCheckpointer(_Closable, LeasedCheckpointer):
    """Thread checkpoints (head hash + message list) with a leased, fenced lock (module doc)."""

    def __init__(
        self,
        url: str | RedisDb,
        *,
        prefix: str = "fa:",
        **settings: Unpack[LeaseSettings],
    ) -> None:
        """Threads in the Redis database at ``url`` (or a ``RedisDb``), keys under ``prefix``.

        Nothing connects before the first operation. ``settings``: ``lock_timeout``,
        ``lease``, ``ttl`` and ``cipher`` (:class:`~._checkpointer.LeaseSettings`).
        """
        self._db = _db(url, prefix)
        self._set_up(**settings)

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"RedisCheckpointer({redact(self._db.url)!r})"

    def _k(self, kind: str, thread_id: str) -> str:
        return f"{self._db.prefix}{kind}:{thread_id}"

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint, or ``None`` (CHECKPOINT_CORRUPT when unreadable)."""
        check_thread_id(thread_id)
        head_key, list_key = self._k("t", thread_id), self._k("m", thread_id)
        head, bodies = await self._db.run(
            lambda pipe: pipe.hgetall(head_key).lrange(list_key, 0, -1)
        )
        if not head:
            self._forget(thread_id)
            return None
        source = f"checkpoint of thread {thread_id!r} in {redact(self._db.url)}"
        try:
            version, length, data = int(head[b"version"]), int(head[b"length"]), head[b"head"]
        except (KeyError, ValueError):
            raise CheckpointCorruptError(f"{source} is unreadable: bad head hash") from None
        return self._loaded(thread_id, version, length, bytes(data), bodies, source=source)

    async def rotate(self, *, migrate: bool = False) -> int:
        """Seal every head and message under ``cipher.current`` (a script per thread).

        Each value is replaced only if it still holds what was read (a write since wins
        and is sealed already); re-running it finishes the job. ``migrate``: seal plain
        ones too, else a plain one is STORE_INTEGRITY. The number of values written.
        """
        cipher = self._cipher
        if cipher is None:
            raise InvalidArgumentError("rotate() needs a checkpointer with cipher=")
        written = 0
        for thread_id in await self.list_threads():
            head_key, list_key = self._k("t", thread_id), self._k("m", thread_id)
            head, bodies = await self._db.run(functools.partial(_read_thread, head_key, list_key))
            if not head:
                continue
            old = bytes(head[b"head"])
            new = reseal_head(cipher, thread_id, int(head[b"length"]), old, migrate=migrate)
            if new is not None:
                args = ["head", old, new]
                written += int(await self._db.script("RESEAL_HASH_FIELD", [head_key], args))
            changes: list[Any] = []
            rows = [bytes(body) for body in bodies]
            for index, again in reseal_thread(cipher, thread_id, rows, migrate=migrate):
                changes += [index, rows[index], again]
            if changes:
                written += int(await self._db.script("RESEAL_LIST", [list_key], changes))
        return written

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        p = self._db.prefix
        ids = await self._db.script("LIST_THREADS", [f"{p}threads"], [f"{p}t:"])
        return sorted(i.decode() for i in ids)

    def _guard_args(self, thread_id: str) -> list[Any]:
        owner, fence = self._owner(thread_id), self.fence(thread_id)
        return [thread_id, "", "0"] if owner is None else [thread_id, owner, str(fence)]

    def _thread_keys(self, thread_id: str) -> list[str]:
        return [
            self._k("t", thread_id),
            self._k("m", thread_id),
            self._k("lock", thread_id),
            self._k("fence", thread_id),
            f"{self._db.prefix}threads",
        ]

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Store ``checkpoint``, appending only the messages that are not stored yet.

        CHECKPOINT_CONFLICT (nothing written) when the thread changed since this instance
        last read or wrote it, or when another run holds it or took it from this one.
        """
        plan = self._plan(checkpoint)
        thread_id = plan.thread_id
        ttl_ms = 0 if self.ttl is None else max(1, int(self.ttl * 1000))
        args = [
            *self._guard_args(thread_id),
            -1 if plan.expected is None else plan.expected,
            plan.keep,
            plan.head,
            int(plan.pending),
            plan.length,
            ttl_ms,
            *plan.bodies,
        ]
        reply = await self._db.script("SAVE_THREAD", self._thread_keys(thread_id), args)
        if reply[0] != 1:
            self._forget(thread_id)
            raise _conflict(thread_id, reply)
        self._saved(plan, int(reply[1]))

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (no error when there is none)."""
        check_thread_id(thread_id)
        self._forget(thread_id)
        script = lua.THREAD_GUARD + (
            "redis.call('DEL', KEYS[1], KEYS[2]) redis.call('ZREM', KEYS[5], ARGV[1]) return {1}"
        )
        reply = await self._db.call(
            "eval", script, 5, *self._thread_keys(thread_id), *self._guard_args(thread_id)
        )
        if reply[0] != 1:
            raise _conflict(thread_id, reply)

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove threads not saved for ``older_than`` (default: ``ttl``); how many went.

        A thread that is held or waits for an approval is kept.
        """
        age = check_older_than(older_than, self.ttl)
        p = self._db.prefix
        n = await self._db.script(
            "PRUNE_THREADS", [f"{p}threads"], [f"{p}t:", f"{p}m:", f"{p}lock:", age]
        )
        return int(n)

    async def _try_acquire(self, thread_id: str, owner: str) -> int | None:
        lease_ms = max(1, int(self.lease * 1000))
        keys = [self._k(kind, thread_id) for kind in ("lock", "fence", "t", "m")]
        fence = int(await self._db.script("ACQUIRE", keys, [owner, lease_ms]))
        return fence or None

    async def _renew(self, thread_id: str, owner: str) -> bool:
        lease_ms = max(1, int(self.lease * 1000))
        keys = [self._k(kind, thread_id) for kind in ("lock", "t", "m")]
        return bool(await self._db.script("RENEW", keys, [owner, lease_ms]))

    async def _release(self, thread_id: str, owner: str) -> None:
        await self._db.script("RELEASE", [self._k("lock", thread_id)], [owner])


def _conflict(thread_id: str, reply: Any) -> CheckpointConflictError:
    if reply[0] == -2:
        return CheckpointConflictError(
            f"thread {thread_id!r} changed since this instance read it (now version "
            f"{reply[1]}); nothing was written"
        )
    why = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
    text = {
        "lost": "this run lost its lock (lease expired or taken by another run)",
        "fenced": "another run took the thread since this run locked it",
        "held": "another run holds the thread",
    }.get(why, why)
    return CheckpointConflictError(f"thread {thread_id!r}: {text}; nothing was written")


class RedisMemory(MergingMemory, _Closable):
    """A windowed history in one list; ``save()`` appends and trims in one Lua script."""

    def __init__(
        self,
        url: str | RedisDb,
        key: str,
        max_messages: int = 50,
        *,
        prefix: str = "fa:",
        cipher: Cipher | None = None,
    ) -> None:
        """The history under ``key`` in the Redis database at ``url``, keys under ``prefix``.

        Nothing connects before the first operation. ``cipher``: seal every message at
        rest (``docs/security.md``).
        """
        super().__init__(key, max_messages, cipher)
        self._db = _db(url, prefix)
        self._list = f"{self._db.prefix}mem:{key}"
        # The list, the set of its message ids (how a save skips a stored message) and
        # the marker every write moves forward (``MergingMemory``).
        self._keys = [
            self._list,
            f"{self._db.prefix}memids:{key}",
            f"{self._db.prefix}memseq:{key}",
        ]

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"RedisMemory({redact(self._db.url)!r}, {self.key!r})"

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (MEMORY_CORRUPT)."""

        def read(pipe: Any) -> None:  # one MULTI/EXEC: the items and the marker together
            pipe.lrange(self._list, 0, -1)
            pipe.get(self._keys[2])

        items, marker = await self._db.run(read)
        source = f"memory {self.key!r} in {redact(self._db.url)}"
        for i, item in enumerate(items):
            if not item or item[0] not in b"012":
                raise MemoryCorruptError(f"{source}: message {i} has no shape prefix")
        return self._loaded([bytes(item[1:]) for item in items], int(marker or 0), source=source)

    async def _append_new(self, given: list[Message]) -> None:
        # One Lua script: it skips the stored ids (the id set) and trims the list.
        args = [self.max_messages, 0, *_row_items(self._rows(given))]
        _, _, marker = await self._db.script("MEMORY_APPEND", self._keys, args)
        if int(marker) != self._marker:
            self._wrote(int(marker))

    async def _read_marker(self) -> int:
        return int(await self._db.call("get", self._keys[2]) or 0)

    @staticmethod
    async def rotate_all(db: RedisDb, cipher: Cipher, migrate: bool = False) -> int:
        """Re-seal every memory under ``db``'s prefix under ``cipher.current``.

        Each message is replaced only if its place in the list still holds what was read
        (a save that trimmed the list meanwhile wins; the next rotate() sees the rest).
        ``migrate``: seal plain messages too; else a plain one is STORE_INTEGRITY. The
        number of messages written.
        """
        head = f"{db.prefix}mem:"
        lists = sorted([bytes(k).decode() async for k in db.client().scan_iter(match=head + "*")])
        written = 0
        for name in lists:
            key = name[len(head) :]
            changes: list[Any] = []
            for index, item in enumerate(await db.call("lrange", name, 0, -1)):
                item = bytes(item)
                again = reseal_body(cipher, MEMORY_MESSAGE, key, item[1:], migrate=migrate)
                if again is not None:
                    changes += [index, item, item[:1] + again]
            if changes:
                written += int(await db.script("RESEAL_LIST", [name], changes))
        return written

    async def _append_if(
        self, given: list[Message], rows: list[tuple[int, bytes]], expected: int
    ) -> tuple[int, int] | None:
        # One Lua script: the checks and the append.
        args = [self.max_messages, expected, *_row_items(rows)]
        done = await self._db.script("MEMORY_APPEND_IF", self._keys, args)
        if not done:
            return None
        _, dropped, marker = done
        return int(marker), int(dropped)

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """:meth:`MergingMemory.commit`. One Lua script, so nothing slips in between."""
        kept, ids, merge_base = self._commit_parts(messages, base)
        if merge_base is None:
            args = [self.max_messages, 1, *_row_items(self._rows(kept))]
            _, _, marker = await self._db.script("MEMORY_APPEND", self._keys, args)
        else:
            known = sorted(merge_base | ids)
            args = [self.max_messages, len(known), *known, *_row_items(self._rows(kept))]
            _, _, marker = await self._db.script("MEMORY_MERGE", self._keys, args)
        self._wrote(int(marker))
        self._seen = ids

    async def clear(self) -> None:
        """Forget the stored history (the marker moves on)."""
        self._wrote(int(await self._db.script("MEMORY_CLEAR", self._keys, [])))
        self._seen = set()


def _read_thread(head_key: str, list_key: str, pipe: Any) -> object:
    """Queue the reads of a thread's head hash and message list (one MULTI/EXEC)."""
    return pipe.hgetall(head_key).lrange(list_key, 0, -1)


def _row_items(rows: Sequence[tuple[int, bytes]]) -> list[bytes]:
    """The list items of memory rows (``memory_rows``)."""
    return [b"%d" % shape + body for shape, body in rows]


def redis_store(
    url: str,
    *,
    lease: float,
    ttl: float | None,
    lock_timeout: float | None,
    prefix: str = "fa:",
) -> Store:
    """The :class:`Store` of a Redis URL (one client for the whole bundle)."""
    db = RedisDb(url, prefix=prefix)
    classes = (RedisStorage, RedisCheckpointer, RedisMemory, RedisBankBackend)
    return db_store(url, db, classes, lease=lease, ttl=ttl, lock_timeout=lock_timeout)
