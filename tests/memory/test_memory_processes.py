"""FileMemory across real processes: concurrent appends and SIGKILL at random moments."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

import pytest

from framework_agents import FileMemory, Message, is_well_formed
from framework_agents._persist import scan

sys.path.insert(0, str(Path(__file__).parent))  # children import the worker module by name
import memory_proc_workers as workers

from processes import run_to_the_end

WRITERS, SAVES = 8, 25
KILLS = 500


def _temp_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def _stored_ids(directory: Path) -> list[str]:
    loaded = asyncio.run(FileMemory(directory, max_messages=workers.BIG_WINDOW).load())
    return [m.id for m in loaded]


@pytest.mark.slow
def test_eight_processes_appending_lose_nothing(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [
        ctx.Process(target=workers.append_worker, args=(str(tmp_path), f"p{w}", SAVES, barrier))
        for w in range(WRITERS)
    ]
    run_to_the_end(procs, timeout=120)

    doc = json.loads((tmp_path / "memory.json").read_bytes())
    assert doc["version"] == 3
    ids = _stored_ids(tmp_path)
    assert len(ids) == len(set(ids)) == WRITERS * SAVES
    for w in range(WRITERS):
        mine = [i for i in ids if i.startswith(f"p{w}-")]
        assert mine == [workers.message_id(f"p{w}", s) for s in range(SAVES)]
    assert _temp_files(tmp_path) == []


def _torn_tail(directory: Path) -> bool:
    try:
        data = (directory / "memory.json.journal").read_bytes()
    except FileNotFoundError:
        return False
    return scan(data).torn


def _recv(conn: object, proc: mp.process.BaseProcess) -> int:
    assert conn.poll(30), f"child sent nothing (exit code {proc.exitcode})"  # type: ignore[attr-defined]
    return conn.recv()  # type: ignore[attr-defined, no-any-return]


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_an_acknowledged_state(tmp_path: Path) -> None:
    # Forking from a server that already imported the package makes a child cost ~10 ms.
    ctx = mp.get_context("forkserver")
    # The modules the children use (the package itself imports nothing until a name is
    # used): the worker module is found only from its directory (3.11's forkserver
    # ignores the parent's sys.path), so it cannot be the one that loads them.
    ctx.set_forkserver_preload(["framework_agents.memory.file", "memory_proc_workers"])
    rng = random.Random(1729)
    stored = 0  # messages s0 .. s<stored-1> are in memory.json
    save_times: list[float] = [0.004]
    killed_mid_write = published_unacked = 0
    started = time.monotonic()

    for _ in range(KILLS):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=workers.crash_worker, args=(str(tmp_path), stored, writer))
        proc.start()
        writer.close()
        try:
            assert _recv(reader, proc) == -1  # about to start its first save
            acks: list[int] = []
            last = time.perf_counter()
            for _ in range(rng.randint(0, 3)):  # how many saves it completes before the kill
                acks.append(_recv(reader, proc))
                now = time.perf_counter()
                save_times.append(now - last)
                last = now
            # The kill lands at a random point of the save now in progress. This pause is
            # the random moment itself, not a wait for any state: progress is only ever
            # learned from the acknowledgements.
            time.sleep(rng.uniform(0, 1.5 * statistics.median(save_times[-20:])))
            os.kill(proc.pid, signal.SIGKILL)  # type: ignore[arg-type]
            proc.join(timeout=30)
            assert proc.exitcode == -signal.SIGKILL
            while reader.poll(0):  # acknowledgements sent before it died
                try:
                    acks.append(reader.recv())
                except EOFError:
                    break
        finally:
            if proc.is_alive():
                proc.kill()
            reader.close()

        assert acks == list(range(stored, stored + len(acks)))
        acknowledged = stored + len(acks)
        ids = _stored_ids(tmp_path)  # loads: never torn, never corrupt
        # Exactly s0 .. s<n-1>: every acknowledged append, at most the one in flight more.
        assert ids == [workers.message_id("s", i) for i in range(len(ids))]
        assert acknowledged <= len(ids) <= acknowledged + 1
        published_unacked += len(ids) - acknowledged
        killed_mid_write += bool(_temp_files(tmp_path)) or _torn_tail(tmp_path)

        # The next save sweeps what the killed writer left behind.
        stored = len(ids)
        next_id = workers.message_id("s", stored)
        sweeper = FileMemory(tmp_path, workers.BIG_WINDOW, stale_temp_seconds=0)
        asyncio.run(sweeper.save([Message("user", next_id, id=next_id)]))
        stored += 1
        assert _temp_files(tmp_path) == []

        assert not _torn_tail(tmp_path)  # the next save cut the torn record

    assert time.monotonic() - started < 240
    # The kills did land inside saves (after the record or document was written, before
    # the acknowledgement; a single small write is never torn by a kill) at least once.
    assert killed_mid_write + published_unacked > 0, (killed_mid_write, published_unacked)


@pytest.mark.slow
def test_two_agents_sharing_one_file_memory_lose_no_turn(tmp_path: Path) -> None:
    """Regression: two agents (two processes) on one FileMemory lost 25 of 50 turns."""
    runs = 25
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [
        ctx.Process(target=workers.agent_worker, args=(str(tmp_path), f"a{w}", runs, barrier))
        for w in range(2)
    ]
    run_to_the_end(procs, timeout=240)
    loaded = asyncio.run(FileMemory(tmp_path, max_messages=workers.BIG_WINDOW).load())
    prompts = [m.text for m in loaded if m.role == "user"]
    answers = [m.text for m in loaded if m.role == "assistant"]
    expected = {workers.message_id(f"a{w}", s) for w in range(2) for s in range(runs)}
    assert sorted(prompts) == sorted(expected)  # every turn once, none lost
    assert sorted(answers) == sorted(f"answer to {p}" for p in expected)
    for w in range(2):  # each agent's turns in its own order
        mine = [p for p in prompts if p.startswith(f"a{w}-")]
        assert mine == [workers.message_id(f"a{w}", s) for s in range(runs)]


@pytest.mark.slow
def test_agents_compacting_one_shared_memory_summarise_each_message_once(tmp_path: Path) -> None:
    """Four processes, each an agent over ``CompactedMemory(FileMemory)`` on one directory:
    what is stored raw plus what the boundary covers is every message made, once. When
    two compacted at once, the boundary of one ended up after newer messages and the
    next compaction counted it again: ``covers`` reached hundreds of millions."""
    procs_n, runs, bound = 4, 12, 12
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs_n)
    procs = [
        ctx.Process(
            target=workers.compacting_agent_worker,
            args=(str(tmp_path), f"c{w}", runs, bound, barrier),
        )
        for w in range(procs_n)
    ]
    run_to_the_end(procs, timeout=240)
    stored = asyncio.run(FileMemory(tmp_path, max_messages=workers.BIG_WINDOW).load())
    boundaries = [m for m in stored if m.kind == "compaction"]
    raw = [m for m in stored if m.kind != "compaction"]
    assert len(boundaries) == 1 and stored[0] is boundaries[0]
    assert boundaries[0].metadata["covers"] + len(raw) == procs_n * runs * 4
    assert len({m.id for m in raw}) == len(raw)
    assert is_well_formed(stored)


@pytest.mark.slow
def test_a_load_beside_clear_in_another_process_never_goes_back(tmp_path: Path) -> None:
    """Regression: clear() wrote under a shared lock, so a load could read the old
    document, then find its journal removed: a state older than the acknowledged one."""
    rounds, readers = 150, 2
    ctx = mp.get_context("spawn")
    acked, stop = ctx.Value("i", 0), ctx.Event()
    pipes = [ctx.Pipe(duplex=False) for _ in range(readers)]
    procs = [
        ctx.Process(target=workers.slow_reader, args=(str(tmp_path), acked, stop, send))
        for _, send in pipes
    ]
    procs.append(
        ctx.Process(target=workers.clearing_writer, args=(str(tmp_path), rounds, acked, stop))
    )
    for proc in procs:
        proc.start()
    try:
        results = [recv.recv() if recv.poll(240) else None for recv, _ in pipes]
        for proc in procs:
            proc.join(timeout=60)
            assert proc.exitcode == 0
    finally:
        stop.set()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert acked.value == rounds
    done = [result for result in results if result is not None]
    assert len(done) == readers
    assert sum(loads for loads, _ in done) > rounds  # the reads overlapped the rounds
    assert [stale for _, stale in done] == [[]] * readers
