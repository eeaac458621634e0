"""The one way tests end a child process they started: killed if still running, reaped,
and every pipe to it closed (no ``ResourceWarning`` left for the garbage collector)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["close_process", "flock_held", "run_to_the_end", "spawned"]


def close_process(proc: subprocess.Popen[Any], timeout: float = 30) -> int:
    """Kill ``proc`` if it still runs, wait for it, close its pipes; its exit code."""
    try:
        if proc.poll() is None:
            proc.kill()
        return proc.wait(timeout=timeout)
    finally:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):  # a broken pipe to a killed child
                    stream.close()


@contextlib.contextmanager
def spawned(args: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """``subprocess.Popen(args, **popen)`` for the block, then :func:`close_process`."""
    proc = subprocess.Popen(args, **popen)
    try:
        yield proc
    finally:
        close_process(proc)


_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes the pipe (or kills this process)
"""


@contextlib.contextmanager
def flock_held(path: str | os.PathLike[str], *, shared: bool = False) -> Iterator[None]:
    """Another process holds ``flock`` on ``path`` (created if missing) for the block."""
    mode = "shared" if shared else "exclusive"
    args = [sys.executable, "-c", _HOLDER, os.fspath(path), mode]
    with spawned(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "held":
            raise RuntimeError(f"the lock holder for {path} did not start")
        yield


def run_to_the_end(procs: Sequence[Any], timeout: float = 240) -> None:
    """Start ``procs`` (``multiprocessing`` processes), wait for each to exit 0; kill the
    ones still alive if one did not."""
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=timeout)
            assert proc.exitcode == 0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
