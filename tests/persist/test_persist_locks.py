"""The persistence layer's lock waits: bounded by a deadline, ended by a cancel.

A busy ``flock`` is held here through a second open file description of the same file:
the kernel treats it as another holder (as another process would be); the stores' tests
use real processes.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import framework_agents._persist._locks as locks_module
from async_helper import arun
from framework_agents._persist import Deadline, check_seconds, flock, holding
from framework_agents._persist._io import StopWaiting, run_blocking, wait_or_stop
from framework_agents.errors import InvalidArgumentError, LockTimeoutError
from lock_waits import cancel_while_waiting, wait_began


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "fa-flock-wait"]


@pytest.fixture(autouse=True)
def _no_helper_left_from_before() -> None:
    """Helpers of earlier tests (their holders gone) end first: counts start from none."""
    for helper in _helpers():
        helper.join(10)
        assert not helper.is_alive(), "a lock helper of an earlier test is still waiting"


@pytest.fixture
def lock_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "x.lock"
    path.touch()
    yield path


def _hold(path: Path, operation: int = fcntl.LOCK_EX) -> int:
    """Another holder of ``path``'s lock (a separate open file description)."""
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, operation | fcntl.LOCK_NB)
    return fd


def _gives_up(path: Path, *, exclusive: bool = True, seconds: float = 0.001) -> None:
    """A wait for ``path``'s lock on a descriptor of its own ends in LOCK_TIMEOUT (the
    descriptor closed after, as the stores close theirs)."""
    fd = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(LockTimeoutError):
            flock(fd, exclusive=exclusive, deadline=Deadline.after(seconds))
    finally:
        os.close(fd)


def _free(path: Path) -> bool:
    """Whether nobody holds ``path``'s lock now (taken and let go at once)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_free_lock_is_taken_at_once_and_a_shared_one_shares(lock_file: Path) -> None:
    mine = os.open(lock_file, os.O_RDWR)
    other = _hold(lock_file, fcntl.LOCK_SH)
    try:
        flock(mine, exclusive=False, deadline=Deadline.after(0))  # shared beside shared
        assert not _free(lock_file)
    finally:
        os.close(other)
        os.close(mine)
    assert _free(lock_file)


def test_a_busy_lock_past_its_deadline_is_lock_timeout(lock_file: Path) -> None:
    other = _hold(lock_file)
    mine = os.open(lock_file, os.O_RDWR)
    try:
        for exclusive in (True, False):
            with pytest.raises(LockTimeoutError) as info:
                flock(mine, exclusive=exclusive, deadline=Deadline.after(0.05), name="k/v")
            assert info.value.code == "LOCK_TIMEOUT"
            assert "'k/v'" in str(info.value) and "0.05s" in str(info.value)
        with pytest.raises(LockTimeoutError):  # 0: one attempt
            flock(mine, exclusive=True, deadline=Deadline.after(0))
    finally:
        os.close(mine)
        os.close(other)


def test_a_wait_takes_the_lock_once_its_holder_lets_go(
    lock_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paused = wait_began(monkeypatch)
    other = _hold(lock_file)
    mine = os.open(lock_file, os.O_RDWR)
    try:
        waiter = threading.Thread(target=flock, args=(mine,), kwargs={"exclusive": True})
        waiter.start()
        assert paused.wait(10)  # it found the lock busy
        os.close(other)
        waiter.join(10)
        assert not waiter.is_alive()
        assert not _free(lock_file)  # ours now
    finally:
        os.close(mine)


def test_a_cancel_ends_a_lock_wait_at_once_with_nothing_taken(
    lock_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paused = wait_began(monkeypatch)
    other = _hold(lock_file)
    ran: list[str] = []

    def locked_write() -> None:
        fd = os.open(lock_file, os.O_RDWR)
        try:
            flock(fd, exclusive=True)  # no deadline: only the cancel ends it
            ran.append("write")
        finally:
            os.close(fd)

    arun(cancel_while_waiting(lambda: run_blocking(locked_write), paused))
    assert ran == []
    helpers = _helpers()
    assert helpers  # still blocked in flock: the holder has not let go
    os.close(other)
    for helper in helpers:  # it gets the lock now, and lets it go at once
        helper.join(10)
    assert _free(lock_file)


def test_a_cancel_does_not_cut_the_work_once_the_lock_is_taken(lock_file: Path) -> None:
    mine = os.open(lock_file, os.O_RDWR)
    inside, go_on = threading.Event(), threading.Event()
    ran: list[str] = []

    def locked_write() -> None:
        flock(mine, exclusive=True)
        inside.set()
        go_on.wait(10)
        ran.append("write")

    async def main() -> None:
        task = asyncio.create_task(run_blocking(locked_write))
        await asyncio.to_thread(inside.wait, 10)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # the work goes on under the lock
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        arun(main())
    finally:
        os.close(mine)
    assert ran == ["write"]  # finished, then the cancel was raised


def test_wait_or_stop_outside_a_cancelled_call_is_a_plain_wait() -> None:
    event = threading.Event()
    assert wait_or_stop(event, 0) is False
    event.set()
    assert wait_or_stop(event, None) is True

    def work() -> bool:
        return wait_or_stop(event, 0)  # in a worker call nobody cancelled

    assert arun(run_blocking(work)) is True


def test_a_stop_wins_over_a_lock_that_came_at_the_same_moment() -> None:
    inside, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def work() -> None:
        inside.set()
        release.wait(10)  # the cancel arrives here, before the wait begins
        got = threading.Event()
        got.set()
        try:
            wait_or_stop(got, None)
        except StopWaiting:
            outcome.append("stopped")
            raise

    async def main() -> None:
        task = asyncio.create_task(run_blocking(work))
        await asyncio.to_thread(inside.wait, 10)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    arun(main())
    assert outcome == ["stopped"]


def test_holding_bounds_the_wait_for_this_loops_other_tasks() -> None:
    async def main() -> None:
        lock = asyncio.Lock()
        await lock.acquire()
        with pytest.raises(LockTimeoutError, match=r"'memory\.json\.lock'"):
            async with holding(lock, Deadline.after(0.05), "memory.json.lock"):
                pass  # pragma: no cover - never entered
        lock.release()
        async with holding(lock, Deadline.after(0), "x"):  # a free lock: at once
            assert lock.locked()
        assert not lock.locked()
        async with holding(lock, None, "x"):
            assert lock.locked()
        assert not lock.locked()

    arun(main())


def test_deadlines_and_their_checks() -> None:
    assert Deadline.after(None) is None
    assert Deadline.after(math.inf) is None
    deadline = Deadline.after(60)
    assert deadline is not None and 0 < deadline.left() <= 60
    assert Deadline(1.0, 0.0).left() == 0.0
    assert check_seconds("lock_timeout", None, optional=True) is None
    assert check_seconds("lock_timeout", 2, optional=True) == 2.0
    for bad in (-1, math.nan, True, "1", [1]):
        with pytest.raises(InvalidArgumentError):
            check_seconds("lock_timeout", bad, optional=True)


def test_waits_that_give_up_again_and_again_leave_one_helper(lock_file: Path) -> None:
    other = _hold(lock_file)
    try:
        for _ in range(50):  # a caller retrying with a short bound while a holder hangs
            _gives_up(lock_file)
        assert len(_helpers()) == 1
        _gives_up(lock_file, exclusive=False)  # another mode has a helper of its own
        assert len(_helpers()) == 2
    finally:
        os.close(other)
    for helper in _helpers():
        helper.join(10)
    assert _free(lock_file)


def test_waiters_of_one_process_take_the_lock_in_turn(lock_file: Path) -> None:
    other = _hold(lock_file)
    order: list[int] = []
    started = threading.Barrier(4)

    def waiter(k: int) -> None:
        fd = os.open(lock_file, os.O_RDWR)
        try:
            started.wait(10)
            flock(fd, exclusive=True, deadline=Deadline.after(30))
            order.append(k)
        finally:
            os.close(fd)  # lets the next one in

    threads = [threading.Thread(target=waiter, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    started.wait(10)
    os.close(other)
    for thread in threads:
        thread.join(30)
    assert sorted(order) == [0, 1, 2]
    assert _free(lock_file)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_keep_a_waiting_helpers_lock(lock_file: Path) -> None:
    other = _hold(lock_file)
    _gives_up(lock_file)
    assert len(_helpers()) == 1  # still blocked, on a duplicate of the closed descriptor
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: let go of the test's own holder, wait for the parent
        os.close(other)
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    try:
        os.close(other)
        for helper in _helpers():
            helper.join(10)
        # The helper got the lock and let it go; a copy of its duplicate in the child
        # would have kept it held for as long as the child lives.
        assert _free(lock_file)
    finally:
        os.close(write)
        os.close(read)
        os.waitpid(pid, 0)


def test_a_bound_no_thread_can_wait_for_is_no_bound() -> None:
    assert Deadline.after(threading.TIMEOUT_MAX) is None
    assert Deadline.after(1e300) is None


def test_a_cancel_of_one_waiter_does_not_end_another_ones_wait(
    lock_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _hold(lock_file)
    mine = os.open(lock_file, os.O_RDWR)
    began = threading.Semaphore(0)

    def cancelled_one() -> None:
        fd = os.open(lock_file, os.O_RDWR)
        try:  # as every store does: a wait that stops closes its descriptor (its helper,
            flock(fd, exclusive=True)  # woken with ours, then lets the lock go at once)
        finally:
            os.close(fd)

    def watched(event: threading.Event, seconds: float | None) -> bool:
        began.release()
        return wait_or_stop(event, seconds)

    monkeypatch.setattr(locks_module, "wait_or_stop", watched)

    async def main() -> None:
        tasks = [
            asyncio.create_task(run_blocking(functools.partial(flock, mine, exclusive=True))),
            asyncio.create_task(run_blocking(cancelled_one)),
        ]
        for _ in tasks:
            await asyncio.to_thread(began.acquire, True, 10)
        tasks[1].cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(tasks[1]), 10)
        for _ in range(5):
            await asyncio.sleep(0)
        assert not tasks[0].done()  # still waiting: the holder holds
        os.close(other)
        await asyncio.wait_for(tasks[0], 10)  # and now it holds the lock

    try:
        arun(main())
        assert not _free(lock_file)
    finally:
        os.close(mine)


def _orphaned_behind_a_holder(lock_file: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """A holder of the lock (its descriptor, returned) and a wait for it cancelled while it
    waited: that wait's helper is left waiting, an orphan."""
    other = _hold(lock_file)
    first = os.open(lock_file, os.O_RDWR)
    paused = wait_began(monkeypatch)
    write = functools.partial(flock, first, exclusive=True)
    arun(cancel_while_waiting(lambda: run_blocking(write), paused))
    os.close(first)
    return other


def test_a_waiter_behind_a_given_up_helper_waits_without_spinning(
    lock_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    class Counting:
        LOCK_EX, LOCK_SH, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_SH, fcntl.LOCK_NB

        @staticmethod
        def flock(fd: int, operation: int) -> None:
            calls.append(operation)
            fcntl.flock(fd, operation)

    other = _orphaned_behind_a_holder(lock_file, monkeypatch)
    monkeypatch.setattr(locks_module, "posix_fcntl", Counting)
    try:
        _gives_up(lock_file, seconds=0.2)
    finally:
        os.close(other)
    assert len(calls) <= 2  # one try, maybe one after the orphan ended; no busy loop
    for helper in _helpers():
        helper.join(10)
    assert _free(lock_file)


def test_a_lock_its_orphan_takes_and_lets_go_is_not_busy_for_a_zero_bound(
    lock_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cancelled wait leaves its helper waiting (an orphan); when the holder lets go the
    # orphan takes the lock and lets it go at once. A try with no time to wait (the
    # graph store's default) at that moment found it busy: LOCK_TIMEOUT with no holder.
    other = _orphaned_behind_a_holder(lock_file, monkeypatch)
    took, gate = threading.Event(), threading.Event()
    real_end = locks_module._Waiter._end

    def held_until_the_gate(waiter: Any) -> None:  # the orphan holds it until let through
        took.set()
        gate.wait(30)
        real_end(waiter)

    monkeypatch.setattr(locks_module._Waiter, "_end", held_until_the_gate)
    os.close(other)  # the orphan takes the lock
    assert took.wait(10)
    outcome: list[object] = []
    trying = threading.Event()

    def try_at_once() -> None:
        fd = os.open(lock_file, os.O_RDWR)
        trying.set()
        try:
            flock(fd, exclusive=True, deadline=Deadline.after(0))
            outcome.append("taken")
        except LockTimeoutError as exc:
            outcome.append(exc)
        finally:
            os.close(fd)

    tryer = threading.Thread(target=try_at_once)
    tryer.start()
    assert trying.wait(10)
    tryer.join(0.5)  # waits for the orphan to let go (without the fix: LOCK_TIMEOUT now)
    gate.set()
    tryer.join(10)
    assert outcome == ["taken"]
    for helper in _helpers():
        helper.join(10)
    assert _free(lock_file)
