"""A thread-lock waiter cancelled while its attempt is in flight leaves no lock held.

The database may take the lock for the cancelled waiter all the same (a SQLite
transaction its worker thread commits after the cancel, a Redis script already sent):
nobody would release it before its lease ran out, and every other run would get
THREAD_BUSY meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from framework_agents.stores import SqliteCheckpointer
from framework_agents.stores._lease import LeaseLocks


def test_a_lock_taken_by_a_cancelled_attempt_is_released() -> None:
    taken: dict[str, str] = {}
    released: list[tuple[str, str]] = []

    async def body() -> None:
        attempt = asyncio.Event()

        async def try_acquire(thread_id: str, owner: str) -> int | None:
            taken[thread_id] = owner  # the database took it...
            attempt.set()
            await asyncio.Event().wait()  # ...and the answer never comes back in time
            return 1

        async def release(thread_id: str, owner: str) -> None:
            released.append((thread_id, owner))
            if taken.get(thread_id) == owner:
                del taken[thread_id]

        async def renew(thread_id: str, owner: str) -> bool:
            return True

        locks = LeaseLocks(lease=30.0, try_acquire=try_acquire, renew=renew, release=release)

        async def run() -> None:
            async with locks.hold("t1", None):
                raise AssertionError("not reached")

        task = asyncio.create_task(run())
        await attempt.wait()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the waiter was not cancelled")

    asyncio.run(body())
    assert taken == {}
    assert len(released) == 1 and released[0][0] == "t1"


def test_sqlite_waiter_cancelled_in_the_busy_handler_leaves_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "a.db"

    async def body() -> None:
        cp = SqliteCheckpointer(path, lease=30.0, lock_timeout=5.0)
        other = SqliteCheckpointer(path, lease=30.0)
        try:
            await cp.list_threads()  # the schema
            blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            blocker.execute("BEGIN IMMEDIATE")  # the attempt waits in SQLite's busy handler
            real = cp._locks.try_acquire
            in_flight = asyncio.Event()

            async def attempt(thread_id: str, owner: str) -> int | None:
                in_flight.set()
                return await real(thread_id, owner)

            cp._locks.try_acquire = attempt

            async def waiter() -> None:
                async with cp.thread_lock("t1"):
                    raise AssertionError("not reached")

            task = asyncio.create_task(waiter())
            await in_flight.wait()
            await asyncio.sleep(0)  # the attempt is handed to the database thread
            task.cancel()
            blocker.execute("ROLLBACK")  # the attempt now commits the lock row
            blocker.close()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            async with other.thread_lock("t1", timeout=0):
                pass  # free: THREAD_BUSY here was the defect
        finally:
            await cp.close()
            await other.close()

    asyncio.run(body())


def test_a_cancel_during_the_release_does_not_stop_it() -> None:
    """A run cancelled twice, the second time while it releases its thread: the release
    still happens (it could stop half-way, the lock held until its lease ran out)."""
    state: dict[str, str] = {}

    async def body() -> None:
        releasing = asyncio.Event()
        finish = asyncio.Event()

        async def try_acquire(thread_id: str, owner: str) -> int | None:
            state[thread_id] = owner
            return 1

        async def release(thread_id: str, owner: str) -> None:
            releasing.set()
            await finish.wait()  # a slow round trip
            if state.get(thread_id) == owner:
                del state[thread_id]

        async def renew(thread_id: str, owner: str) -> bool:
            return True

        locks = LeaseLocks(lease=30.0, try_acquire=try_acquire, renew=renew, release=release)
        inside = asyncio.Event()

        async def run() -> None:
            async with locks.hold("t1", None):
                inside.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(run())
        await inside.wait()
        task.cancel()  # the first cancel: the block ends, the release begins
        await releasing.wait()
        task.cancel()  # the second, while the release waits for its answer
        with contextlib.suppress(asyncio.CancelledError):
            await task
        finish.set()
        for _ in range(10):
            await asyncio.sleep(0)

    asyncio.run(body())
    assert state == {}


def test_a_misspelt_setting_names_the_checkpointer_and_its_settings(tmp_path: Path) -> None:
    settings: dict[str, Any] = {"lock_timout": 5}
    with pytest.raises(TypeError, match=r"SqliteCheckpointer\(\) .* 'lock_timout' .*lock_timeout"):
        SqliteCheckpointer(tmp_path / "c.db", **settings)
