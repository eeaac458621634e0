"""Draining an event stream that ends in an interrupt: one helper for agents and swarms."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

from ..hitl import HitlInterrupt

__all__ = ["until_interrupt"]

E = TypeVar("E")


async def until_interrupt(start: Callable[[], AsyncGenerator[E, None]]) -> AsyncGenerator[E, None]:
    """The events of ``start()``, ending quietly on an interrupt (its event was the last one).

    ``start`` is called at the first ``__anext__``: a stream's arguments are checked when
    it is first iterated, and a stream closed before that runs nothing. The events are
    closed when this ends or is closed: a consumer that stops early (and closes this,
    ``contextlib.aclosing``) frees an agent or swarm and its thread at once, not when the
    garbage collector finds them.
    """
    events = start()
    async with contextlib.aclosing(events):
        try:
            async for event in events:
                yield event
        except HitlInterrupt:
            return
