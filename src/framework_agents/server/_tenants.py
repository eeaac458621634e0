"""Tenants: one server, several clients kept apart by the token each one sends.

``create_app(..., tokens={"<token>": "<tenant>"})`` (``serve --tokens FILE``) maps each
bearer token to a tenant. The body guard finds the request's tenant (:class:`TokenTable`:
every token compared, in constant time, none skipped) and serves the request with it set
(:func:`serving_tenant`); tasks a request starts (a run, an A2A task) keep it.

Everything a tenant reaches goes through the store, and the store is scoped here, below
every protocol: :class:`TenantCheckpointer` and :class:`TenantStorage` put the tenant in
front of every thread id and storage key the server and the agents use. Stored layout::

    checkpointer thread   <tenant>.<thread_id>        (the client sees <thread_id>)
    storage key           tenants/<tenant>/<key>      (timelines, the thread list, A2A tasks)
    bank namespace        ("tenant:<tenant>", *namespace)

A tenant name has no dot, so ``<tenant>.`` ends where the first dot is: no thread id one
tenant sends can name another's thread, and the id a client sees stays the one it sent.
Another tenant's id is then simply not there: 404 with the body an id nobody used gets.
A scoped store used where no tenant is set (a task the app started on its own) raises
:class:`NoTenantError` (answered ``INTERNAL``) rather than fall back to an unscoped name.

Tokens are never logged, never put in an error message or a span: an error about the
tokens file names its line, not its content.
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import hashlib
import hmac
import inspect
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from pathlib import Path
from types import EllipsisType
from typing import Any

from .._util import read_pairs
from ..checkpoint._base import (
    DEFAULT_LOCK_TIMEOUT,
    HeldThread,
    hold_thread,
    save_progress,
    thread_lock,
)
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import InvalidArgumentError, ThreadIdInvalidError
from ..sessions._base import as_logged, is_valid_segment
from ._store import ServerStore

__all__ = [
    "BANK_PART",
    "TENANT_PATTERN",
    "LoggedTenantStorage",
    "NoTenantError",
    "TenantCheckpointer",
    "TenantStorage",
    "TokenTable",
    "bank_namespace",
    "check_tokens",
    "client_namespace",
    "current_tenant",
    "read_tokens_file",
    "serving_tenant",
    "tenant_store",
]

#: A tenant's name: letters, digits, ``_`` and ``-`` (no dot: it ends the thread prefix).
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: A token: printable ASCII without spaces (it travels in an HTTP header).
_TOKEN_PATTERN = re.compile(r"[\x21-\x7e]+")
#: The first part of every bank namespace of a tenant (``tenant:<name>``).
BANK_PART = "tenant:"
#: The longest thread id a checkpointer stores (``THREAD_ID_PATTERN``).
_MAX_THREAD_ID = 128

_CURRENT: ContextVar[str | None] = ContextVar("framework_agents_server_tenant", default=None)


class NoTenantError(RuntimeError):
    """A tenant-scoped store was used where no tenant is set: a bug, refused, never guessed.

    Not an ``AgentError``: the server answers it as ``INTERNAL`` and logs it.
    """


def current_tenant() -> str | None:
    """The tenant of the request being served (``None``: a server without ``tokens=``)."""
    return _CURRENT.get()


@contextlib.contextmanager
def serving_tenant(tenant: str | None) -> Iterator[None]:
    """Serve the block (and the tasks it starts) as ``tenant``."""
    reset = _CURRENT.set(tenant)
    try:
        yield
    finally:
        _CURRENT.reset(reset)


def _tenant() -> str:
    tenant = _CURRENT.get()
    if tenant is None:
        raise NoTenantError("no tenant is set for this store call; nothing was read or written")
    return tenant


# -- tokens ---------------------------------------------------------------------------


def _check_pair(token: object, tenant: object, where: str) -> None:
    """``INVALID_ARGUMENT`` for a bad token or tenant; the message never holds the token."""
    if not isinstance(token, str) or _TOKEN_PATTERN.fullmatch(token) is None:
        raise InvalidArgumentError(
            f"{where}: a token must be a non-empty string of printable ASCII without spaces"
        )
    if (
        not isinstance(tenant, str)
        or TENANT_PATTERN.fullmatch(tenant) is None
        or not is_valid_segment(tenant)
    ):
        raise InvalidArgumentError(
            f"{where}: tenant {tenant!r:.80} is not a tenant name (1 to 64 letters, digits, "
            "'_' or '-', starting with a letter or digit; not a device name such as CON)"
        )


def check_tokens(tokens: object) -> dict[str, str]:
    """``tokens`` (``{token: tenant}``) checked, as a plain dict (``INVALID_ARGUMENT``)."""
    if not isinstance(tokens, Mapping) or not tokens:
        raise InvalidArgumentError("tokens must be a non-empty mapping of token to tenant name")
    checked: dict[str, str] = {}
    for number, (token, tenant) in enumerate(tokens.items(), start=1):
        _check_pair(token, tenant, f"tokens entry {number}")
        checked[token] = tenant
    return checked


def read_tokens_file(path: str | Path) -> dict[str, str]:
    """The ``{token: tenant}`` of a tokens file: one ``token tenant`` pair a line.

    Blank lines and lines starting with ``#`` are skipped. A line of another shape, a
    token given twice or an unreadable file is ``INVALID_ARGUMENT`` naming the file and
    the line (never the token).
    """
    tokens: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, where, token, tenant in read_pairs(path, "tokens", "TOKEN TENANT"):
        _check_pair(token, tenant, where)
        if token in tokens:
            raise InvalidArgumentError(
                f"{where}: this token is already on line {first_line[token]} (each token once)"
            )
        tokens[token] = tenant
        first_line[token] = number
    return tokens


class TokenTable:
    """The tenant of an ``Authorization`` header, found in constant time.

    Each header is hashed once and compared (``hmac.compare_digest``) with the hash of
    every known ``Bearer <token>``: the same work whichever token matches, or none, and
    hashes of one length (the header's length is not compared either).
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        """Know ``tokens`` (``{token: tenant}``, checked by :func:`check_tokens`)."""
        self._entries = [
            (hashlib.sha256(f"Bearer {token}".encode()).digest(), tenant)
            for token, tenant in tokens.items()
        ]

    def tenant_of(self, authorization: bytes) -> str | None:
        """The tenant whose token ``authorization`` carries, else ``None``."""
        given = hashlib.sha256(authorization).digest()
        found: str | None = None
        for expected, tenant in self._entries:  # every entry, whatever matched before
            if hmac.compare_digest(given, expected):
                found = tenant
        return found

    @property
    def tenants(self) -> builtins.list[str]:
        """The tenant names, sorted, each once."""
        return sorted({tenant for _hash, tenant in self._entries})


# -- thread ids, keys and namespaces --------------------------------------------------


def _scoped_id(thread_id: str) -> str:
    """The stored id of the current tenant's ``thread_id`` (``THREAD_ID_INVALID`` first)."""
    check_thread_id(thread_id)
    tenant = _tenant()
    stored = f"{tenant}.{thread_id}"
    if len(stored) > _MAX_THREAD_ID:
        raise ThreadIdInvalidError(
            f"thread id {thread_id!r} is too long: this server takes thread ids of at most "
            f"{_MAX_THREAD_ID - len(tenant) - 1} characters"
        )
    return stored


def _client_id(stored: str) -> str:
    """The id the current tenant knows ``stored`` by (its own prefix taken off)."""
    prefix = f"{_tenant()}."
    return stored[len(prefix) :] if stored.startswith(prefix) else stored


def _to_store(checkpoint: ThreadCheckpoint) -> ThreadCheckpoint:
    return checkpoint.model_copy(update={"thread_id": _scoped_id(checkpoint.thread_id)})


def _to_client(checkpoint: ThreadCheckpoint | None) -> ThreadCheckpoint | None:
    if checkpoint is None:
        return None
    return checkpoint.model_copy(update={"thread_id": _client_id(checkpoint.thread_id)})


def bank_namespace(namespace: Sequence[str]) -> tuple[str, ...]:
    """The current tenant's namespace for the client's ``namespace`` (``INVALID_ARGUMENT``)."""
    parts = tuple(namespace)
    if len(parts) > 7:
        raise InvalidArgumentError(
            f"namespace must have 1 to 7 parts on this server, not {len(parts)}"
        )
    return (f"{BANK_PART}{_tenant()}", *parts)


def client_namespace(namespace: Sequence[str]) -> tuple[str, ...] | None:
    """The client's view of a stored ``namespace``; ``None`` if not the current tenant's."""
    parts = tuple(namespace)
    if not parts or parts[0] != f"{BANK_PART}{_tenant()}":
        return None
    return parts[1:]


# -- the scoped store -----------------------------------------------------------------


def _takes_timeout(checkpointer: Any) -> bool:
    """Whether ``checkpointer.thread_lock`` takes ``timeout=`` (the shipped ones do)."""
    lock = getattr(checkpointer, "thread_lock", None)
    try:
        return lock is not None and "timeout" in inspect.signature(lock).parameters
    except (TypeError, ValueError):
        return False


class TenantCheckpointer:
    """A checkpointer seen through the current tenant: its thread ids carry the tenant.

    Every thread id in (an argument, a checkpoint saved) gets the tenant's prefix, every
    one out (a checkpoint loaded, the thread list) loses it; the list holds the tenant's
    threads only. Locks, progress saves and held threads go to the inner checkpointer
    under the stored id, so its own capabilities (and cross-process locks) still apply.
    """

    def __init__(self, inner: Any) -> None:
        """Scope ``inner`` (any checkpointer)."""
        self.inner = inner

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Save under the stored id."""
        await self.inner.save(_to_store(checkpoint))

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """The inner checkpointer's progress save (a plain save where it has none)."""
        await save_progress(self.inner, _to_store(checkpoint))

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The tenant's thread, with the id the client knows."""
        return _to_client(await self.inner.load(_scoped_id(thread_id)))

    async def delete(self, thread_id: str) -> None:
        """Delete the tenant's thread."""
        await self.inner.delete(_scoped_id(thread_id))

    async def list_threads(self) -> list[str]:
        """The tenant's thread ids (every thread is listed to find them: O(threads))."""
        prefix = f"{_tenant()}."
        every: list[str] = await self.inner.list_threads()
        return [t[len(prefix) :] for t in every if t.startswith(prefix)]

    def thread_lock(
        self,
        thread_id: str,
        *,
        timeout: float | EllipsisType | None = ...,
    ) -> AbstractAsyncContextManager[None]:
        """The inner lock of the stored id (``timeout`` passed on where it takes one)."""
        stored = _scoped_id(thread_id)
        if timeout is not ... and _takes_timeout(self.inner):
            lock: AbstractAsyncContextManager[None] = self.inner.thread_lock(
                stored, timeout=timeout
            )
            return lock
        return thread_lock(self.inner, stored)

    @contextlib.asynccontextmanager
    async def hold_thread(self, thread_id: str) -> AsyncIterator[HeldThread]:
        """The inner checkpointer's held thread, its checkpoints seen through the tenant."""
        async with hold_thread(self.inner, _scoped_id(thread_id)) as held:

            async def save_last(checkpoint: ThreadCheckpoint) -> bool:
                return await held.save_last(_to_store(checkpoint))

            yield HeldThread(_to_client(held.checkpoint), save_last)

    @property
    def lock_timeout(self) -> float | None:
        """The inner checkpointer's wait for a busy thread."""
        value: float | None = getattr(self.inner, "lock_timeout", DEFAULT_LOCK_TIMEOUT)
        return value


class TenantStorage:
    """A storage seen through the current tenant: every key under ``tenants/<tenant>/``."""

    def __init__(self, inner: Any) -> None:
        """Scope ``inner`` (a :class:`~framework_agents.sessions.Storage`)."""
        self.inner = inner

    @staticmethod
    def _prefix() -> str:
        return f"tenants/{_tenant()}/"

    async def put(self, key: str, data: bytes) -> None:
        """Store under the tenant's key."""
        await self.inner.put(self._prefix() + key, data)

    async def get(self, key: str) -> bytes | None:
        """The tenant's value."""
        value: bytes | None = await self.inner.get(self._prefix() + key)
        return value

    async def delete(self, key: str) -> None:
        """Remove the tenant's key."""
        await self.inner.delete(self._prefix() + key)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """The tenant's keys under ``prefix`` (without the tenant's part)."""
        mine = self._prefix()
        keys: builtins.list[str] = await self.inner.list(mine + prefix)
        return [k[len(mine) :] for k in keys]

    async def list_after(self, prefix: str, after: str | None, limit: int) -> builtins.list[str]:
        """Up to ``limit`` of the tenant's keys under ``prefix`` after ``after``, sorted."""
        mine = self._prefix()
        ranged = getattr(self.inner, "list_after", None)
        if callable(ranged):
            keys: builtins.list[str] = await ranged(
                mine + prefix, None if after is None else mine + after, limit
            )
            return [k[len(mine) :] for k in keys]
        every = sorted(await self.list(prefix))
        start = 0 if after is None else bisect.bisect_right(every, after)
        return every[start : start + limit]

    async def count_after(self, prefix: str, after: str | None, before: str | None = None) -> int:
        """How many of the tenant's keys under ``prefix`` lie between two bounds.

        Greater than ``after``, less than ``before`` (``None``: no bound): the inner
        count where it has one, else a list of the tenant's keys.
        """
        mine = self._prefix()
        counted = getattr(self.inner, "count_after", None)
        if callable(counted):
            found: int = await counted(
                mine + prefix,
                None if after is None else mine + after,
                None if before is None else mine + before,
            )
            return found
        keys = await self.list(prefix)
        return sum(
            1 for k in keys if (after is None or k > after) and (before is None or k < before)
        )

    async def get_many(self, keys: builtins.list[str]) -> dict[str, bytes]:
        """The stored values of the tenant's ``keys`` (one read where the inner can)."""
        mine = self._prefix()
        many = getattr(self.inner, "get_many", None)
        if callable(many):
            found: dict[str, bytes] = await many([mine + k for k in keys])
            return {k[len(mine) :]: v for k, v in found.items()}
        values: dict[str, bytes] = {}
        for key in keys:
            value = await self.inner.get(mine + key)
            if value is not None:
                values[key] = value
        return values

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """The inner conditional store (a plain ``put`` where it has none)."""
        method = getattr(self.inner, "swap", None)
        if callable(method):
            await method(self._prefix() + key, data, expected)
        else:
            await self.inner.put(self._prefix() + key, data)


class LoggedTenantStorage(TenantStorage):
    """A :class:`TenantStorage` over a storage that keeps logs (``LoggedStorage``)."""

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The inner logged read of the tenant's key."""
        found: tuple[bytes | None, builtins.list[bytes], str | None] = await self.inner.read_logged(
            self._prefix() + key
        )
        return found

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """The inner logged append to the tenant's key."""
        tag: str = await self.inner.append_logged(self._prefix() + key, record, expected)
        return tag


def tenant_store(store: ServerStore) -> ServerStore:
    """``store`` seen through the current tenant (thread ids, keys: the module docstring)."""
    storage = (
        LoggedTenantStorage(store.storage)
        if as_logged(store.storage) is not None
        else TenantStorage(store.storage)
    )
    return ServerStore(TenantCheckpointer(store.checkpointer), storage, store.close)
