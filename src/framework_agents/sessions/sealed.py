"""``SealedStorage``: any :class:`Storage` encrypted at rest, value by value (``cipher=``).

It wraps a storage (files, SQLite, PostgreSQL, Redis, in-process) and seals every value
and every log record before the wrapped storage sees it, so the same code encrypts
session snapshots and their logs, and the server's records, on every backend.

Keys stay plain (they are looked up). Each value is sealed under the *data key* of its
scope (the key's first two segments, ``session/<sid>`` for a session's snapshots; the
first segment for a two-segment key), and each data key is sealed under the store key
(``Cipher.current``) at ``fa-crypt/keys/<digest of the scope>``. So:

* forgetting a scope (``forget_scope``, what ``SessionManager.forget()`` calls) deletes
  its data key: every copy of its values, backups and unvacuumed pages included, is
  unreadable at once;
* rotating the store key (:meth:`rotate`) re-seals the data keys only.

The associated data binds a value to its key (``Place("storage.value", key)``) and a log
record to its key, the random id of the value it follows (drawn at each ``put``) and its
index in that log, so a value or record moved to another key, replayed from an older
value's log or reordered does not authenticate: ``STORE_INTEGRITY``, left as it is.

Tags: a value's tag is the digest of its *plain* bytes while it has no records (what
``SessionManager`` computes), else the wrapped storage's tag; a compare-and-swap reads
the stored state to translate one into the other when it does not know it already.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._crypto import Cipher, DataKey, Place, is_sealed
from ..errors import CheckpointConflictError, InvalidArgumentError, StoreIntegrityError
from ._base import (
    ArgumentTypeError,
    Storage,
    as_logged,
    check_expected_tag,
    check_tag,
    digest,
    validate_key,
    validate_prefix,
)

__all__ = ["RESERVED", "SealedStorage", "scope_of"]

#: Where the wrapped data keys and the store's marker live (hidden from ``list``).
RESERVED = "fa-crypt/"
#: The marker saying the storage is encrypted: a plain value there is never migrated.
MARKER_KEY = "fa-crypt/sealed"
_VALUE_ID = 16


def scope_of(key: str) -> str:
    """The scope whose data key seals ``key``: its first two segments (one if it has two)."""
    parts = key.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def _key_slot(scope: str) -> str:
    return RESERVED + "keys/" + hashlib.blake2b(scope.encode(), digest_size=16).hexdigest()


@dataclass(slots=True)
class _Known:
    """A stored state as this instance last read or wrote it."""

    tag: str | None  # the tag callers see
    inner: str | None  # the wrapped storage's tag
    value_id: bytes
    records: int


class SealedStorage:
    """A :class:`Storage` whose values and log records are sealed by a :class:`Cipher`.

    ``SealedStorage(storage, cipher)``; ``open_store(url, cipher=...)`` builds it. It
    has the wrapped storage's capabilities (``swap``, ``read_logged``,
    ``append_logged``, ``compare_and_put``, ``list_after``, ``count_after``,
    ``get_many``, ``prune``, ``close``), plus :meth:`forget_scope` and :meth:`rotate`.
    """

    def __init__(self, storage: Storage, cipher: Cipher) -> None:
        """Wrap ``storage``; nothing is read or written before the first operation."""
        if not isinstance(cipher, Cipher):
            raise ArgumentTypeError(f"cipher must be a Cipher, not {type(cipher).__name__}")
        logged = as_logged(storage)
        if logged is None:
            raise InvalidArgumentError(
                f"cipher= needs a storage with swap/read_logged/append_logged; "
                f"{type(storage).__name__} has not"
            )
        self.inner = logged
        self.cipher = cipher
        self._keys: dict[str, DataKey] = {}
        self._known: dict[str, _Known] = {}
        self._marked = False

    def __repr__(self) -> str:
        """The wrapped storage and the cipher's key ids."""
        return f"SealedStorage({self.inner!r}, {self.cipher!r})"

    def __getattr__(self, name: str) -> Any:
        if name in ("prune", "close", "ttl", "root"):
            return getattr(self.inner, name)
        raise AttributeError(name)

    # -- data keys -----------------------------------------------------------------------

    async def _data_key(self, scope: str, *, create: bool) -> DataKey | None:
        known = self._keys.get(scope)
        if known is not None:
            return known
        slot, place = _key_slot(scope), Place("storage.data-key", scope)
        for _ in range(3):
            stored = await self.inner.get(slot)
            if stored is not None:
                key = self.cipher.unwrap(_slot_parts(stored, slot)[1], place)
                self._keys[scope] = key
                return key
            if not create:
                return None
            await self._mark()
            key = self.cipher.new_data_key()
            try:
                await self.inner.swap(slot, _slot_value(scope, self.cipher.wrap(key, place)), None)
            except CheckpointConflictError:
                continue  # another writer made it first: read theirs
            self._keys[scope] = key
            return key
        raise CheckpointConflictError(f"the data key of {scope!r} keeps changing; try again")

    async def _mark(self) -> None:
        if self._marked:
            return
        if await self.inner.get(MARKER_KEY) is None:
            place = Place("storage.marker", "")
            with contextlib.suppress(CheckpointConflictError):
                await self.inner.swap(MARKER_KEY, self.cipher.seal(b"sealed", place), None)
        self._marked = True

    async def forget_scope(self, scope: str) -> bool:
        """Destroy the data key of ``scope`` (``session/<sid>``): its values are lost.

        Every copy of what it sealed (values not yet deleted, journals, backups) becomes
        unreadable. ``True`` when there was a key to destroy.
        """
        validate_key(scope)
        self._keys.pop(scope, None)
        for key in [k for k in self._known if scope_of(k) == scope]:
            del self._known[key]
        slot = _key_slot(scope)
        existed = await self.inner.get(slot) is not None
        await self.inner.delete(slot)
        return existed

    # -- sealing -------------------------------------------------------------------------

    def _seal_value(self, key: str, data: bytes, dk: DataKey) -> tuple[bytes, bytes]:
        value_id = os.urandom(_VALUE_ID)
        return value_id, dk.seal(value_id + data, Place("storage.value", key))

    async def _open_value(self, key: str, sealed: bytes) -> tuple[bytes, bytes]:
        """(value id, plain bytes) of a stored value (STORE_INTEGRITY otherwise)."""
        place = Place("storage.value", key)
        if not is_sealed(sealed):
            self.cipher.open(sealed, place)  # raises: plain in an encrypted store
        dk = await self._data_key(scope_of(key), create=False)
        if dk is None:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under a data key that no longer exists "
                "(forgotten); left as it is"
            )
        raw = dk.open(sealed, place)
        if len(raw) < _VALUE_ID:
            raise StoreIntegrityError(f"{place.describe()} is truncated; left as it is")
        return raw[:_VALUE_ID], raw[_VALUE_ID:]

    @staticmethod
    def _record_place(key: str, value_id: bytes, index: int) -> Place:
        return Place("storage.record", key, f"{value_id.hex()}:{index}")

    # -- the Storage contract ------------------------------------------------------------

    async def put(self, key: str, data: bytes) -> None:
        """Seal ``data`` and store it under ``key`` (a new, empty log)."""
        validate_key(key)
        plain = _as_bytes(data)
        dk = await self._data_key(scope_of(key), create=True)
        assert dk is not None
        value_id, sealed = self._seal_value(key, plain, dk)
        await self.inner.put(key, sealed)
        self._known[key] = _Known(digest(plain), digest(sealed), value_id, 0)

    async def get(self, key: str) -> bytes | None:
        """The plain bytes under ``key`` (``None``: none; STORE_INTEGRITY: not authentic)."""
        validate_key(key)
        sealed = await self.inner.get(key)
        if sealed is None:
            return None
        return (await self._open_value(key, sealed))[1]

    async def delete(self, key: str) -> None:
        """Remove ``key`` and its log."""
        self._known.pop(key, None)
        await self.inner.delete(key)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Stored keys starting with ``prefix``, sorted (the cipher's own keys hidden)."""
        return [k for k in await self.inner.list(prefix) if not k.startswith(RESERVED)]

    async def list_after(self, prefix: str, after: str | None, limit: int) -> builtins.list[str]:
        """Up to ``limit`` keys after ``after`` (the wrapped storage's, or a filtered list)."""
        validate_prefix(prefix)
        ranged = getattr(self.inner, "list_after", None)
        if ranged is not None:
            keys: builtins.list[str] = await ranged(prefix, after, limit)
        else:
            keys = [k for k in await self.inner.list(prefix) if after is None or k > after]
            keys = keys[:limit]
        return [k for k in keys if not k.startswith(RESERVED)]

    async def count_after(self, prefix: str, after: str | None, before: str | None = None) -> int:
        """How many keys under ``prefix`` lie between ``after`` and ``before`` (exclusive).

        The wrapped storage's count, unless the range may hold the cipher's own keys
        (then a filtered list, as ``list`` shows them).
        """
        validate_prefix(prefix)
        counted = getattr(self.inner, "count_after", None)
        if counted is not None and not (RESERVED.startswith(prefix) or prefix.startswith(RESERVED)):
            found: int = await counted(prefix, after, before)
            return found
        return sum(
            1
            for k in await self.list(prefix)
            if (after is None or k > after) and (before is None or k < before)
        )

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The plain values of those ``keys`` that are stored."""
        many = getattr(self.inner, "get_many", None)
        if many is not None:
            found: dict[str, bytes] = await many(keys)
        else:
            values = await asyncio.gather(*(self.inner.get(k) for k in keys))
            found = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
        return {k: (await self._open_value(k, v))[1] for k, v in found.items()}

    # -- logs and compare-and-swap -------------------------------------------------------

    async def _read(self, key: str) -> tuple[bytes | None, builtins.list[bytes], _Known]:
        sealed, records, inner_tag = await self.inner.read_logged(key)
        if sealed is None:
            known = _Known(None, None, b"", 0)
            self._known[key] = known
            return None, [], known
        value_id, plain = await self._open_value(key, sealed)
        dk = self._keys[scope_of(key)]
        opened = [dk.open(r, self._record_place(key, value_id, i)) for i, r in enumerate(records)]
        tag = digest(plain) if not records else inner_tag
        known = _Known(tag, inner_tag, value_id, len(records))
        self._known[key] = known
        return plain, opened, known

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The plain value of ``key``, its plain records and its tag."""
        validate_key(key)
        plain, records, known = await self._read(key)
        return plain, records, known.tag

    async def _state(self, key: str, expected: str | None) -> _Known:
        """The stored state if it is the one tagged ``expected`` (CHECKPOINT_CONFLICT if not)."""
        known = self._known.get(key)
        if known is None or known.tag != expected:
            _plain, _records, known = await self._read(key)
        check_tag(key, known.tag, expected)
        return known

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """Seal and store ``data`` if ``key`` is still in the state tagged ``expected``."""
        validate_key(key)
        check_expected_tag(expected, optional=True)
        plain = _as_bytes(data)
        known = await self._state(key, expected)
        dk = await self._data_key(scope_of(key), create=True)
        assert dk is not None
        value_id, sealed = self._seal_value(key, plain, dk)
        try:
            await self.inner.swap(key, sealed, known.inner)
        except CheckpointConflictError:
            self._known.pop(key, None)
            raise
        self._known[key] = _Known(digest(plain), digest(sealed), value_id, 0)

    async def compare_and_put(self, key: str, data: bytes, *, expected: bytes | None) -> None:
        """Store ``data`` only if ``key`` holds exactly ``expected`` (``None``: nothing)."""
        if expected is not None and not isinstance(expected, bytes | bytearray | memoryview):
            raise ArgumentTypeError(
                f"expected must be bytes or None, not {type(expected).__name__}"
            )
        await self.swap(key, data, None if expected is None else digest(bytes(expected)))

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Seal and append ``record`` if ``key`` is still tagged ``expected``; the new tag."""
        validate_key(key)
        check_expected_tag(expected, optional=False)
        plain = _as_bytes(record)
        known = await self._state(key, expected)
        if known.inner is None:
            check_tag(key, None, expected)
        dk = self._keys[scope_of(key)]
        sealed = dk.seal(plain, self._record_place(key, known.value_id, known.records))
        assert known.inner is not None
        try:
            tag = await self.inner.append_logged(key, sealed, known.inner)
        except CheckpointConflictError:
            self._known.pop(key, None)
            raise
        self._known[key] = _Known(tag, tag, known.value_id, known.records + 1)
        return tag

    # -- rotation ------------------------------------------------------------------------

    async def is_marked(self) -> bool:
        """Whether the storage is marked encrypted (then a plain value is never migrated)."""
        return await self.inner.get(MARKER_KEY) is not None

    async def mark(self) -> None:
        """Mark the storage encrypted (what :meth:`rotate` does once it is done)."""
        self._marked = False
        await self._mark()

    async def rotate(self, *, migrate: bool | None = None, mark: bool = True) -> int:
        """Seal every data key under ``cipher.current``, and migrate plain values.

        Data keys sealed under an older key are re-sealed (a compare-and-swap each, so a
        concurrent writer is never overwritten; running it again after a crash finishes
        the job); the values they seal need no change. When ``migrate`` (default: the
        storage is not marked encrypted, i.e. it was written without ``cipher=``), each
        plain value is sealed in place; otherwise a plain value is left as it is (and
        reads as ``STORE_INTEGRITY``). ``mark``: mark the storage encrypted when done.
        The number of values written.
        """
        if migrate is None:
            migrate = not await self.is_marked()
        written = 0
        for slot in await self.inner.list(RESERVED + "keys/"):
            written += await self._rotate_slot(slot)
        if migrate:
            for key in await self.list():
                written += await self._migrate(key)
        if mark:
            await self.mark()
        return written

    async def _rotate_slot(self, slot: str) -> int:
        stored, _records, tag = await self.inner.read_logged(slot)
        if stored is None:
            return 0
        scope, sealed = _slot_parts(stored, slot)
        again = self.cipher.reseal(sealed, Place("storage.data-key", scope))
        if again is None:
            return 0
        try:
            await self.inner.swap(slot, _slot_value(scope, again), tag)
        except CheckpointConflictError:
            return 0  # rewritten meanwhile (by another rotate): nothing lost
        return 1

    async def _migrate(self, key: str) -> int:
        sealed, records, tag = await self.inner.read_logged(key)
        if sealed is None or is_sealed(sealed):
            return 0
        # A plain value and its plain log: fold nothing, seal both in one new value when
        # there is no log; a logged plain value keeps its records sealed after it.
        dk = await self._data_key(scope_of(key), create=True)
        assert dk is not None
        value_id, new = self._seal_value(key, sealed, dk)
        try:
            await self.inner.swap(key, new, tag)
            inner_tag = digest(new)
            for i, record in enumerate(records):
                place = self._record_place(key, value_id, i)
                inner_tag = await self.inner.append_logged(key, dk.seal(record, place), inner_tag)
        except CheckpointConflictError:
            return 0  # rewritten meanwhile: by a sealed write, or the next rotate() sees it
        self._known.pop(key, None)
        return 1


def _slot_value(scope: str, wrapped: bytes) -> bytes:
    """A data key's stored form: its scope (plain, like every key) and the wrapped key."""
    return scope.encode("ascii") + b"\n" + wrapped


def _slot_parts(stored: bytes, slot: str) -> tuple[str, bytes]:
    scope, sep, wrapped = stored.partition(b"\n")
    try:
        name = scope.decode("ascii")
    except UnicodeDecodeError:
        name = ""
    if not sep or not name or _key_slot(name) != slot:
        raise StoreIntegrityError(f"the data key at {slot!r} is damaged or moved; left as it is")
    return name, wrapped


def _as_bytes(data: object) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ArgumentTypeError(f"data must be bytes, not {type(data).__name__}")
    return bytes(data)
