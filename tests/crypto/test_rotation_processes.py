"""Rotation under load: two writer processes while a third rotates; SIGKILL mid-rotation,
then a second rotate() finishes; nothing lost, everything readable under the new key only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from crypto_workers import NEW, cipher, seed, turns

from async_helper import arun
from framework_agents import Cipher, SessionManager, open_store

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
SEEDED = [f"seed{i}" for i in range(12)]
WRITERS = ["w1", "w2"]
COUNT = 6


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "crypto_workers.py"), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _expect(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdout is not None
    got = proc.stdout.readline().strip()
    assert got == line, f"expected {line!r}, got {got!r}"


async def _check(url: str) -> int:
    only_new = Cipher(keys={"new": NEW}, current="new")
    async with open_store(url, cipher=only_new) as store:
        for name, n in [*((s, 3) for s in SEEDED), *((w, COUNT) for w in WRITERS)]:
            thread = await store.checkpointer.load(name)
            assert thread is not None and thread.messages == turns(name, n), name
            assert thread.state == {"turns": n}
            memory = await store.memory(f"mem/{name}", 10_000).load()
            assert {m.id for m in turns(name, n)[-2:]} <= {m.id for m in memory}
            snapshot = await SessionManager(name, store.storage).load_latest()
            assert snapshot is not None and snapshot.data.messages == turns(name, n)
        return await store.rotate()  # opens every value under "new" only; rewrites none


PG_URL = os.environ.get("FA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


# make test kills the rotation on SQLite; the directory and PostgreSQL runs (seconds of
# processes each) are in make stress.
@pytest.fixture(
    params=[
        pytest.param("directory", marks=pytest.mark.slow),
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.slow),
    ]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "directory":
        yield str(tmp_path / "store")
        return
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db.sqlite'}"
        return
    parts = urlsplit(PG_URL)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), 2).close()
    except OSError as exc:
        pytest.skip(f"PostgreSQL server missing: {exc}")
    psycopg = pytest.importorskip("psycopg", reason="extra 'postgres' not installed")
    schema = "fa_test_" + uuid.uuid4().hex[:12]
    yield f"{PG_URL}?schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_rotation_under_load_survives_sigkill(url: str) -> None:
    for name in [*SEEDED, *WRITERS]:
        arun(seed(url, name, 3, "old"))
    writers = [_start("writer", url, name, str(COUNT)) for name in WRITERS]
    rotator = _start("rotator", url, "4")
    try:
        for proc in writers:
            for i in range(COUNT // 2):
                _expect(proc, f"step {i}")
        _expect(rotator, "mid")  # four threads re-sealed, the rest not yet
        for proc in writers:  # the writers go on while the rotation is under way
            assert proc.stdin is not None
            for i in range(COUNT // 2, COUNT):
                proc.stdin.write("go\n")
                proc.stdin.flush()
                _expect(proc, f"step {i}")
        rotator.kill()
        assert rotator.wait(timeout=30) != 0
        for proc in writers:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc in [*writers, rotator]:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()

    async def finish() -> int:
        async with open_store(url, cipher=cipher("new")) as store:
            return await store.rotate()

    assert arun(finish()) > 0  # what the killed rotation had not reached
    assert arun(_check(url)) == 0
