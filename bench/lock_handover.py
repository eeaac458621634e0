"""Benchmark: how fast a contended file lock passes between processes (run by hand).

``--procs`` processes (default 4) each make ``--saves`` writes of their own to one shared
target, all at once, three ways:

* ``floor``: ``flock(LOCK_EX)`` (blocking, the kernel wakes the next waiter) + append +
  ``fdatasync`` + unlock of one shared file: the bare operation;
* ``with_file_lock``: :func:`~framework_agents.checkpoint.lock.with_file_lock` (API.md's
  ``O_EXCL`` lock file) around the same append + ``fdatasync``;
* ``checkpoint``: ``FileCheckpointer.save`` of one shared thread (each save appends one
  turn of the process's own to what it loaded under ``thread_lock``).

Prints writes per second for all the processes together, p50/p99 of one write as its
process saw it (the wait for the lock included), and each way's ratio to the floor in the
same run. A waiter that polls a held lock sleeps between tries, so what it loses shows as
a hand-over slower than the kernel's.

Usage: ``.venv/bin/python bench/lock_handover.py [--procs 4] [--saves 200] [--dir PATH]``
(a directory on a real disk, not tmpfs, for fsync figures).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from framework_agents import FileCheckpointer, Message, ThreadCheckpoint
from framework_agents.checkpoint.lock import with_file_lock

_RECORD = b"x" * 600 + b"\n"


def _floor(root: Path, saves: int, start: float) -> list[float]:
    fd = os.open(root / "floor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    _wait_until(start)
    for _ in range(saves):
        t = time.perf_counter()
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, _RECORD)
        os.fdatasync(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        times.append(time.perf_counter() - t)
    os.close(fd)
    return times


async def _locked(root: Path, saves: int, start: float) -> list[float]:
    fd = os.open(root / "locked.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []

    def write() -> None:
        os.write(fd, _RECORD)
        os.fdatasync(fd)

    _wait_until(start)
    for _ in range(saves):
        t = time.perf_counter()
        async with with_file_lock(root / "locked.lock", timeout=None):
            await asyncio.to_thread(write)
        times.append(time.perf_counter() - t)
    os.close(fd)
    return times


async def _checkpoint(root: Path, saves: int, start: float, who: int) -> list[float]:
    cp = FileCheckpointer(root / "cp", lock_timeout=None)
    times = []
    _wait_until(start)
    for i in range(saves):
        t = time.perf_counter()
        async with cp.thread_lock("t1", timeout=None):
            base = await cp.load("t1")
            messages = [] if base is None else list(base.messages)
            messages += [
                Message("user", f"p{who} q{i} " + "u" * 200),
                Message("assistant", f"p{who} a{i} " + "a" * 400),
            ]
            await cp.save(ThreadCheckpoint("t1", None, messages, {}))
        times.append(time.perf_counter() - t)
    return times


def _wait_until(start: float) -> None:
    while time.time() < start:
        time.sleep(0.0005)


def _child(way: str, root: Path, saves: int, start: float, who: int, out: object) -> None:
    if way == "floor":
        times = _floor(root, saves, start)
    elif way == "with_file_lock":
        times = asyncio.run(_locked(root, saves, start))
    else:
        times = asyncio.run(_checkpoint(root, saves, start, who))
    out.put(times)  # type: ignore[attr-defined]


def _run(way: str, root: Path, procs: int, saves: int) -> tuple[float, list[float]]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 1.5  # every child started and imported before the first write
    children = [
        ctx.Process(target=_child, args=(way, root, saves, start, who, out)) for who in range(procs)
    ]
    for child in children:
        child.start()
    times: list[float] = []
    for _ in children:
        times += out.get()
    for child in children:
        child.join()
    wall = time.time() - start
    return wall, times


def main() -> None:
    """Run each way with the same processes and saves; print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fa-handover-", dir=args.dir))
    try:
        results = {}
        for way in ("floor", "with_file_lock", "checkpoint"):
            root = base / way
            root.mkdir()
            results[way] = _run(way, root, args.procs, args.saves)
        total = args.procs * args.saves
        floor_rate = total / results["floor"][0]
        print(f"{args.procs} processes x {args.saves} writes, one shared lock")
        print(f"{'way':16s} {'writes/s':>9s} {'x floor':>8s} {'p50 ms':>8s} {'p99 ms':>8s}")
        for way, (wall, times) in results.items():
            rate = total / wall
            times.sort()
            p50 = statistics.median(times) * 1e3
            p99 = times[int(len(times) * 0.99) - 1] * 1e3
            print(f"{way:16s} {rate:9.0f} {floor_rate / rate:8.2f} {p50:8.2f} {p99:8.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
