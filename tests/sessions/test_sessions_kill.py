"""A writer SIGKILLed in the middle of ``save_latest`` never leaves an unreadable snapshot.

Each round forks a child that loops ``save_latest`` on a ``LocalFileStorage`` and reports
every completed save through a pipe; the parent kills it with SIGKILL, then checks that the
latest snapshot loads, is whole, and holds every save the child reported done. Besides
kills at arbitrary moments, three kinds of rounds park the child at an exact instant (half
of the temp file written; temp file complete but not renamed; renamed but the directory not
yet fsynced) and kill it there, so the risky windows are hit on every run, not by luck.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from framework_agents import Message
from framework_agents.sessions import LocalFileStorage, SessionManager, Snapshot, SnapshotData

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods(),
    reason="needs fork and SIGKILL",
)

MESSAGES = 150
TEXT = 1000


def _snapshot(n: int) -> Snapshot:
    messages = [Message("user", f"{n}:{i}:" + "x" * TEXT, id=f"m{n}-{i}") for i in range(MESSAGES)]
    digest = hashlib.sha256("".join(m.text for m in messages).encode()).hexdigest()
    return Snapshot(SnapshotData(messages=messages, state={"n": n, "digest": digest}))


def _check(snapshot: Snapshot) -> int:
    """The snapshot is whole and self-consistent; return its sequence number."""
    state, messages = snapshot.data.state, snapshot.data.messages
    assert state is not None and messages is not None
    assert len(messages) == MESSAGES
    digest = hashlib.sha256("".join(m.text for m in messages).encode()).hexdigest()
    assert digest == state["digest"]
    n = state["n"]
    assert isinstance(n, int)
    assert all(m.text.startswith(f"{n}:") for m in messages)
    return n


def _child(root: str, start: int, mode: str, park_at: int, wfd: int, block_fd: int) -> None:
    """Save snapshots start+1, start+2, ... forever; write b"." after each completed save.

    ``mode`` other than "anytime" parks the worker thread at an exact instant of the
    ``park_at``-th save (write b"P" first) by wrapping the ``os`` function that
    LocalFileStorage calls there; reading ``block_fd`` blocks forever.
    """
    real_write, real_replace = os.write, os.replace
    counter = {"replace": 0, "write": 0}

    def park() -> None:
        real_write(wfd, b"P")
        os.read(block_fd, 1)  # never returns: nobody writes to this pipe

    def write(fd: int, data: Any) -> int:
        if fd != wfd and len(data) > 1:
            counter["write"] += 1
            if counter["write"] == park_at:
                done = real_write(fd, data[: len(data) // 2])
                park()
                return done
        return real_write(fd, data)

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        counter["replace"] += 1
        if mode == "before-rename" and counter["replace"] == park_at:
            park()
        real_replace(src, dst, **kw)
        if mode == "after-rename" and counter["replace"] == park_at:
            park()

    if mode == "mid-write":
        os.write = write
    elif mode in ("before-rename", "after-rename"):
        os.replace = replace

    async def loop() -> None:
        sm = SessionManager("s", LocalFileStorage(root))
        n = start
        while True:
            n += 1
            await sm.save_latest(_snapshot(n))
            real_write(wfd, b".")

    asyncio.run(loop())


def _read_until(rfd: int, stop: bytes, count: int) -> bytes:
    got = b""
    while got.count(stop) < count:
        chunk = os.read(rfd, 64)
        if not chunk:
            raise AssertionError(f"child exited early after {got!r}")
        got += chunk
    return got


ROUNDS = [
    (m, k) for k in (1, 2, 3) for m in ("anytime", "mid-write", "before-rename", "after-rename")
]


# Every round once (12 kills) in make test; three times over (36 kills) in make stress.
@pytest.mark.parametrize("passes", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_sigkilled_writer_never_leaves_an_unreadable_snapshot(tmp_path: Path, passes: int) -> None:
    ctx = multiprocessing.get_context("fork")
    root = tmp_path / "store"
    sm = SessionManager("s", LocalFileStorage(root))
    latest = 0
    for mode, k in ROUNDS * passes:
        rfd, wfd = os.pipe()
        block_r, block_w = os.pipe()
        proc = ctx.Process(target=_child, args=(str(root), latest, mode, k, wfd, block_r))
        proc.start()
        os.close(wfd)
        try:
            if mode == "anytime":
                acked = _read_until(rfd, b".", k).count(b".")
            else:
                got = _read_until(rfd, b"P", 1)
                acked = got.count(b".")
        finally:
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
            proc.join()
            for fd in (rfd, block_r, block_w):
                os.close(fd)
        assert proc.exitcode == -signal.SIGKILL

        snapshot = asyncio.run(sm.load_latest())
        assert snapshot is not None
        n = _check(snapshot)
        if mode in ("mid-write", "before-rename"):
            assert n == latest + acked  # the parked save was never published
        elif mode == "after-rename":
            assert n == latest + acked + 1  # published, just not reported
        else:
            assert latest + acked <= n <= latest + acked + 1
        latest = n
        assert asyncio.run(sm.storage.list()) == [sm.latest_key]

    assert latest >= len(ROUNDS) * passes
    leftovers = [p.name for p in sm_dir(root).iterdir() if p.name != "snapshot_latest.json"]
    assert all(name.startswith(".snapshot_latest.json.") for name in leftovers)


def sm_dir(root: Path) -> Path:
    return root / "session" / "s" / "scopes" / "agent" / "default" / "snapshots"
