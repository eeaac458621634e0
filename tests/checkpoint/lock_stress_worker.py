"""One worker of the lock stress test (run as a script by test_checkpoint_stress.py).

    lock_stress_worker.py ROOT UNTIL KILL_PROBABILITY SEED

Until the wall-clock time UNTIL, the worker takes ``ROOT/stress.lock`` again and again.
Inside, it proves exclusivity and checks the shared checkpoint:

* an "inside" marker published with ``link()`` (fails if it exists) names the holder by pid
  and kernel start time. Finding a marker means the previous holder never left: that is
  fine only if that process is dead (gone, a zombie, or exiting); a live one is a
  mutual-exclusion violation.
* the checkpoint of thread "stress" must load (never torn) and hold a count between the
  last one committed (published after a save) and the last one announced (``intent``,
  published before a save): holders may die after announcing, after saving or before
  committing, several in a row, so "committed or one more" would be too narrow, while a
  lost or reverted save shows up as a count below the committed one.

With probability KILL_PROBABILITY a hold ends with the worker SIGKILLing itself at a
random instant of its critical section, often in the middle of the checkpoint save.
Every line the worker appends to ``ROOT/events.log`` is one O_APPEND write.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

from framework_agents import Message
from framework_agents.checkpoint import FileCheckpointer, ThreadCheckpoint, with_file_lock

LOCK_TIMEOUT = 20.0
PF_EXITING = 0x4


def proc_identity(pid: int) -> tuple[str, int, int] | None:
    """(state, flags, start time) of a process from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is field 3 of proc(5): state; flags is field 9; starttime field 22.
    return fields[0], int(fields[6]), int(fields[19])


def alive(pid: int, start: int) -> bool:
    info = proc_identity(pid)
    if info is None:
        return False
    state, flags, started = info
    return started == start and state not in ("Z", "X", "x") and not flags & PF_EXITING


class Worker:
    def __init__(self, root: Path, kill_probability: float, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.kill_probability = kill_probability
        self.pid = os.getpid()
        ident = proc_identity(self.pid)
        assert ident is not None
        self.me = f"{self.pid} {ident[2]}"
        self.log_fd = os.open(root / "events.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self.cp = FileCheckpointer(root / "cp", lock_timeout=LOCK_TIMEOUT)

    def log(self, line: str) -> None:
        os.write(self.log_fd, f"{self.pid} {line}\n".encode())

    def enter(self) -> None:
        marker = self.root / "inside"
        tmp = self.root / f"inside.{self.pid}.tmp"
        tmp.write_text(self.me)
        try:
            while True:
                try:
                    os.link(tmp, marker)
                    return
                except FileExistsError:
                    pass
                try:
                    other = marker.read_text()
                except FileNotFoundError:
                    continue
                pid, start = (int(x) for x in other.split())
                if alive(pid, start):
                    self.log(f"VIOLATION inside with live holder {pid}")
                else:
                    self.log(f"TAKEOVER marker of dead {pid}")
                os.unlink(marker)
        finally:
            tmp.unlink()

    def leave(self) -> None:
        marker = self.root / "inside"
        if marker.read_text() != self.me:
            self.log("VIOLATION marker replaced while inside")
        os.unlink(marker)

    def committed(self) -> int:
        try:
            return int((self.root / "committed").read_text())
        except FileNotFoundError:
            return 0

    def commit(self, n: int, name: str = "committed") -> None:
        tmp = self.root / f"{name}.{self.pid}.tmp"
        tmp.write_text(str(n))
        os.replace(tmp, self.root / name)

    def intent(self) -> int:
        try:
            return int((self.root / "intent").read_text())
        except FileNotFoundError:
            return 0

    def die_soon(self) -> None:
        delay = self.rng.uniform(0, 0.004)

        def shoot() -> None:
            time.sleep(delay)
            os.kill(self.pid, signal.SIGKILL)

        threading.Thread(target=shoot, daemon=True).start()

    async def critical_section(self) -> None:
        self.enter()
        try:
            loaded = await self.cp.load("stress")
            count = 0 if loaded is None else int(loaded.state["count"])
            last, announced = self.committed(), self.intent()
            if not last <= count <= announced:
                self.log(f"BADCOUNT checkpoint {count} committed {last} intent {announced}")
            if self.rng.random() < self.kill_probability:
                self.log("DYING")
                self.die_soon()
                dying = True
            else:
                dying = False
            size = self.rng.randint(1, 120)
            messages = [Message("user", f"{count + 1}:{i} " + "y" * 100) for i in range(size)]
            self.commit(count + 1, "intent")
            await self.cp.save(ThreadCheckpoint("stress", None, messages, {"count": count + 1}))
            self.commit(count + 1)
            if dying:
                await asyncio.sleep(60)  # the shot lands while we still hold the lock
        finally:
            self.leave()

    async def run(self, until: float) -> int:
        worst = 0.0
        holds = 0
        while time.time() < until:
            started = time.monotonic()
            async with with_file_lock(self.root / "stress.lock", timeout=LOCK_TIMEOUT):
                waited = time.monotonic() - started
                worst = max(worst, waited)
                await self.critical_section()
            holds += 1
            self.log(f"HOLD {waited:.6f}")
            await asyncio.sleep(self.rng.uniform(0, 0.003))
        self.log(f"DONE {holds} {worst:.6f}")
        return 0


def main() -> int:
    root, until, probability, seed = sys.argv[1:5]
    worker = Worker(Path(root), float(probability), int(seed))
    try:
        return asyncio.run(worker.run(float(until)))
    except Exception as exc:
        worker.log(f"ERROR {type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    sys.exit(main())
