"""The one async helper of the tests (run a coroutine to completion in a fresh loop),
and ``some``: a value that must be there (a loaded checkpoint), narrowed for the type checker."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["arun", "some"]

T = TypeVar("T")


def arun(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """``asyncio.run(coro)``, bounded by ``timeout`` seconds when given."""
    if timeout is None:
        return asyncio.run(coro)
    return asyncio.run(asyncio.wait_for(coro, timeout))


def some(value: T | None) -> T:
    """``value``, which the test expects to be there (fails the test when it is ``None``)."""
    assert value is not None
    return value
