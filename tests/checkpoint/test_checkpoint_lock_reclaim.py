"""with_file_lock reclaims a lock its holder left: at once on proof of death (a dead pid, an
incomplete file nobody holds), never from a live holder, one racer at a time; in the
degraded mode without ``flock``, only by age, under a guard."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from lock_support import Child, backdate, no_flock

from async_helper import arun
from framework_agents.checkpoint import lock as lock_module
from framework_agents.checkpoint import lock_holder, with_file_lock
from framework_agents.errors import LockTimeoutError

# -- proof of death -------------------------------------------------------------------


def test_a_killed_holder_is_reclaimed_at_once_not_after_stale_after(
    tmp_path: Path, children: list[Child]
) -> None:
    path = tmp_path / "a.lock"
    child = Child("hold", str(path))
    children.append(child)
    child.expect("held")
    dead_pid = child.proc.pid
    inode = path.stat().st_ino
    child.kill()
    assert lock_holder(path)["pid"] == dead_pid  # type: ignore[index]

    async def main() -> float:
        started = time.monotonic()
        async with with_file_lock(path, timeout=5, stale_after=3600):
            waited = time.monotonic() - started
            assert lock_holder(path)["pid"] == os.getpid()  # type: ignore[index]
            assert path.stat().st_ino == inode  # taken over in place, never unlinked
        return waited

    assert arun(main()) < 2
    assert not path.exists()


def test_a_live_holder_is_never_robbed_however_old_its_file(
    tmp_path: Path, children: list[Child]
) -> None:
    path = tmp_path / "a.lock"
    child = Child("hold", str(path))
    children.append(child)
    child.expect("held")
    backdate(path, 3600)

    async def main() -> None:
        with pytest.raises(LockTimeoutError):
            async with with_file_lock(path, timeout=0.5, stale_after=0.1):
                pass

    arun(main())
    assert lock_holder(path)["pid"] == child.proc.pid  # type: ignore[index]
    child.send("release")
    assert child.finish() == 0


@pytest.mark.parametrize("age", [0, 3600], ids=["young", "old"])
@pytest.mark.parametrize("content", [b"", b'{"pid": 1, "tok'], ids=["empty", "partial"])
def test_an_incomplete_lock_file_nobody_holds_is_taken_over_at_once(
    tmp_path: Path, content: bytes, age: float
) -> None:
    # A creator killed between O_EXCL and writing its record leaves such a file.
    path = tmp_path / "a.lock"
    path.write_bytes(content)
    backdate(path, age)

    async def main() -> None:
        async with with_file_lock(path, timeout=2, stale_after=3600):
            assert lock_holder(path)["pid"] == os.getpid()  # type: ignore[index]

    arun(main())
    assert not path.exists()


def _rival_attempt(path: Path) -> object:
    return lock_module._inspect(path, "rival", 30.0)


def test_a_creator_that_loses_its_fresh_file_to_a_waiter_does_not_own_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.lock"
    real = lock_module._try_kernel_lock
    rival: list[object] = []

    def rival_first(fd: int) -> bool | None:
        if not rival:
            rival.append(None)
            rival[0] = _rival_attempt(path)  # a waiter slips in before our flock
        return real(fd)

    monkeypatch.setattr(lock_module, "_try_kernel_lock", rival_first)
    outcome = lock_module._create(path, "creator")
    assert isinstance(outcome, lock_module._Busy)
    held = rival[0]
    assert isinstance(held, lock_module._Held)
    assert lock_holder(path)["token"] == "rival"  # type: ignore[index]
    lock_module._release(held)
    assert not path.exists()


def test_a_creator_whose_file_was_taken_and_released_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.lock"
    real = lock_module._try_kernel_lock
    seen: list[object] = []

    def rival_in_and_out(fd: int) -> bool | None:
        if not seen:
            seen.append(None)
            held = _rival_attempt(path)
            assert isinstance(held, lock_module._Held)
            lock_module._release(held)
        return real(fd)

    monkeypatch.setattr(lock_module, "_try_kernel_lock", rival_in_and_out)
    assert isinstance(lock_module._create(path, "creator"), lock_module._Again)
    assert not path.exists()


# Two racers are the quick case; six (six more processes) run in `make stress`.
@pytest.mark.parametrize("racing", [2, pytest.param(6, marks=pytest.mark.slow)])
def test_racing_reclaimers_of_a_dead_lock_take_it_one_at_a_time(
    tmp_path: Path, children: list[Child], racing: int
) -> None:
    path = tmp_path / "a.lock"
    marker = tmp_path / "inside"
    holder = Child("hold", str(path))
    children.append(holder)
    holder.expect("held")
    racers = [Child("race", str(path), str(marker), "20") for _ in range(racing)]
    children.extend(racers)
    for racer in racers:
        racer.expect("ready")
    holder.kill()  # every racer now finds a dead lock and tries to reclaim it
    for racer in racers:
        racer.send("go")
    codes = [racer.finish() for racer in racers]
    assert codes == [0] * len(racers)  # 3 would be two racers inside at once
    assert not path.exists() and not marker.exists()


def test_release_leaves_a_lock_file_that_is_no_longer_ours(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"

    async def main() -> None:
        async with with_file_lock(path):
            os.unlink(path)
            path.write_text("someone else's")
        assert path.read_text() == "someone else's"

    arun(main())


# -- degraded mode: no flock ---------------------------------------------------------


def test_without_flock_a_fresh_lock_is_respected_and_heartbeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_module, "_flock", no_flock)
    path = tmp_path / "a.lock"

    async def main() -> None:
        async with with_file_lock(path, stale_after=0.3):
            first = path.stat().st_mtime_ns
            # Held 3x longer than stale_after: the heartbeat keeps it fresh, so no steal.
            with pytest.raises(LockTimeoutError):
                async with with_file_lock(path, timeout=0.9, stale_after=0.3):
                    pass
            assert path.stat().st_mtime_ns > first
        assert not path.exists()

    arun(main())


def test_without_flock_a_stale_lock_is_reclaimed_under_a_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_module, "_flock", no_flock)
    path = tmp_path / "a.lock"
    path.write_text(json.dumps({"pid": 1, "host": "elsewhere", "token": "x", "acquired_at": 0}))
    backdate(path, 10)

    async def main() -> None:
        async with with_file_lock(path, timeout=2, stale_after=5):
            assert lock_holder(path)["pid"] == os.getpid()  # type: ignore[index]
        assert not path.exists()
        assert not path.with_name("a.lock.reclaim").exists()

    arun(main())


def test_without_flock_a_dead_reclaimers_guard_is_cleared_once_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_module, "_flock", no_flock)
    path = tmp_path / "a.lock"
    guard = tmp_path / "a.lock.reclaim"
    path.write_text(json.dumps({"pid": 1, "host": "h", "token": "x", "acquired_at": 0}))
    guard.write_text("")
    backdate(path, 10)
    backdate(guard, 10)

    async def main() -> None:
        async with with_file_lock(path, timeout=2, stale_after=5):
            pass

    arun(main())
    assert not guard.exists()


# Seconds of waiting by design (a timeout, then the stale age): the in-process no-flock tests
# above cover the same rules quickly.
@pytest.mark.slow
def test_without_flock_across_processes(tmp_path: Path, children: list[Child]) -> None:
    path = tmp_path / "a.lock"
    child = Child("hold", str(path), "--no-flock", env={"STALE": "0.6"})
    children.append(child)
    child.expect("held")

    async def blocked() -> None:
        with pytest.raises(LockTimeoutError):
            async with with_file_lock(path, timeout=1.5, stale_after=0.6):
                pass

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lock_module, "_flock", no_flock)
        arun(blocked())
        child.kill()  # no proof of death here: only age frees it

        async def reclaimed() -> float:
            started = time.monotonic()
            async with with_file_lock(path, timeout=5, stale_after=0.6):
                pass
            return time.monotonic() - started

        assert arun(reclaimed()) < 4
