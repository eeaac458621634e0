"""Draining an event stream that ends in an interrupt: one helper for agents and swarms."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import TypeVar

from ..hitl import HitlInterrupt

__all__ = ["until_interrupt"]

E = TypeVar("E")


async def until_interrupt(events: AsyncGenerator[E, None]) -> AsyncGenerator[E, None]:
    """``events``, ending quietly on an interrupt (its event was the last one yielded).

    ``events`` is closed when this ends or is closed: a consumer that stops early (and
    closes this, ``contextlib.aclosing``) frees an agent or swarm and its thread at once,
    not when the garbage collector finds them.
    """
    async with contextlib.aclosing(events):
        try:
            async for event in events:
                yield event
        except HitlInterrupt:
            return
