"""Small internal helpers shared across the package (not public API)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

__all__ = ["call_maybe_async", "maybe_await"]

T = TypeVar("T")


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable, else return it (the one place we normalise)."""
    if inspect.isawaitable(value):
        return await cast(Awaitable[T], value)
    return value


async def call_maybe_async(fn: Callable[..., T | Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Call a sync or async callable and return its (awaited) result."""
    return await maybe_await(fn(*args, **kwargs))
