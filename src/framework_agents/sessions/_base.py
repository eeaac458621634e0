"""The storage contract: four async methods that move bytes under validated keys.

One optional capability, detected by :func:`swap`: ``swap(key, data, expected)``, a
compare-and-swap that stores ``data`` only if the value under ``key`` is still the one
whose :func:`digest` is ``expected`` (``None``: no value; on a :class:`LoggedStorage`,
the value's tag), atomically with respect to every
writer of the storage (across processes and machines where the storage is shared), and raises
``CHECKPOINT_CONFLICT`` otherwise, writing nothing. ``SessionManager.save_latest`` uses it
so that a writer that did not see the latest update is refused instead of overwriting it.
A storage without it (a third-party one) gets a plain ``put``: last writer wins there.

A second one, :class:`LoggedStorage` (``swap`` plus ``read_logged``/``append_logged``,
described in ``sessions._log``), lets a writer append a record to a value instead of
storing it again; :func:`as_logged` detects it. Every shipped storage has both.

The storage-key rules (``_keys``: ``validate_key``, ``validate_prefix``,
``is_valid_segment``) are part of the contract: every storage backend, here or in
``stores/``, checks keys with them. So are the rules for merging a session's history and
state with a newer stored one (``_merge``: ``merge_messages``, ``merge_state``), which
the agent's session sync applies.
"""

from __future__ import annotations

import builtins
import hashlib
from typing import Any, Protocol, runtime_checkable

from ..errors import CheckpointConflictError, InvalidArgumentError
from ._keys import is_valid_segment, validate_key, validate_prefix
from ._merge import merge_messages, merge_state

__all__ = [
    "ArgumentTypeError",
    "CompareAndPut",
    "LoggedStorage",
    "Storage",
    "as_logged",
    "check_expected_tag",
    "check_tag",
    "digest",
    "is_valid_segment",
    "merge_messages",
    "merge_state",
    "swap",
    "validate_key",
    "validate_prefix",
]


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """A wrong-typed argument: ``INVALID_ARGUMENT``, and still a ``TypeError`` as before."""


@runtime_checkable
class Storage(Protocol):
    """A byte store addressed by ``/``-separated keys (see ``sessions._keys`` for the rules).

    Every method raises ``STORAGE_KEY_INVALID`` for a key (or prefix) that breaks the key
    rules, before touching anything. A key names either a stored value or a "directory"
    of other keys, never both: storing ``a`` while ``a/b`` exists (or the reverse) raises
    ``STORAGE_KEY_INVALID`` too, the same in every backend.
    """

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing any earlier value atomically."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or ``None`` when there are none."""
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key``; removing a missing key is a no-op."""
        ...

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Every stored key that starts with ``prefix`` (a plain string prefix), sorted."""
        ...


@runtime_checkable
class LoggedStorage(Storage, Protocol):
    """A :class:`Storage` that also keeps a log of records appended to a value.

    The *tag* of a value names its state: the :func:`digest` of the value while it has
    no records, something else (storage-defined, never reused) once it has. Storing a
    value (``put``, ``swap``) starts a new, empty log; ``delete`` removes both.
    """

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """Store ``data`` if ``key`` is still in the state tagged ``expected``.

        ``expected`` ``None`` means no value; otherwise ``CHECKPOINT_CONFLICT`` and
        nothing is written.
        """
        ...

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The value of ``key``, the records appended since it was stored, and its tag."""
        ...

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Append ``record`` if ``key`` is still in the state tagged ``expected``.

        Returns the new tag; ``CHECKPOINT_CONFLICT`` (nothing written) otherwise.
        """
        ...


class CompareAndPut:
    """``compare_and_put`` for a storage with ``swap`` (every shipped storage)."""

    async def compare_and_put(
        self: LoggedStorage, key: str, data: bytes, *, expected: bytes | None
    ) -> None:
        """Store ``data`` only if ``key`` holds exactly ``expected`` (``None``: nothing).

        Otherwise CHECKPOINT_CONFLICT and nothing is written, so a read-modify-write
        loop on a value shared by several writers never loses an acknowledged update. A
        value with records appended to it (``append_logged``) holds more than its bytes:
        it matches no ``expected``.
        """
        if expected is not None and not isinstance(expected, bytes | bytearray | memoryview):
            raise ArgumentTypeError(
                f"expected must be bytes or None, not {type(expected).__name__}"
            )
        await self.swap(key, data, None if expected is None else digest(bytes(expected)))


def as_logged(storage: Storage) -> LoggedStorage | None:
    """``storage`` when it keeps logs (:class:`LoggedStorage`), else ``None``."""
    return storage if isinstance(storage, LoggedStorage) else None


def digest(data: bytes) -> str:
    """The digest ``swap`` compares: blake2b-128 of the bytes, as hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def check_expected_tag(expected: object, *, optional: bool) -> None:
    """INVALID_ARGUMENT unless ``expected`` is a tag (a str; ``None`` when ``optional``)."""
    if expected is None and optional:
        return
    if not isinstance(expected, str):
        raise ArgumentTypeError(
            f"expected must be a tag (str){' or None' if optional else ''}, "
            f"not {type(expected).__name__}"
        )


def check_tag(key: str, found: str | None, expected: str | None) -> None:
    """``CHECKPOINT_CONFLICT`` unless the state tagged ``found`` is the one ``expected``."""
    if found != expected:
        seen = "no value" if expected is None else "another value"
        now = "none" if found is None else "a newer one"
        raise CheckpointConflictError(
            f"{key!r} changed since it was read (the writer expected {seen}, the storage "
            f"holds {now}); nothing was written: read it again, then write"
        )


async def swap(storage: Storage, key: str, data: bytes, expected: str | None) -> None:
    """``storage.swap(key, data, expected)`` when the storage has it, else ``put``."""
    method: Any = getattr(storage, "swap", None)
    if callable(method):
        await method(key, data, expected)
    else:
        await storage.put(key, data)
