"""The storage contract: four async methods that move bytes under validated keys."""

from __future__ import annotations

import builtins
from typing import Protocol, runtime_checkable

from ..errors import InvalidArgumentError

__all__ = ["ArgumentTypeError", "Storage"]


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
