"""The store bundle: one storage, one checkpointer and memories, opened from one URL.

``open_store(url)`` picks the backend from the URL:

=========================  ==========================================================
``memory:``                in this process only (tests, demos)
a directory path           files: LocalFileStorage, FileCheckpointer, FileMemory
``file:///<abs path>``     the same directory store
``sqlite:///<path>``       one SQLite file shared by the processes of one machine
``postgresql://...``       PostgreSQL, shared by every machine (extra ``postgres``)
``redis://...``            Redis, shared by every machine (extra ``redis``)
=========================  ==========================================================

The URL is parsed by :func:`framework_agents._store_url.parse_store_url`, which the
server shares: a ``~`` is expanded, and a bare scheme name (``"memory"``) is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._crypto import Cipher
from .._retention import check_ttl
from .._store_url import parse_store_url
from ..bank._base import BankBackend, FileBankBackend, InMemoryBankBackend
from ..bank.bank import Embedder, MemoryBank
from ..checkpoint._base import Checkpointer
from ..checkpoint.file import FileCheckpointer
from ..checkpoint.memory import InMemoryCheckpointer
from ..errors import InvalidArgumentError
from ..memory._base import Memory
from ..memory.file import FileMemory
from ..memory.in_memory import InMemoryMemory
from ..sessions._base import Storage, validate_key
from ..sessions.local import LocalFileStorage
from ..sessions.memory_storage import InMemoryStorage
from ..sessions.sealed import SealedStorage
from ._codec import AsyncClosing, check_lease, redact

__all__ = ["Store", "db_store", "open_store"]


class Store(AsyncClosing):
    """A storage, a checkpointer and a memory factory that share one backend.

    ``store.storage`` (sessions), ``store.checkpointer`` (threads) and
    ``store.memory(key, max_messages=50)`` (one history per key) all live in the same
    database, directory or process; ``await store.close()`` (or ``async with``) closes
    every connection the bundle opened.
    """

    def __init__(
        self,
        url: str,
        *,
        storage: Storage,
        checkpointer: Checkpointer,
        memory: Callable[[str, int], Memory],
        bank: BankBackend,
        close: Callable[[], Awaitable[None]] | None = None,
        rotate_memories: Callable[[Cipher, bool], Awaitable[int]] | None = None,
    ) -> None:
        """Set up the store; nothing connects before the first operation.

        ``rotate_memories(cipher, migrate)``: re-seal every stored memory (``rotate()``).
        """
        self.url = url
        self._rotate_memories = rotate_memories
        self.cipher: Cipher | None = None
        self.storage: Storage = storage
        self.checkpointer = checkpointer
        self._memory = memory
        self._bank = bank
        self._close = close
        self._memories: list[Memory] = []

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"Store({redact(self.url)!r})"

    def memory(self, key: str, max_messages: int = 50) -> Memory:
        """The memory stored under ``key`` (STORAGE_KEY_INVALID for a bad key)."""
        validate_key(key)
        memory = self._memory(key, max_messages)
        self._memories.append(memory)
        return memory

    def use_cipher(self, cipher: Cipher) -> None:
        """Encrypt every part of the store with ``cipher`` (``open_store(cipher=)``)."""
        for part in (self.checkpointer, self._bank):
            _sealing(part, cipher)
        self.cipher = cipher
        self.storage = SealedStorage(self.storage, cipher)
        factory = self._memory

        def memory(key: str, max_messages: int) -> Memory:
            made = factory(key, max_messages)
            if isinstance(made, FileMemory):
                made.use_cipher(cipher, where=key)  # bound to its key, not its directory
            else:
                _sealing(made, cipher)
            return made

        self._memory = memory

    async def rotate(self) -> int:
        """Re-encrypt everything under ``cipher.current`` (and migrate a plain store).

        Values sealed under an older key id are sealed again under the current one, one
        short transaction (or compare-and-swap) each, so other processes keep working;
        after a crash, running it again finishes the job (what is current is skipped).
        On a store written without ``cipher=`` (not yet marked encrypted) it seals the
        plain values in place, the migration; the store is marked encrypted once
        everything is done. The number of values written; INVALID_ARGUMENT on a store
        opened without ``cipher=``.
        """
        cipher = self.cipher
        if cipher is None or not isinstance(self.storage, SealedStorage):
            raise InvalidArgumentError("rotate() needs a store opened with cipher=")
        migrate = not await self.storage.is_marked()
        written = await self.storage.rotate(migrate=migrate, mark=False)
        for part in (self.checkpointer, self._bank):
            rotate = getattr(part, "rotate", None)
            if callable(rotate):
                written += await rotate(migrate=migrate)
        if self._rotate_memories is not None:
            written += await self._rotate_memories(cipher, migrate)
        await self.storage.mark()
        return written

    def bank(self, embedder: Embedder | None = None) -> MemoryBank:
        """The store's :class:`~framework_agents.bank.MemoryBank` (closed with the store)."""
        return MemoryBank.over(self._bank, embedder=embedder)

    def bank_backend(self) -> BankBackend:
        """The backend the store's memory banks share (internal)."""
        return self._bank

    async def close(self) -> None:
        """Close every connection and pool of the bundle (idempotent)."""
        closers: list[Any] = [self.storage, self.checkpointer, self._bank, *self._memories]
        self._memories = []
        for item in closers:
            method = getattr(item, "close", None)
            if callable(method):
                await method()
        if self._close is not None:
            close, self._close = self._close, None
            await close()


def _sealing(part: object, cipher: Cipher) -> None:
    """Hand ``cipher`` to a part of a store; INVALID_ARGUMENT if it cannot encrypt."""
    seal = getattr(part, "use_cipher", None)
    if not callable(seal):
        raise InvalidArgumentError(
            f"cipher=: {type(part).__name__} cannot encrypt at rest yet; nothing of it "
            "would be sealed (see docs/security.md for what each backend encrypts)"
        )
    seal(cipher)


class _Db(Protocol):
    async def close(self) -> None: ...


#: A database backend's storage, checkpointer, memory and memory-bank classes.
StoreClasses = tuple[
    Callable[..., Storage],
    Callable[..., Checkpointer],
    Callable[..., Memory],
    Callable[..., BankBackend],
]


def db_store(
    url: str,
    db: _Db,
    classes: StoreClasses,
    *,
    lease: float,
    ttl: float | None,
    lock_timeout: float | None,
) -> Store:
    """The :class:`Store` of one database: its stores share ``db`` (and close it)."""
    storage, checkpointer, memory, bank = classes
    rotate_all = getattr(memory, "rotate_all", None)
    return Store(
        url,
        storage=storage(db, ttl=ttl),
        checkpointer=checkpointer(db, lease=lease, ttl=ttl, lock_timeout=lock_timeout),
        memory=lambda key, n: memory(db, key, n),
        bank=bank(db),
        close=db.close,
        rotate_memories=None if rotate_all is None else (lambda c, m: rotate_all(db, c, m)),
    )


def _memory_store(url: str, *, ttl: float | None, lock_timeout: float | None) -> Store:
    memories: dict[tuple[str, int], InMemoryMemory] = {}

    def memory(key: str, max_messages: int) -> Memory:
        return memories.setdefault((key, max_messages), InMemoryMemory(max_messages))

    return Store(
        url,
        storage=InMemoryStorage(ttl=ttl),
        checkpointer=InMemoryCheckpointer(lock_timeout=lock_timeout, ttl=ttl),
        memory=memory,
        bank=InMemoryBankBackend(),
    )


def _file_store(url: str, root: Path, *, ttl: float | None, lock_timeout: float | None) -> Store:
    async def rotate_memories(cipher: Cipher, migrate: bool) -> int:
        """``rotate()`` of every memory under ``<root>/memory/``, each bound to its key."""
        base = root / "memory"
        found = await asyncio.to_thread(lambda: sorted(base.rglob("memory.json")))
        written = 0
        for path in found:
            memory = FileMemory(path.parent, lock_timeout=lock_timeout)
            memory.use_cipher(cipher, where=path.parent.relative_to(base).as_posix())
            written += await memory.rotate(migrate=migrate)
        return written

    return Store(
        url,
        storage=LocalFileStorage(root / "storage", ttl=ttl),
        checkpointer=FileCheckpointer(root, lock_timeout=lock_timeout, ttl=ttl),
        memory=lambda key, n: FileMemory(root / "memory" / key, n),
        bank=FileBankBackend(root),
        rotate_memories=rotate_memories,
    )


def _sqlite_store(
    url: str, path: Path, *, lease: float, ttl: float | None, lock_timeout: float | None
) -> Store:
    from ._sqlite_db import SqliteDb
    from .sqlite import SqliteBankBackend, SqliteCheckpointer, SqliteMemory, SqliteStorage

    db = SqliteDb(path)  # sqlite:////abs/path is absolute
    classes = (SqliteStorage, SqliteCheckpointer, SqliteMemory, SqliteBankBackend)
    return db_store(url, db, classes, lease=lease, ttl=ttl, lock_timeout=lock_timeout)


def _pop_query(url: str, name: str, default: str) -> tuple[str, str]:
    """``url`` without its ``name=`` query parameter, and that parameter's value."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    values = [v for k, v in pairs if k == name]
    if len(values) > 1:
        raise InvalidArgumentError(f"{redact(url)!r} gives {name}= more than once")
    rest = urlencode([(k, v) for k, v in pairs if k != name])
    return urlunsplit(parts._replace(query=rest)), values[0] if values else default


def open_store(
    url: str | os.PathLike[str],
    *,
    lease: float = 30.0,
    ttl: float | None = None,
    lock_timeout: float | None = 10.0,
    cipher: Cipher | None = None,
) -> Store:
    """The :class:`Store` for ``url`` (memory, a directory, SQLite, PostgreSQL or Redis).

    ``url`` is ``"memory:"``, a directory path (``~`` expanded) or ``"file:///<path>"``,
    ``"sqlite:///<path>"``, ``"postgresql://..."`` or ``"redis://..."``. A bare scheme
    name (``"memory"``, ``"sqlite"``, ...) is ``INVALID_ARGUMENT``: a directory of that
    name is ``"./memory"`` (or ``Path("memory")``).

    A PostgreSQL URL may name the schema to use (``?schema=agents``, default ``public``)
    and a Redis URL the key prefix (``?prefix=app1:``, default ``fa:``; an empty one is
    ``INVALID_ARGUMENT``: it would mix the store's keys with others'); the parameter is
    removed before the URL reaches the driver. ``lease`` (seconds) is how long a dead
    holder keeps a thread; ``ttl`` (seconds, ``None``: forever) how long unsaved data is
    kept; ``lock_timeout`` how long a run waits for a busy thread. Nothing connects
    until the first operation.

    ``cipher``: a :class:`~framework_agents.Cipher` encrypting every value at rest, bound
    to its place (see ``docs/security.md``); ``await store.rotate()`` re-encrypts under
    ``cipher.current`` and migrates a store written without it.
    """
    if cipher is not None and not isinstance(cipher, Cipher):
        raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
    store = _open(url, lease=lease, ttl=ttl, lock_timeout=lock_timeout)
    if cipher is not None:
        store.use_cipher(cipher)
    return store


def _open(
    url: str | os.PathLike[str], *, lease: float, ttl: float | None, lock_timeout: float | None
) -> Store:
    where = parse_store_url(url, redact=redact)
    check_lease(lease)
    check_ttl(ttl)
    url = where.url
    if where.kind == "memory":
        return _memory_store(url, ttl=ttl, lock_timeout=lock_timeout)
    if where.kind == "sqlite":
        assert where.path is not None
        return _sqlite_store(url, where.path, lease=lease, ttl=ttl, lock_timeout=lock_timeout)
    if where.kind == "postgres":
        from .postgres import postgres_store

        dsn, schema = _pop_query(url, "schema", "public")
        return postgres_store(dsn, lease=lease, ttl=ttl, lock_timeout=lock_timeout, schema=schema)
    if where.kind == "redis":
        from .redis import redis_store

        plain, prefix = _pop_query(url, "prefix", "fa:")
        return redis_store(plain, lease=lease, ttl=ttl, lock_timeout=lock_timeout, prefix=prefix)
    assert where.path is not None
    with contextlib.suppress(OSError):
        if where.path.exists() and not where.path.is_dir():
            raise InvalidArgumentError(f"open_store({url!r}): a file is in the way")
    return _file_store(url, where.path, ttl=ttl, lock_timeout=lock_timeout)
