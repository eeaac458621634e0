"""SessionManager(append=True) over LocalFileStorage: SIGKILL at random points of appends
and folds always leaves an acknowledged state (never older than the last acknowledged save,
never a mix). The writer is ``sessions_journal_workers.crash_saver`` in a forkserver child."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from framework_agents.sessions import LocalFileStorage, SessionManager, Snapshot

sys.path.insert(0, str(Path(__file__).parent))  # children import the worker module by name
import sessions_journal_workers as workers

pytestmark = pytest.mark.skipif(
    "forkserver" not in mp.get_all_start_methods(), reason="needs forkserver and SIGKILL"
)

KILLS = 500


def _load(root: Path) -> Snapshot | None:
    return asyncio.run(SessionManager("s1", LocalFileStorage(root), append=True).load_latest())


def _recv(conn: Any, proc: Any) -> int:
    assert conn.poll(30), f"child sent nothing (exit code {proc.exitcode})"
    value: int = conn.recv()
    return value


def _kill_rounds(root: Path, kills: int, seed: int) -> int:
    ctx = mp.get_context("forkserver")
    # The modules the children use (the package itself imports nothing until a name is
    # used): the worker module is found only from its directory (3.11's forkserver
    # ignores the parent's sys.path), so it cannot be the one that loads them.
    ctx.set_forkserver_preload(
        [
            "framework_agents.sessions.manager",
            "framework_agents.sessions.local",
            "sessions_journal_workers",
        ]
    )
    rng = random.Random(seed)
    stored = 0
    for _ in range(kills):
        reader, writer = ctx.Pipe(duplex=False)
        fold_min = rng.choice([64 << 10, 256])  # appends, or a fold every other save
        proc = ctx.Process(target=workers.crash_saver, args=(str(root), stored, writer, fold_min))
        proc.start()
        writer.close()
        try:
            assert _recv(reader, proc) == -1
            acks = [_recv(reader, proc) for _ in range(rng.randint(0, 2))]
            # The random moment of the kill: progress is only learned from acknowledgements.
            time.sleep(rng.uniform(0, 0.004))
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
            proc.join(timeout=30)
            while reader.poll(0):
                try:
                    acks.append(reader.recv())
                except EOFError:
                    break
        finally:
            if proc.is_alive():
                proc.kill()
            reader.close()
        assert acks == list(range(stored, stored + len(acks)))
        got = _load(root)
        ids = [] if got is None else [m.id for m in got.data.messages or []]
        assert ids == [f"s{i}" for i in range(len(ids))]  # never torn, never a mix
        assert stored + len(acks) <= len(ids) <= stored + len(acks) + 1
        if got is not None and ids:
            assert got.data.state == {"last": ids[-1]}
        stored = len(ids)
    return stored


def test_a_few_kills_of_an_appending_session_writer(tmp_path: Path) -> None:
    assert _kill_rounds(tmp_path, 20, seed=7) > 0


@pytest.mark.slow
def test_sigkill_at_random_points_of_appends_and_folds_leaves_an_acknowledged_state(
    tmp_path: Path,
) -> None:
    assert _kill_rounds(tmp_path, KILLS, seed=4243) > KILLS // 2
