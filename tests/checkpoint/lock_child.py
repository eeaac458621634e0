"""A child process for the lock tests (run as a script, not collected by pytest).

lock_child.py hold LOCK [--no-flock]      take the lock, print "held", then wait for
                                          "release" on stdin (or be killed)
lock_child.py race LOCK MARKER HOLD_MS    print "ready", wait for "go" on stdin, take
                                          the lock, prove exclusivity with an O_EXCL
                                          marker, exit 0 (3 on a violation)
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys

from framework_agents.checkpoint import lock as lock_module
from framework_agents.checkpoint import with_file_lock


def _no_flock(fd: int, operation: int) -> None:
    raise OSError(errno.ENOLCK, "no locks available (simulated)")


async def hold(path: str) -> None:
    async with with_file_lock(path, timeout=10, stale_after=float(os.environ.get("STALE", "30"))):
        print("held", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        assert line.strip() == "release", line
    print("released", flush=True)


async def race(path: str, marker: str, hold_ms: float) -> int:
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    assert line.strip() == "go", line
    async with with_file_lock(path, timeout=20):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return 3
        os.close(fd)
        await asyncio.sleep(hold_ms / 1000)  # hold the lock while "working"
        os.unlink(marker)
    return 0


def main() -> int:
    if "--no-flock" in sys.argv:
        sys.argv.remove("--no-flock")
        lock_module._flock = _no_flock
    mode = sys.argv[1]
    if mode == "hold":
        asyncio.run(hold(sys.argv[2]))
        return 0
    if mode == "race":
        return asyncio.run(race(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main())
