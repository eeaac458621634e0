"""What the file-lock tests share: a lock_child.py process driven through its pipes, the
simulated missing ``flock`` and a file's age set back."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from processes import close_process

CHILD = Path(__file__).with_name("lock_child.py")


class Child:
    """A lock_child.py process driven through its stdin/stdout."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )

    def expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == word, f"child said {line!r}, expected {word!r}"

    def send(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        close_process(self.proc)

    def finish(self) -> int:
        code = self.proc.wait(timeout=30)
        close_process(self.proc)
        return code


def no_flock(fd: int, operation: int) -> None:
    """Stands in for ``fcntl.flock`` on a file system without it."""
    raise OSError(errno.ENOLCK, "no locks available (simulated)")


def backdate(path: Path, seconds: float) -> None:
    """Set ``path``'s times ``seconds`` into the past."""
    past = time.time() - seconds
    os.utime(path, (past, past))
