"""At most once under real SIGKILLs: resumes with the same approval, retried after random
kills of the process doing the side effect (>= 500 kills), never publish twice, and every
thread can still be finished. The driver is ``kills_driver.py`` (forked workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("kills_driver.py")


def run_driver(root: Path, kills: int, seed: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(root), str(kills), str(seed)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    summary: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in summary, summary
    return summary


def check(summary: dict[str, object], kills: int) -> None:
    assert isinstance(summary["kills"], int) and summary["kills"] >= kills
    effects = summary["effects"]
    assert isinstance(effects, dict)
    assert all(n <= 1 for n in effects.values()), {t: n for t, n in effects.items() if n > 1}
    assert summary["unfinished"] == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the driver forks its workers")
def test_a_few_random_kills_never_publish_twice(tmp_path: Path) -> None:
    check(run_driver(tmp_path, 20, seed=1), 20)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="the driver forks its workers")
def test_five_hundred_random_kills_never_publish_twice(tmp_path: Path) -> None:
    summary = run_driver(tmp_path, 500, seed=20261203)
    check(summary, 500)
    effects = summary["effects"]
    assert isinstance(effects, dict) and any(n == 1 for n in effects.values())
