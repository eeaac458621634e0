"""FileCheckpointer's journal: deltas, torn tails, damaged records, odd files, I/O faults."""

from __future__ import annotations

import asyncio
import errno
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework_agents import (
    AgentError,
    FileCheckpointer,
    InvalidArgumentError,
    Message,
    StorageIOError,
    ThreadCheckpoint,
    ToolCall,
)
from framework_agents._persist import scan

sys.path.insert(0, str(Path(__file__).parent))  # children import the worker module by name
import checkpoint_journal_workers as workers

KILLS = 500


def _grow(cp: FileCheckpointer, turns: int) -> list[Message]:
    history: list[Message] = []

    async def main() -> None:
        for i in range(turns):
            history.append(Message("user", f"m{i}", id=f"m{i}"))
            await cp.save(ThreadCheckpoint("t1", None, history, {"i": i}))

    asyncio.run(main())
    return history


def _load(root: Path) -> ThreadCheckpoint | None:
    return asyncio.run(FileCheckpointer(root).load("t1"))


def test_each_save_appends_only_its_delta(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    _grow(cp, 3)
    doc = cp.path("t1").read_bytes()
    journal = cp.path("t1").with_name("checkpoint.journal")
    sizes = []
    history = _grow(cp, 0)
    for i in range(3, 8):
        got = _load(tmp_path)
        assert got is not None
        history = [*got.messages, Message("user", f"m{i}", id=f"m{i}")]
        asyncio.run(cp.save(ThreadCheckpoint("t1", None, history, {"i": i})))
        sizes.append(journal.stat().st_size)
    assert cp.path("t1").read_bytes() != doc or sizes  # published once, then deltas
    got = _load(tmp_path)
    assert got is not None and [m.id for m in got.messages] == [f"m{i}" for i in range(8)]
    assert got.state == {"i": 7}


class _Tagged(Message):
    """A message subclass: its own field is not stored, so a read gives a plain Message."""

    tag: str = "x"


def test_a_load_after_a_delta_gives_what_a_fresh_read_gives(tmp_path: Path) -> None:
    async def main() -> None:
        cp = FileCheckpointer(tmp_path)
        first = Message("user", "a", id="a")
        await cp.save(ThreadCheckpoint("t1", None, [first], {"n": 1}))
        state: dict[str, Any] = {"n": 2, "deep": {"k": [1]}}
        second = Message("assistant", "b", id="b", metadata={"m": [1]})
        call = ToolCall("c1", "f", {"x": [1]})
        await cp.save(
            ThreadCheckpoint(
                "t1", None, [first, second], state, call, app_data={"a": [1]}, interrupt_id="i"
            )
        )
        state["deep"]["k"].append(2)  # the caller changes what it saved
        cached, fresh = await cp.load("t1"), await FileCheckpointer(tmp_path).load("t1")
        assert cached is not None and fresh is not None
        assert cached.model_dump() == fresh.model_dump()
        assert cached.state == {"n": 2, "deep": {"k": [1]}}
        assert cached.messages[0] is first and cached.messages[1] is second  # shared values
        cached.state["deep"]["k"].append(3)  # nor does changing what was loaded
        assert cached.app_data is not None
        cached.app_data["a"].append(2)
        again = await cp.load("t1")
        assert again is not None and again.state == {"n": 2, "deep": {"k": [1]}}
        assert again.app_data == {"a": [1]}
        # A subclass is stored as a Message: the cache holds what a read gives, not it.
        tagged = _Tagged(role="user", content="c", id="c", tag="y")
        await cp.save(ThreadCheckpoint("t1", None, [first, second, tagged], {}))
        loaded, fresh = await cp.load("t1"), await FileCheckpointer(tmp_path).load("t1")
        assert loaded is not None and fresh is not None
        assert type(loaded.messages[2]) is Message
        assert loaded.model_dump() == fresh.model_dump()

    asyncio.run(main())


def test_a_torn_last_delta_is_ignored_and_cut_by_the_next_save(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    history = _grow(cp, 4)
    journal = cp.path("t1").with_name("checkpoint.journal")
    data = journal.read_bytes()
    journal.write_bytes(data[:-5])
    got = _load(tmp_path)
    assert got is not None and [m.id for m in got.messages] == ["m0", "m1", "m2"]
    fresh = FileCheckpointer(tmp_path)
    loaded = asyncio.run(fresh.load("t1"))
    assert loaded is not None
    history = [*loaded.messages, Message("user", "again", id="again")]
    asyncio.run(fresh.save(ThreadCheckpoint("t1", None, history, {})))
    assert not scan(journal.read_bytes()).torn
    got = _load(tmp_path)
    assert got is not None and [m.id for m in got.messages] == ["m0", "m1", "m2", "again"]


def test_a_damaged_delta_before_the_tail_is_corrupt_and_never_replaced(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    _grow(cp, 5)
    journal = cp.path("t1").with_name("checkpoint.journal")
    data = bytearray(journal.read_bytes())
    data[len(data) // 2] ^= 0x04
    journal.write_bytes(bytes(data))
    with pytest.raises(AgentError) as info:
        _load(tmp_path)
    assert info.value.code == "CHECKPOINT_CORRUPT"
    with pytest.raises(AgentError) as info:
        asyncio.run(cp.save(ThreadCheckpoint("t1", None, [Message("user", "x")], {})))
    assert info.value.code == "CHECKPOINT_CORRUPT"
    assert journal.read_bytes() == bytes(data)


def test_an_inconsistent_checkpoint_made_with_model_copy_is_refused(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    base = ThreadCheckpoint("t1", None, [Message("user", "q")], {})
    asyncio.run(cp.save(base))
    orphan = Message("tool", "r", tool_call_id="nobody", name="f")
    for bad in (
        base.model_copy(update={"in_flight": [ToolCall("c1", "f", {})]}),
        base.model_copy(
            update={
                "turn": Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})]),
                "results": [orphan],
            }
        ),
    ):
        with pytest.raises(InvalidArgumentError, match="inconsistent"):
            asyncio.run(cp.save(bad))
    assert _load(tmp_path) == base


def test_odd_files_are_refused_without_hanging(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    directory = tmp_path / "threads" / "t1"
    directory.mkdir(parents=True)
    os.mkfifo(directory / "checkpoint.json")
    with pytest.raises(AgentError) as info:
        _load(tmp_path)
    assert info.value.code == "CHECKPOINT_CORRUPT"
    os.unlink(directory / "checkpoint.json")
    outside = tmp_path / "elsewhere.json"
    asyncio.run(FileCheckpointer(tmp_path / "other").save(ThreadCheckpoint("t1", None, [], {})))
    outside.write_bytes((tmp_path / "other" / "threads" / "t1" / "checkpoint.json").read_bytes())
    os.symlink(outside, directory / "checkpoint.json")
    with pytest.raises(AgentError) as info:
        asyncio.run(cp.load("t1"))
    assert info.value.code == "CHECKPOINT_CORRUPT"
    os.unlink(directory / "checkpoint.json")
    os.symlink("/dev/zero", directory / "checkpoint.json")
    with pytest.raises(AgentError) as info:
        asyncio.run(cp.load("t1"))
    assert info.value.code == "CHECKPOINT_CORRUPT"


def _failing(name: str, code: int) -> Callable[..., Any]:
    real: Callable[..., Any] = getattr(os, name)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code))

    del real
    return fail


@pytest.mark.parametrize("syscall", ["fdatasync", "pwrite", "fsync", "replace"])
def test_an_os_error_during_a_save_is_storage_io_and_keeps_the_previous_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syscall: str
) -> None:
    cp = FileCheckpointer(tmp_path)
    history = _grow(cp, 3)
    before = _load(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(os, syscall, _failing(syscall, errno.EIO))
        extended = [*history, Message("user", "new", id="new")]
        try:
            asyncio.run(cp.save(ThreadCheckpoint("t1", None, extended, {"i": 99})))
        except StorageIOError as exc:
            assert exc.code == "STORAGE_IO" and exc.errno == errno.EIO
            assert "threads/t1/checkpoint.json" in str(exc)
            if not exc.may_have_landed:
                assert _load(tmp_path) == before
    got = asyncio.run(cp.load("t1"))
    assert got is not None
    again = [*got.messages, Message("user", "after", id="after")]
    asyncio.run(cp.save(ThreadCheckpoint("t1", None, again, {})))
    final = _load(tmp_path)
    assert final is not None and final.messages[-1].id == "after"
    assert [n for n in os.listdir(tmp_path / "threads" / "t1") if n.endswith(".tmp")] == []


@pytest.mark.slow
def test_eight_processes_appending_to_one_thread_lose_nothing(tmp_path: Path) -> None:
    writers, count = 8, 10
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers)
    procs = [
        ctx.Process(target=workers.append_turns, args=(str(tmp_path), f"w{w}", count, barrier))
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=240)
            assert proc.exitcode == 0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    got = _load(tmp_path)
    assert got is not None
    ids = [m.id for m in got.messages]
    assert len(ids) == len(set(ids)) == writers * count
    for w in range(writers):
        assert [i for i in ids if i.startswith(f"w{w}-")] == [f"w{w}-{s}" for s in range(count)]


def _recv(conn: Any, proc: Any) -> int:
    assert conn.poll(30), f"child sent nothing (exit code {proc.exitcode})"
    value: int = conn.recv()
    return value


@pytest.mark.slow
def test_sigkill_at_random_points_of_saves_and_folds_leaves_an_acknowledged_state(
    tmp_path: Path,
) -> None:
    ctx = mp.get_context("forkserver")
    # The modules the children use (the package itself imports nothing until a name is
    # used): the worker module is found only from its directory (3.11's forkserver
    # ignores the parent's sys.path), so it cannot be the one that loads them.
    ctx.set_forkserver_preload(["framework_agents.checkpoint.file", "checkpoint_journal_workers"])
    rng = random.Random(4242)
    stored = 0
    for _ in range(KILLS):
        reader, writer = ctx.Pipe(duplex=False)
        fold_min = rng.choice([64 << 10, 256])  # appends, or a fold every other save
        proc = ctx.Process(
            target=workers.crash_saver, args=(str(tmp_path), stored, writer, fold_min)
        )
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
        got = _load(tmp_path)
        ids = [] if got is None else [m.id for m in got.messages]
        assert ids == [f"s{i}" for i in range(len(ids))]  # never torn, never a mix
        assert stored + len(acks) <= len(ids) <= stored + len(acks) + 1
        if got is not None:
            assert got.state == {"last": ids[-1]}
        stored = len(ids)
    assert stored > KILLS // 2
