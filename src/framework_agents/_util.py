"""Small internal helpers shared across the package (not public API)."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeGuard, TypeVar, cast

__all__ = ["as_utc", "call_maybe_async", "implements", "maybe_await"]

T = TypeVar("T")


def as_utc(value: datetime, what: str) -> datetime:
    """``value`` in UTC; ``ValueError`` (a validation error) when UTC cannot hold it.

    ``0001-01-01T00:00:00+01:00`` is before the first UTC datetime: ``astimezone`` raises
    a bare ``OverflowError``, which pydantic would not turn into a validation error.
    """
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{what} {value.isoformat()} has no UTC equivalent") from None


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable, else return it (the one place we normalise)."""
    if inspect.isawaitable(value):
        return await cast(Awaitable[T], value)
    return value


async def call_maybe_async(fn: Callable[..., T | Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Call a sync or async callable and return its (awaited) result."""
    return await maybe_await(fn(*args, **kwargs))


#: Per class, per protocol: whether its instances implement it.
_IMPLEMENTS: weakref.WeakKeyDictionary[type, dict[Any, bool]] = weakref.WeakKeyDictionary()


def implements(obj: object, protocol: Any) -> TypeGuard[Any]:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol, cached per class.

    A protocol check looks up every member on every call (several microseconds each,
    several per run); a store's capabilities are those of its class. Not cached for a
    class whose instances answer attributes themselves (``__getattr__``: a proxy's
    capabilities are its target's).
    """
    cls = type(obj)
    known = _IMPLEMENTS.get(cls)
    if known is not None and protocol in known:
        return known[protocol]
    found = isinstance(obj, protocol)
    if getattr(cls, "__getattr__", None) is None:
        _IMPLEMENTS.setdefault(cls, {})[protocol] = found
    return found
