"""with_file_lock: exclusion across tasks, threads and processes; timeouts; cancellation;
the lock and a read or a call in one hand-off. Reclaiming a dead or stale lock (proof of
death, the degraded no-flock mode) is in test_checkpoint_lock_reclaim.py."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from lock_support import Child, no_flock

from async_helper import arun
from framework_agents.checkpoint import lock as lock_module
from framework_agents.checkpoint import lock_holder, with_file_lock
from framework_agents.errors import AgentError, InvalidArgumentError, LockTimeoutError

# -- basics ---------------------------------------------------------------------------


def test_lock_file_exists_with_a_record_while_held_and_is_removed_after(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    async def main() -> None:
        async with with_file_lock(path):
            info = lock_holder(path)
            assert info is not None
            assert info["pid"] == os.getpid()
            assert info["host"] == socket.gethostname()
            assert len(info["token"]) == 32
            assert abs(info["acquired_at"] - time.time()) < 60
        assert not path.exists()
        assert lock_holder(path) is None

    arun(main())


def test_tasks_of_one_process_are_exclusive_and_fifo(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    order: list[int] = []
    inside = 0
    worst = 0

    async def worker(i: int) -> None:
        nonlocal inside, worst
        async with with_file_lock(path):
            inside += 1
            worst = max(worst, inside)
            order.append(i)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            inside -= 1

    async def main() -> None:
        async with with_file_lock(path):
            tasks = [asyncio.create_task(worker(i)) for i in range(20)]
            await asyncio.sleep(0)  # let every task queue up behind us (FIFO)
        await asyncio.gather(*tasks)

    arun(main())
    assert worst == 1
    assert order == list(range(20))


def test_event_loops_in_threads_exclude_each_other_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    guard = threading.Lock()
    state = {"inside": 0, "worst": 0, "done": 0}

    async def loop_main() -> None:
        for _ in range(30):
            async with with_file_lock(path):
                with guard:
                    state["inside"] += 1
                    state["worst"] = max(state["worst"], state["inside"])
                await asyncio.sleep(0.001)
                with guard:
                    state["inside"] -= 1
                    state["done"] += 1

    threads = [threading.Thread(target=asyncio.run, args=(loop_main(),)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert state == {"inside": 0, "worst": 1, "done": 90}


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        pytest.param({"timeout": -1}, "timeout", id="negative-timeout"),
        pytest.param({"timeout": float("nan")}, "timeout", id="nan-timeout"),
        pytest.param({"stale_after": 0}, "stale_after", id="zero-stale"),
    ],
)
def test_bad_arguments_are_invalid_argument(
    tmp_path: Path, kwargs: dict[str, float], needle: str
) -> None:
    async def main() -> None:
        async with with_file_lock(tmp_path / "a.lock", **kwargs):
            pass

    with pytest.raises(InvalidArgumentError, match=needle) as err:
        arun(main())
    assert err.value.code == "INVALID_ARGUMENT"


def test_missing_directory_is_an_os_error_not_a_hang(tmp_path: Path) -> None:
    async def main() -> None:
        async with with_file_lock(tmp_path / "nope" / "a.lock", timeout=1):
            pass

    with pytest.raises(FileNotFoundError):
        arun(main())


def test_a_symlink_at_the_lock_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not a lock")
    (tmp_path / "a.lock").symlink_to(target)

    async def main() -> None:
        async with with_file_lock(tmp_path / "a.lock", timeout=1):
            pass

    with pytest.raises(InvalidArgumentError, match="symlink"):
        arun(main())
    assert target.read_text() == "not a lock"


def test_two_spellings_of_one_directory_are_one_lock(tmp_path: Path) -> None:
    # The directory is reached as spelled (the kernel follows its symlinks): a second
    # spelling queues apart in the process but still waits for the holder through the
    # file, and finds the lock file at the real place.
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)

    async def main() -> None:
        async with with_file_lock(real / "x.lock", timeout=5):
            with pytest.raises(LockTimeoutError):
                async with with_file_lock(tmp_path / "link" / "x.lock", timeout=0.2):
                    pass
        async with with_file_lock(tmp_path / "link" / "x.lock", timeout=5):
            assert (real / "x.lock").exists()
            assert not (tmp_path / "link" / "x.lock").is_symlink()
        assert not (real / "x.lock").exists()

    arun(main())


def test_a_directory_symlink_swapped_while_held_leaves_a_lock_to_take_over(
    tmp_path: Path,
) -> None:
    # The directory is not resolved once: the release finds another inode at the path
    # (the new target's), leaves it alone, and the old file (its kernel lock gone) is
    # taken over by the next holder.
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "x.lock").write_text("someone else's file")
    link = tmp_path / "link"
    link.symlink_to(first)

    async def main() -> None:
        async with with_file_lock(link / "x.lock", timeout=1):
            assert (first / "x.lock").exists()
            link.unlink()
            link.symlink_to(second)
        assert (second / "x.lock").read_text() == "someone else's file"
        assert (first / "x.lock").exists()  # left behind, unheld
        async with with_file_lock(first / "x.lock", timeout=0):
            holder = lock_holder(first / "x.lock")
            assert holder is not None and holder["pid"] == os.getpid()
        assert not (first / "x.lock").exists()

    arun(main())


# -- a lock and a read in one hand-off (hold_file_lock) ----------------------------------


def test_hold_file_lock_runs_then_under_the_lock_and_yields_its_result(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    seen: list[bool] = []

    def then() -> str:
        seen.append(path.exists() and lock_holder(path) is not None)
        return "read"

    async def main() -> None:
        async with lock_module.hold_file_lock(path, 1, then=then) as hold:
            assert hold.value == "read"
            with pytest.raises(LockTimeoutError):
                async with with_file_lock(path, timeout=0):
                    pass
        assert not path.exists()
        async with lock_module.hold_file_lock(path, 0) as hold:
            assert hold.value is None

    arun(main())
    assert seen == [True]


def test_a_last_write_lets_the_held_lock_go_in_its_own_hand_off(
    tmp_path: Path, children: list[Child]
) -> None:
    held, write = tmp_path / "run.lock", tmp_path / "write.lock"
    calls: list[str] = []

    def last_write() -> str:
        calls.append("write")
        assert held.exists() and write.exists()  # both held while it runs
        return "written"

    async def main() -> None:
        async with lock_module.hold_file_lock(held, 1) as hold:
            result = await lock_module.call_with_file_lock(write, last_write, release=hold)
            assert result == "written" and hold.released
            assert not held.exists() and not write.exists()
            other = Child("hold", str(held))  # another process takes it at once
            children.append(other)
            await asyncio.to_thread(other.expect, "held")
            other.send("release")
            await asyncio.to_thread(other.expect, "released")
        async with with_file_lock(held, timeout=0):  # and this process after the block
            pass

    arun(main())
    assert calls == ["write"]


def test_a_failed_last_write_keeps_the_lock_until_the_block_ends(tmp_path: Path) -> None:
    held, write = tmp_path / "run.lock", tmp_path / "write.lock"

    def failing() -> None:
        raise OSError(errno.EIO, "simulated write error")

    async def main() -> None:
        async with lock_module.hold_file_lock(held, 1) as hold:
            with pytest.raises(OSError, match="simulated"):
                await lock_module.call_with_file_lock(write, failing, release=hold)
            assert not hold.released and held.exists()
            with pytest.raises(LockTimeoutError):
                async with with_file_lock(held, timeout=0):
                    pass
        assert not held.exists()

    arun(main())


def test_a_last_write_that_waits_for_its_lock_keeps_the_held_one(
    tmp_path: Path, children: list[Child]
) -> None:
    # The slow path (another process holds the write lock): the write happens after
    # waiting, and the held lock is let go at the block's end, never before.
    held, write = tmp_path / "run.lock", tmp_path / "write.lock"
    other = Child("hold", str(write))
    children.append(other)
    other.expect("held")
    order: list[str] = []

    def last_write() -> None:
        order.append("write")

    async def main() -> None:
        async with lock_module.hold_file_lock(held, 1) as hold:
            task = asyncio.create_task(
                lock_module.call_with_file_lock(write, last_write, timeout=10, release=hold)
            )
            for _ in range(20):
                await asyncio.sleep(0.005)  # it polls the busy lock meanwhile
            assert not task.done() and order == []
            other.send("release")
            await task
            assert order == ["write"] and not hold.released and held.exists()
        assert not held.exists()

    arun(main())
    other.expect("released")
    assert other.finish() == 0


def test_hold_file_lock_releases_when_then_fails(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    def then() -> None:
        raise OSError(errno.EIO, "simulated read error")

    async def main() -> None:
        with pytest.raises(OSError, match="simulated"):
            async with lock_module.hold_file_lock(path, 1, then=then):
                raise AssertionError("the block must not run")
        assert not path.exists()
        async with with_file_lock(path, timeout=0):
            pass

    arun(main())


def test_a_cancel_during_hold_file_lock_gives_back_the_lock_then_took(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    in_then = threading.Event()
    go_on = threading.Event()

    def then() -> str:
        in_then.set()
        go_on.wait(10)
        return "read"

    async def hold() -> None:
        async with lock_module.hold_file_lock(path, 30, then=then):
            raise AssertionError("a cancelled holder's block must not run")

    async def main() -> None:
        task = asyncio.create_task(hold())
        await asyncio.to_thread(in_then.wait, 10)
        assert path.exists()
        task.cancel()
        await asyncio.sleep(0)
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    arun(main())
    deadline = time.monotonic() + 5
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the undo runs on the I/O pool right after the cancel
    assert not path.exists()


# -- timeouts ---------------------------------------------------------------------------


def test_timeout_in_process_is_lock_timeout(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    async def main() -> None:
        async with with_file_lock(path):
            started = time.monotonic()
            with pytest.raises(LockTimeoutError) as err:
                async with with_file_lock(path, timeout=0.2):
                    pass
            assert 0.15 <= time.monotonic() - started < 5
            assert err.value.code == "LOCK_TIMEOUT"
            assert isinstance(err.value, AgentError)

    arun(main())


def test_timeout_zero_tries_once(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    async def main() -> None:
        async with with_file_lock(path, timeout=0):
            with pytest.raises(LockTimeoutError):
                async with with_file_lock(path, timeout=0):
                    pass

    arun(main())


def test_timeout_across_processes_names_the_holder(tmp_path: Path, children: list[Child]) -> None:
    path = tmp_path / "a.lock"
    child = Child("hold", str(path))
    children.append(child)
    child.expect("held")

    async def main() -> None:
        with pytest.raises(LockTimeoutError, match=f"pid {child.proc.pid}"):
            async with with_file_lock(path, timeout=0.3):
                pass

    arun(main())
    child.send("release")
    child.expect("released")
    assert child.finish() == 0
    assert not path.exists()

    async def then() -> None:
        async with with_file_lock(path, timeout=0):
            pass

    arun(then())


# -- cancellation ---------------------------------------------------------------------


def test_a_cancelled_waiter_leaks_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    async def main() -> None:
        async with with_file_lock(path):
            waiter = asyncio.create_task(_enter(path))
            for _ in range(20):
                await asyncio.sleep(0)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        async with with_file_lock(path, timeout=0):
            pass
        assert not path.exists()

    arun(main())


def test_a_holder_cancelled_inside_releases(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    async def main() -> None:
        ready = asyncio.Event()

        async def hold() -> None:
            async with with_file_lock(path):
                ready.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(hold())
        await ready.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not path.exists()
        async with with_file_lock(path, timeout=0):
            pass

    arun(main())


def test_cancel_during_an_attempt_gives_back_a_lock_taken_in_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.lock"
    in_thread = threading.Event()
    go_on = threading.Event()
    real = lock_module._acquire_once

    def slow_attempt(*args: object) -> object:
        in_thread.set()
        go_on.wait(10)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(lock_module, "_acquire_once", slow_attempt)

    async def main() -> None:
        task = asyncio.create_task(_enter(path))
        await asyncio.to_thread(in_thread.wait, 10)
        task.cancel()
        await asyncio.sleep(0)
        go_on.set()  # the attempt now takes the lock although nobody wants it any more
        with pytest.raises(asyncio.CancelledError):
            await task

    arun(main())
    monkeypatch.setattr(lock_module, "_acquire_once", real)
    deadline = time.monotonic() + 5
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the undo runs on the I/O pool right after the cancel
    assert not path.exists()


async def _enter(path: Path) -> None:
    async with with_file_lock(path, timeout=30):
        pass


# -- call_with_file_lock: the lock, a call and the release in one hand-off ------------


def test_a_call_runs_holding_the_lock_and_releases_it(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    def inside() -> dict[str, object] | None:
        return lock_holder(path)  # seen from the worker thread, during the call

    async def main() -> None:
        info = await lock_module.call_with_file_lock(path, inside)
        assert info is not None and info["pid"] == os.getpid()
        assert not path.exists()

    arun(main())


def test_a_call_that_raises_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    def boom() -> None:
        raise OSError(errno.EIO, "simulated")

    async def main() -> None:
        with pytest.raises(OSError, match="simulated"):
            await lock_module.call_with_file_lock(path, boom)
        assert not path.exists()
        async with with_file_lock(path, timeout=0):  # free again at once
            pass

    arun(main())


def test_a_call_waits_for_a_holder_in_another_process(
    tmp_path: Path, children: list[Child]
) -> None:
    path = tmp_path / "a.lock"
    child = Child("hold", str(path))
    children.append(child)
    child.expect("held")
    order: list[str] = []

    async def main() -> None:
        with pytest.raises(LockTimeoutError):  # busy: tried once, never ran
            await lock_module.call_with_file_lock(path, order.append, "early", timeout=0)
        assert order == []
        call = asyncio.create_task(
            lock_module.call_with_file_lock(path, order.append, "ran", timeout=30)
        )
        await asyncio.to_thread(child.send, "release")
        await call
        assert order == ["ran"]

    arun(main())
    child.expect("released")
    assert child.finish() == 0


def test_a_call_without_flock_takes_the_waiting_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_module, "_flock", no_flock)
    path = tmp_path / "a.lock"

    async def main() -> None:
        assert await lock_module.call_with_file_lock(path, lambda: lock_holder(path)) is not None
        assert not path.exists()

    arun(main())


def test_calls_of_one_process_never_overlap(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    inside = threading.Lock()

    def critical() -> None:
        assert inside.acquire(blocking=False), "two calls held the lock at once"
        try:
            time.sleep(0.001)
        finally:
            inside.release()

    async def main() -> None:
        await asyncio.gather(
            *(lock_module.call_with_file_lock(path, critical, timeout=30) for _ in range(20))
        )

    arun(main())
