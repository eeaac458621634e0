"""Cross-process: a killed writer leaves a store that reopens consistent; racing creators."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from framework_agents.graph import GraphStore
from processes import close_process

BATCH = 200

WRITER = f"""
import asyncio, sys
from framework_agents.graph import GraphStore

async def main():
    store = GraphStore(sys.argv[1])
    await store.add("ex:Item", "rdfs:subClassOf", "ex:Thing")
    batch = 0
    while True:
        facts = [(f"ex:b{{batch}}i{{i}}", "rdf:type", "ex:Item") for i in range({BATCH})]
        await store.add_many(facts)
        print(batch, flush=True)  # acknowledged: the batch is committed
        batch += 1

asyncio.run(main())
"""


def test_kill_mid_write_leaves_a_reopenable_store(tmp_path: Path) -> None:
    target = tmp_path / "g"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    acked = -1
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= 15:
                break
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-write: the writer never pauses between batches
        proc.wait()
        close_process(proc)
    assert acked >= 15

    async def check() -> None:
        store = GraphStore(target)
        await store.open()
        items = store.quads(predicate="rdf:type", object="ex:Item", entailed=False)
        per_batch: dict[str, int] = {}
        for q in items:
            batch = q.subject.key.split("i")[0]
            per_batch[batch] = per_batch.get(batch, 0) + 1
        for b in range(acked + 1):
            assert per_batch.get(f"ex:b{b}") == BATCH  # every acknowledged batch survived
        assert set(per_batch.values()) == {BATCH}  # no batch was torn
        things = store.quads(predicate="rdf:type", object="ex:Thing")
        assert len(things) == len(items)  # the closure was rebuilt on open
        await store.add("ex:after", "rdf:type", "ex:Item")  # and it takes writes again
        await store.close()

    asyncio.run(check())


async def _open_and_close(path: Path) -> None:
    store = GraphStore(path, lock_timeout=60)  # the others wait their turn
    await store.open()
    await store.add(f"ex:{os.getpid()}", "ex:opened", path.name)
    await store.close()


def _open_fresh_paths(base: str, rounds: int, barrier: Any, results: Any) -> None:
    for r in range(rounds):
        barrier.wait()  # every process opens the same fresh path at once
        try:
            asyncio.run(_open_and_close(Path(base) / f"g{r}"))
            results.put("ok")
        except Exception as exc:  # reported to the test process
            results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow  # 4 spawned processes x 12 rounds; the kill above stays in make test
def test_processes_creating_the_same_store_at_once_all_open_it(tmp_path: Path) -> None:
    """The schema is created once, whoever comes first; the others wait for the lock."""
    ctx = multiprocessing.get_context("spawn")
    workers, rounds = 4, 12
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_open_fresh_paths, args=(str(tmp_path), rounds, barrier, results))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in range(workers * rounds)]
    for proc in procs:
        proc.join(timeout=60)
    assert [o for o in outcomes if o != "ok"] == []

    async def check() -> None:
        for r in range(rounds):
            store = GraphStore(tmp_path / f"g{r}")
            await store.add("ex:a", "ex:p", "ex:b")
            assert len(store.quads(predicate="ex:opened")) == workers
            await store.close()

    asyncio.run(check())
