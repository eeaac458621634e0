"""Small internal helpers shared across the package (not public API)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard, TypeVar, cast

__all__ = ["call_maybe_async", "implements", "maybe_await"]

T = TypeVar("T")


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable, else return it (the one place we normalise)."""
    if inspect.isawaitable(value):
        return await cast(Awaitable[T], value)
    return value


async def call_maybe_async(fn: Callable[..., T | Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Call a sync or async callable and return its (awaited) result."""
    return await maybe_await(fn(*args, **kwargs))


_IMPLEMENTS: dict[tuple[type, type], bool] = {}


def implements(obj: object, protocol: Any) -> TypeGuard[Any]:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol, cached per class.

    A protocol check looks up every member on every call (several microseconds each,
    several per run); a store's capabilities are those of its class.
    """
    key = (type(obj), protocol)
    known = _IMPLEMENTS.get(key)
    if known is None:
        known = _IMPLEMENTS[key] = isinstance(obj, protocol)
    return known
