"""``run_blocking``: blocking work in a worker thread that a cancel cannot cut in half."""

from __future__ import annotations

import asyncio
import threading

import pytest

from async_helper import arun
from framework_agents._persist._io import run_blocking


def test_the_result_and_the_error_of_the_work_reach_the_caller() -> None:
    def fail() -> None:
        raise OSError(5, "EIO")

    async def main() -> None:
        assert await run_blocking(lambda a, b: a + b, 2, 3) == 5
        assert await run_blocking(threading.get_ident) != threading.get_ident()
        with pytest.raises(OSError, match="EIO") as info:
            await run_blocking(fail)
        assert info.value.errno == 5

    arun(main())


class _Gated:
    """Work that signals it started, then blocks until ``go_on`` is set (then logs)."""

    def __init__(self, result: str = "lock", error: OSError | None = None) -> None:
        self.started, self.go_on = threading.Event(), threading.Event()
        self.log: list[str] = []
        self.result, self.error = result, error

    def __call__(self) -> str:
        self.started.set()
        self.go_on.wait(10)
        if self.error is not None:
            raise self.error
        self.log.append("done")
        return self.result


def test_a_cancel_waits_for_the_work_then_undoes_it() -> None:
    work = _Gated()
    undone = threading.Event()

    def undo(result: str) -> None:
        work.log.append(f"undo {result}")
        undone.set()

    async def main() -> None:
        task = asyncio.create_task(run_blocking(work, undo=undo))
        await asyncio.to_thread(work.started.wait, 10)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # still waiting for the work
        work.go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(undone.wait, 10)
        assert work.log == ["done", "undo lock"]

    arun(main())


def test_a_cancel_of_failed_work_undoes_nothing_and_cancels() -> None:
    work = _Gated(error=OSError(28, "ENOSPC"))

    async def main() -> None:
        task = asyncio.create_task(run_blocking(work, undo=lambda r: work.log.append("undo")))
        await asyncio.to_thread(work.started.wait, 10)
        task.cancel()
        work.go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await run_blocking(lambda: "after") == "after"  # the pool's queue is drained
        assert work.log == []

    arun(main())


def test_repeated_cancels_and_a_timeout_still_wait_for_the_work() -> None:
    work = _Gated()

    async def main() -> None:
        async def timed() -> None:
            async with asyncio.timeout(0):
                await run_blocking(work)

        task = asyncio.create_task(timed())
        await asyncio.to_thread(work.started.wait, 10)
        for _ in range(3):
            task.cancel()
            await asyncio.sleep(0)
        work.go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert work.log == ["done"]

    arun(main())


def test_a_timeout_alone_becomes_timeout_error_after_the_work() -> None:
    work = _Gated()

    async def main() -> None:
        async def release_later() -> None:
            await asyncio.to_thread(work.started.wait, 10)
            for _ in range(5):  # the timeout's cancel is delivered by now (call_soon)
                await asyncio.sleep(0)
            work.go_on.set()

        helper = asyncio.create_task(release_later())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):  # expires at the first suspension
                await run_blocking(work)
        await helper
        assert work.log == ["done"]

    arun(main())
