"""The one way tests end a child process they started: killed if still running, reaped,
and every pipe to it closed (no ``ResourceWarning`` left for the garbage collector)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["close_process", "spawned"]


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
