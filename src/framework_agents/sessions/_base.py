"""The storage contract: four async methods that move bytes under validated keys.

One optional capability, detected by :func:`swap`: ``swap(key, data, expected)``, a
compare-and-swap that stores ``data`` only if the value under ``key`` is still the one
whose :func:`digest` is ``expected`` (``None``: no value), atomically with respect to every
writer of the storage (across processes for ``LocalFileStorage``), and raises
``CHECKPOINT_CONFLICT`` otherwise, writing nothing. ``SessionManager.save_latest`` uses it
so that a writer that did not see the latest update is refused instead of overwriting it.
A storage without it (a third-party one) gets a plain ``put``: last writer wins there.
"""

from __future__ import annotations

import builtins
import hashlib
from typing import Any, Protocol, runtime_checkable

from ..errors import CheckpointConflictError, InvalidArgumentError

__all__ = ["ArgumentTypeError", "Storage", "check_swap", "check_tag", "digest", "swap"]


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


def digest(data: bytes) -> str:
    """The digest ``swap`` compares: blake2b-128 of the bytes, as hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def check_swap(key: str, current: bytes | None, expected: str | None) -> None:
    """``CHECKPOINT_CONFLICT`` unless ``current`` is the value ``expected`` names."""
    check_tag(key, None if current is None else digest(current), expected)


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
