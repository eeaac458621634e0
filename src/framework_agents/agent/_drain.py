"""Draining and closing event streams: one set of helpers for agents and swarms."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

from ..hitl import HitlInterrupt

__all__ = ["aclose_events", "finished_event", "until_interrupt"]

E = TypeVar("E")
F = TypeVar("F")


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


async def finished_event(events: AsyncGenerator[object, None], finished: type[F]) -> F:
    """The last ``finished`` event of a driver's ``events``, drained and then closed.

    An interrupt or an error of the driver propagates; a driver that ends without a
    ``finished`` event is a bug (it ends with one or raises).
    """
    last: F | None = None
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, finished):
                last = event
    assert last is not None  # the driver ends with its finished event or raises
    return last


async def aclose_events(events: object) -> None:
    """Close ``events`` now if it can be closed (an async generator): its run ends here."""
    aclose = getattr(events, "aclose", None)
    if callable(aclose):
        await aclose()
