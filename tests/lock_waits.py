"""Test helpers for lock waits: see when a wait began, cancel a call while it waits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine

import pytest

import framework_agents._persist._locks as locks_module
from framework_agents._persist._io import wait_or_stop

__all__ = ["cancel_while_waiting", "wait_began"]


def wait_began(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set once a lock wait found the lock busy and began to wait."""
    seen = threading.Event()

    def watched(event: threading.Event, seconds: float | None) -> bool:
        seen.set()
        return wait_or_stop(event, seconds)

    monkeypatch.setattr(locks_module, "wait_or_stop", watched)
    return seen


async def cancel_while_waiting(
    call: Callable[[], Coroutine[object, object, object]], began: threading.Event
) -> None:
    """Start ``call()``, cancel it once its lock wait began; it must end, cancelled.

    The holder never lets go meanwhile: a wait a cancel cannot end would hang here (10 s).
    """
    task = asyncio.create_task(call())
    await asyncio.to_thread(began.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(task), 10)
