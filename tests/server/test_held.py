"""``HeldCheckpointer``: the run's own thread is not locked again; another's lock keeps its wait.

The lock of another thread once dropped ``timeout=``: a caller asking not to wait
(``timeout=0``) waited the inner checkpointer's ``lock_timeout`` (``None``: for ever).
"""

from __future__ import annotations

import pytest

from async_helper import arun
from framework_agents import InMemoryCheckpointer
from framework_agents.checkpoint._base import hold_thread
from framework_agents.errors import ThreadBusyError
from framework_agents.server._held import HeldCheckpointer, timed_lock

#: A bound on each scenario, so a lock that waits for ever fails the test instead of hanging it.
GUARD = 30.0


def test_another_threads_lock_waits_the_timeout_given() -> None:
    inner = InMemoryCheckpointer(lock_timeout=None)  # its own wait: for ever

    async def scenario() -> None:
        async with hold_thread(inner, "run") as held:
            view = HeldCheckpointer(inner, "run", held)
            async with inner.thread_lock("other"):  # another run holds "other"
                with pytest.raises(ThreadBusyError) as busy:
                    async with view.thread_lock("other", timeout=0):
                        pass
                assert busy.value.code == "THREAD_BUSY"
            async with view.thread_lock("other", timeout=0):  # free again: taken at once
                with pytest.raises(ThreadBusyError):
                    async with inner.thread_lock("other", timeout=0):
                        pass

    arun(scenario(), timeout=GUARD)


def test_the_held_thread_is_not_locked_again() -> None:
    inner = InMemoryCheckpointer(lock_timeout=None)

    async def scenario() -> None:
        async with hold_thread(inner, "run") as held:
            view = HeldCheckpointer(inner, "run", held)
            async with view.thread_lock("run", timeout=0), view.thread_lock("run"):
                with pytest.raises(ThreadBusyError):  # still the caller's hold
                    async with inner.thread_lock("run", timeout=0):
                        pass

    arun(scenario(), timeout=GUARD)


class _Untimed:
    """A checkpointer whose lock takes no ``timeout=`` (a third party's, say)."""

    def __init__(self) -> None:
        self.inner = InMemoryCheckpointer(lock_timeout=None)
        self.locked: list[str] = []

    def thread_lock(self, thread_id: str) -> object:
        self.locked.append(thread_id)
        return self.inner.thread_lock(thread_id)


def test_a_lock_without_timeout_is_taken_as_it_is() -> None:
    untimed = _Untimed()

    async def scenario() -> None:
        async with timed_lock(untimed, "t", 0):
            pass

    arun(scenario(), timeout=GUARD)
    assert untimed.locked == ["t"]
