"""Checkpointers: the contract (file and in-memory), layout, ids, corruption, locks, crashes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from async_helper import arun, some
from framework_agents import Message, ToolCall
from framework_agents.checkpoint import (
    Checkpointer,
    FileCheckpointer,
    InMemoryCheckpointer,
    ThreadCheckpoint,
)
from framework_agents.checkpoint._file_format import OVERLAY_FIELDS as _OVERLAY
from framework_agents.checkpoint._file_format import Progress as _Progress
from framework_agents.checkpoint.model import to_json
from framework_agents.errors import (
    CheckpointCorruptError,
    InvalidArgumentError,
    ThreadBusyError,
    ThreadIdInvalidError,
)
from processes import close_process

CHILD = Path(__file__).with_name("checkpoint_child.py")

Factory = Callable[[Path], FileCheckpointer | InMemoryCheckpointer]
FACTORIES = [
    pytest.param(lambda root: FileCheckpointer(root), id="file"),
    pytest.param(lambda root: InMemoryCheckpointer(), id="memory"),
]


def sample(thread_id: str = "t1", **extra: object) -> ThreadCheckpoint:
    call = ToolCall("c1", "publish", {"text": "hi", "n": [1, 2]})
    messages = [
        Message("system", "be brief"),
        Message("user", "publish it"),
        Message("assistant", "", tool_calls=[ToolCall("c0", "lookup", {"q": "x"})]),
        Message("tool", "found", tool_call_id="c0", name="lookup"),
        Message("assistant", "done", metadata={"kind": "summary", "k": [1]}),
    ]
    return ThreadCheckpoint(thread_id, None, messages, {"step": 3, "tags": ["a"]}, call, **extra)


@pytest.fixture
def fresh_children() -> Iterator[list[subprocess.Popen[str]]]:
    made: list[subprocess.Popen[str]] = []
    yield made
    for proc in made:
        close_process(proc)


def child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


# -- the contract, for every checkpointer --------------------------------------------


@pytest.mark.parametrize("make", FACTORIES)
def test_save_load_round_trip(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)
    original = sample(turn=Message("assistant", "", tool_calls=[ToolCall("c1", "publish", {})]))

    async def main() -> None:
        assert isinstance(cp, Checkpointer)
        assert await cp.load("t1") is None
        await cp.save(original)
        loaded = await cp.load("t1")
        assert loaded == original
        assert loaded is not original
        assert loaded.saved_at.tzinfo is not None
        assert [m.id for m in loaded.messages] == [m.id for m in original.messages]

    arun(main())


@pytest.mark.parametrize("make", FACTORIES)
def test_save_replaces_and_delete_forgets(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)

    async def main() -> None:
        await cp.save(sample())
        await cp.save(ThreadCheckpoint("t1", None, [Message("user", "second")], {"v": 2}))
        loaded = await cp.load("t1")
        assert loaded is not None and loaded.state == {"v": 2} and loaded.pending is None
        await cp.delete("t1")
        assert await cp.load("t1") is None
        await cp.delete("t1")  # deleting nothing is fine
        await cp.delete("never-existed")

    arun(main())


@pytest.mark.parametrize("make", FACTORIES)
def test_list_threads_is_sorted_and_only_lists_checkpointed_threads(
    tmp_path: Path, make: Factory
) -> None:
    cp = make(tmp_path)

    async def main() -> None:
        assert await cp.list_threads() == []
        for tid in ["b", "a.2", "A", "z-9"]:
            await cp.save(ThreadCheckpoint(tid))
        async with cp.thread_lock("running-no-checkpoint-yet"):
            assert await cp.list_threads() == ["A", "a.2", "b", "z-9"]
        await cp.delete("b")
        assert await cp.list_threads() == ["A", "a.2", "z-9"]

    arun(main())


BAD_IDS = [
    *["", ".", "..", "../x", "a/b", "a\\b", "-a", "_a", ".hidden", "a b", "a\x00", "é"],
    "a" * 129,
]


@pytest.mark.parametrize("make", FACTORIES)
@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_unsafe_thread_ids_are_thread_id_invalid(tmp_path: Path, make: Factory, bad: str) -> None:
    cp = make(tmp_path)

    async def lock() -> None:
        async with cp.thread_lock(bad):
            pass

    for attempt in (cp.load(bad), cp.delete(bad), lock()):
        with pytest.raises(ThreadIdInvalidError) as err:
            arun(attempt)
        assert err.value.code == "THREAD_ID_INVALID"
    with pytest.raises(ThreadIdInvalidError):
        ThreadCheckpoint(bad)
    assert not any(p.name not in {"threads"} for p in tmp_path.rglob("*") if p.is_file())


@pytest.mark.parametrize("good", ["a", "0", "A.b-c_d", "a" * 128, "x..y"])
def test_safe_thread_ids_are_accepted(tmp_path: Path, good: str) -> None:
    cp = FileCheckpointer(tmp_path)

    async def main() -> None:
        await cp.save(ThreadCheckpoint(good))
        assert (await cp.load(good)) is not None

    arun(main())
    assert (tmp_path / "threads" / good / "checkpoint.json").is_file()


def test_non_string_thread_id_is_thread_id_invalid(tmp_path: Path) -> None:
    with pytest.raises(ThreadIdInvalidError):
        arun(FileCheckpointer(tmp_path).load(5))  # type: ignore[arg-type]


@pytest.mark.parametrize("make", FACTORIES)
def test_malformed_history_is_refused(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)
    broken = ThreadCheckpoint(
        "t1", None, [Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})])]
    )
    with pytest.raises(InvalidArgumentError, match="well formed"):
        arun(cp.save(broken))
    with pytest.raises(InvalidArgumentError, match="ThreadCheckpoint"):
        arun(cp.save({"thread_id": "t1"}))  # type: ignore[arg-type]
    assert arun(cp.load("t1")) is None


@pytest.mark.parametrize("make", FACTORIES)
def test_thread_lock_excludes_a_second_run_and_allows_saves(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)

    async def main() -> None:
        async with cp.thread_lock("t1"):
            await cp.save(sample())  # saves inside the run do not deadlock
            with pytest.raises(ThreadBusyError) as err:
                async with cp.thread_lock("t1", timeout=0.2):
                    pass
            assert err.value.code == "THREAD_BUSY"
            async with cp.thread_lock("t2", timeout=0):
                pass  # other threads are independent
        async with cp.thread_lock("t1", timeout=0):
            pass

    arun(main())


@pytest.mark.parametrize("make", FACTORIES)
def test_second_run_waits_for_the_first(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)
    events: list[str] = []

    async def one(name: str, gate: asyncio.Event | None, inside: asyncio.Event) -> None:
        async with cp.thread_lock("t1", timeout=10):
            events.append(f"{name} in")
            inside.set()
            if gate is not None:
                await gate.wait()
            events.append(f"{name} out")

    async def main() -> None:
        gate, first_in = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(one("first", gate, first_in))
        await first_in.wait()
        second = asyncio.create_task(one("second", None, asyncio.Event()))
        for _ in range(50):
            await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(first, second)

    arun(main())
    assert events == ["first in", "first out", "second in", "second out"]


@pytest.mark.parametrize("make", FACTORIES)
def test_save_progress_round_trips_like_save(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)
    base = sample()

    async def main() -> None:
        await cp.save(base)
        step = base.model_copy(
            update={
                "turn": TURN,
                "results": [_result("a")],
                "in_flight": [ToolCall("b", "g", {"x": 1})],
                "state": {"step": 4},
                "decisions": {"g": "approve"},
            }
        )
        await cp.save_progress(step)
        assert await cp.load("t1") == step
        done = step.model_copy(update={"in_flight": [], "results": [_result("a"), _result("b")]})
        await cp.save_progress(done)
        assert await cp.load("t1") == done

    arun(main())


# -- FileCheckpointer specifics -------------------------------------------------------


def test_layout_and_format(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(sample()))
    path = tmp_path / "threads" / "t1" / "checkpoint.json"
    assert cp.path("t1") == path
    envelope = json.loads(path.read_bytes())
    # Layout v3: the checkpoint in a checksummed envelope naming its journal tokens.
    assert list(envelope) == ["version", "journal", "folded", "check", "checkpoint"]
    assert envelope["version"] == 3
    doc = envelope["checkpoint"]
    assert doc["version"] == 2  # a journal may follow it: a release without journals refuses it
    assert some(arun(cp.load("t1"))).version == 1  # the value's version
    assert doc["thread_id"] == "t1"
    assert doc["pending"] == {"id": "c1", "name": "publish", "args": {"text": "hi", "n": [1, 2]}}
    assert datetime.fromisoformat(doc["saved_at"]).tzinfo is not None
    # No lock file or temp file is left behind once nobody holds the thread.
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoint.json"]


CORRUPT = [
    pytest.param(b"", "document", id="empty"),
    pytest.param(b"{not json", "document", id="garbage"),
    pytest.param(b"[1, 2]", "document", id="wrong-shape"),
    pytest.param(b'{"thread_id": "t1", "messages": 5}', "messages", id="bad-field"),
    pytest.param(b'{"thread_id": "t1", "surprise": 1}', "surprise", id="unknown-key"),
    pytest.param(b'{"thread_id": "other"}', "belongs to thread", id="other-thread"),
    pytest.param(b'{"thread_id": "../x"}', "thread id", id="unsafe-inner-id"),
    pytest.param(
        b'{"version": 99, "thread_id": "t1", "new_field": {}}', "newer", id="newer-version"
    ),
    pytest.param(b'{"version": 0, "thread_id": "t1"}', "version", id="version-zero"),
]


@pytest.mark.parametrize(("data", "needle"), CORRUPT)
def test_corrupt_checkpoint_fails_loudly_and_is_never_overwritten(
    tmp_path: Path, data: bytes, needle: str
) -> None:
    path = tmp_path / "threads" / "t1" / "checkpoint.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    cp = FileCheckpointer(tmp_path)
    with pytest.raises(CheckpointCorruptError, match=needle) as err:
        arun(cp.load("t1"))
    assert err.value.code == "CHECKPOINT_CORRUPT"
    with pytest.raises(CheckpointCorruptError):
        arun(cp.save(sample()))
    assert path.read_bytes() == data
    arun(cp.delete("t1"))  # deleting is how a person recovers
    assert not path.exists()
    arun(cp.save(sample()))


def test_a_file_written_by_another_instance_is_validated_before_overwrite(tmp_path: Path) -> None:
    one, two = FileCheckpointer(tmp_path), FileCheckpointer(tmp_path)

    async def main() -> None:
        await one.save(sample())
        await two.save(ThreadCheckpoint("t1", None, [], {"by": "two"}))
        await one.save(ThreadCheckpoint("t1", None, [], {"by": "one"}))  # valid: fine
        one.path("t1").write_bytes(b"torn")  # corrupted behind our back
        with pytest.raises(CheckpointCorruptError):
            await one.save(sample())
        assert one.path("t1").read_bytes() == b"torn"

    arun(main())


def _progress_step(base: ThreadCheckpoint) -> ThreadCheckpoint:
    return base.model_copy(
        update={"turn": TURN, "results": [_result("a")], "in_flight": [ToolCall("b", "g", {})]}
    )


def _old_progress(cp: FileCheckpointer, step: ThreadCheckpoint) -> Path:
    """Write ``progress.json`` as the release before the journal did (save_progress)."""
    path = cp.path(step.thread_id)
    base = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    fields = {name: getattr(step, name) for name in _OVERLAY}
    progress = path.with_name("progress.json")
    progress.write_bytes(
        to_json(_Progress(version=1, thread_id=step.thread_id, base=base, **fields))
    )
    return progress


def test_a_save_that_extends_the_stored_history_appends_a_delta(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    base = sample()
    arun(cp.save(base))
    path = cp.path("t1")
    before = (path.read_bytes(), path.stat().st_ino, path.stat().st_mtime_ns)
    arun(cp.save_progress(_progress_step(base)))
    assert (path.read_bytes(), path.stat().st_ino, path.stat().st_mtime_ns) == before
    journal = path.with_name("checkpoint.journal")
    assert journal.is_file()
    assert journal.stat().st_size < len(before[0])  # the delta, not the history
    # Another instance (another process) sees the merged checkpoint.
    assert arun(FileCheckpointer(tmp_path).load("t1")) == _progress_step(base)
    # A save of another history publishes the whole checkpoint and drops the journal.
    other = ThreadCheckpoint("t1", None, [Message("user", "other")], {"v": 2})
    arun(cp.save(other))
    assert not journal.exists()
    assert arun(cp.load("t1")) == other


def test_a_progress_json_of_the_previous_release_is_applied_then_folded(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    base = sample()
    arun(cp.save(base))
    progress = _old_progress(cp, _progress_step(base))
    loaded = arun(FileCheckpointer(tmp_path).load("t1"))
    assert loaded == _progress_step(base)
    assert loaded is not None
    arun(cp.save(loaded.model_copy(update={"state": {"after": 1}})))
    assert not progress.exists()
    got = arun(FileCheckpointer(tmp_path).load("t1"))
    assert got is not None and got.state == {"after": 1} and got.turn == TURN


def test_save_progress_falls_back_to_a_full_save(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    base = sample()
    arun(cp.save(base))
    grown = _progress_step(base).model_copy(
        update={"messages": [*base.messages, Message("user", "more")]}
    )
    arun(cp.save_progress(grown))  # a different history: the delta would be wrong
    assert not cp.path("t1").with_name("progress.json").exists()
    assert arun(cp.load("t1")) == grown
    stranger = FileCheckpointer(tmp_path)  # never saw the file: cannot vouch for it
    step = _progress_step(grown)
    arun(stranger.save_progress(step))
    assert arun(cp.load("t1")) == step
    with pytest.raises(InvalidArgumentError, match="well formed"):
        bad = step.model_copy(update={"messages": [TURN]})
        arun(FileCheckpointer(tmp_path).save_progress(bad))


def test_a_progress_file_of_an_older_checkpoint_is_ignored(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    base = sample()
    arun(cp.save(base))
    progress = _old_progress(cp, _progress_step(base))
    leftover = progress.read_bytes()
    newer = ThreadCheckpoint("t1", None, [Message("user", "new")], {"v": 2})
    arun(cp.save(newer))
    progress.write_bytes(leftover)  # as if the process died before removing it
    assert arun(FileCheckpointer(tmp_path).load("t1")) == newer


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{nope", id="garbage"),
        pytest.param(b'{"version": 7}', id="newer"),
        pytest.param(b'{"thread_id": "t1", "base": "x", "surprise": 1}', id="unknown-key"),
    ],
)
def test_a_corrupt_progress_file_fails_loudly_and_is_kept(tmp_path: Path, data: bytes) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(sample()))
    progress = cp.path("t1").with_name("progress.json")
    progress.write_bytes(data)
    with pytest.raises(CheckpointCorruptError, match=r"progress\.json"):
        arun(cp.load("t1"))
    with pytest.raises(CheckpointCorruptError):
        arun(cp.save(sample()))
    assert progress.read_bytes() == data
    arun(cp.delete("t1"))
    assert not progress.exists()


def test_an_inconsistent_progress_file_is_corrupt(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    base = sample()
    arun(cp.save(base))
    progress = _old_progress(cp, _progress_step(base))
    doc = json.loads(progress.read_bytes())
    doc["results"][0]["tool_call_id"] = "nobody"
    progress.write_text(json.dumps(doc))
    with pytest.raises(CheckpointCorruptError, match=r"progress\.json"):
        arun(FileCheckpointer(tmp_path).load("t1"))


def test_stale_temp_files_are_swept_on_save(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(sample()))
    stale = cp.path("t1").with_name(".checkpoint.json.deadbeef.tmp")
    stale.write_bytes(b"half a checkpoint")
    os.utime(stale, (0, 0))
    arun(cp.save(sample()))
    assert not stale.exists()


def test_delete_keeps_the_directory_of_a_running_thread(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)

    async def main() -> None:
        await cp.save(sample())
        async with cp.thread_lock("t1"):
            await cp.delete("t1")
            assert (tmp_path / "threads" / "t1" / "run.lock").exists()
            await cp.save(sample())  # the run goes on saving
        await cp.delete("t1")
        assert not (tmp_path / "threads" / "t1").exists()

    arun(main())


def test_a_stale_write_lock_of_a_dead_writer_is_reclaimed(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path, lock_timeout=2)
    lock = tmp_path / "threads" / "t1" / "checkpoint.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 999999, "host": "h", "token": "t", "acquired_at": 0}))
    arun(cp.save(sample()))  # nobody holds the kernel lock: proof of death
    assert not lock.exists()


def test_concurrent_saves_of_many_tasks_never_tear(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)

    async def writer(i: int) -> None:
        for j in range(5):
            await cp.save(ThreadCheckpoint("t1", None, [Message("user", f"{i}/{j}")], {"i": i}))
            loaded = await cp.load("t1")
            assert loaded is not None and len(loaded.messages) == 1

    async def main() -> None:
        await asyncio.gather(*(writer(i) for i in range(8)))

    arun(main())
    assert sorted(p.name for p in cp.path("t1").parent.iterdir()) == ["checkpoint.json"]


def test_thread_lock_across_processes(
    tmp_path: Path, fresh_children: list[subprocess.Popen[str]]
) -> None:
    proc = child("hold-thread", str(tmp_path), "t1")
    fresh_children.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    cp = FileCheckpointer(tmp_path)

    async def busy() -> None:
        with pytest.raises(ThreadBusyError, match="busy"):
            async with cp.thread_lock("t1", timeout=0.3):
                pass
        await cp.save(sample())  # the write lock is separate from the run lock

    arun(busy())
    proc.send_signal(signal.SIGKILL)  # the run dies holding its thread
    proc.wait()
    close_process(proc)

    async def free() -> None:
        async with cp.thread_lock("t1", timeout=5):
            pass

    arun(free())


# Two kills in make test, six in make stress (a writer process each).
@pytest.mark.parametrize("kills", [2, pytest.param(6, marks=pytest.mark.slow)])
def test_a_writer_killed_mid_save_never_leaves_an_unreadable_checkpoint(
    tmp_path: Path, fresh_children: list[subprocess.Popen[str]], kills: int
) -> None:
    cp = FileCheckpointer(tmp_path, lock_timeout=10)
    rng = random.Random(6)
    last = 0
    for _round in range(kills):
        proc = child("save-loop", str(tmp_path), "t1")
        fresh_children.append(proc)
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 20)):
            line = proc.stdout.readline().strip()
            assert line.startswith("saved ")
        proc.send_signal(signal.SIGKILL)  # somewhere inside a later save
        proc.wait()
        close_process(proc)
        loaded = arun(cp.load("t1"))
        assert isinstance(loaded, ThreadCheckpoint)
        assert loaded.state["n"] >= 1
        assert len(loaded.messages) == loaded.state["n"] % 50
        last = loaded.state["n"]
        # The next writer reclaims the dead writer's lock and saves at once.
        arun(cp.save(ThreadCheckpoint("t1", None, [], {"n": last})))
    assert last >= 1


# -- the model ------------------------------------------------------------------------


def test_positional_construction_and_defaults() -> None:
    at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    call = ToolCall("c1", "f", {"a": 1})
    cp = ThreadCheckpoint("t1", at, [Message("user", "hi")], {"k": 1}, call)
    assert (cp.thread_id, cp.saved_at, cp.state, cp.pending) == ("t1", at, {"k": 1}, call)
    assert cp.version == 1
    bare = ThreadCheckpoint(thread_id="t2")
    assert bare.messages == [] and bare.state == {} and bare.pending is None
    assert bare.in_flight == [] and bare.turn is None and bare.results == []
    assert bare.decisions == {}
    assert bare.outcome_unknown is False
    assert bare.saved_at.tzinfo is not None


def test_naive_saved_at_is_taken_as_utc() -> None:
    cp = ThreadCheckpoint("t1", datetime(2024, 1, 1, 12, 0))
    assert cp.saved_at == datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def test_turn_must_be_an_assistant_turn_with_calls() -> None:
    with pytest.raises(ValueError, match="turn"):
        ThreadCheckpoint("t1", turn=Message("user", "hi"))


TURN = Message("assistant", "", tool_calls=[ToolCall("a", "f", {}), ToolCall("b", "g", {"x": 1})])


def _result(call_id: str) -> Message:
    return Message("tool", "ok", tool_call_id=call_id, name="f", id=f"r-{call_id}")


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        pytest.param({"results": [_result("a")]}, "need the turn", id="results-without-turn"),
        pytest.param({"in_flight": [ToolCall("a", "f", {})]}, "need the turn", id="flight-no-turn"),
        pytest.param({"turn": TURN, "results": [_result("zz")]}, "no open call", id="stray-result"),
        pytest.param(
            {"turn": TURN, "results": [_result("a"), _result("a")]}, "no open call", id="twice"
        ),
        pytest.param(
            {"turn": TURN, "in_flight": [ToolCall("zz", "f", {})]},
            "no open call",
            id="stray-flight",
        ),
        pytest.param(
            {"turn": TURN, "results": [_result("a")], "in_flight": [ToolCall("a", "f", {})]},
            "no open call",
            id="answered-flight",
        ),
        pytest.param({"outcome_unknown": True}, "outcome_unknown", id="unknown-without-flight"),
    ],
)
def test_turn_bookkeeping_must_be_consistent(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        ThreadCheckpoint("t1", **fields)


def test_resumable_history_appends_the_executed_part_of_the_turn() -> None:
    base = [Message("user", "go")]
    cp = ThreadCheckpoint("t1", None, base, turn=TURN, results=[_result("b")])
    assert cp.resumable_history() == [*base, TURN, _result("b")]
    assert ThreadCheckpoint("t1", None, base).resumable_history() == base


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_well_formed_history_round_trips_through_a_file(
    tmp_path: Path,
    history_strategy: Callable[..., st.SearchStrategy[list[Message]]],
    data: st.DataObject,
) -> None:
    history = data.draw(history_strategy(well_formed=True))
    state = data.draw(
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4)
    )
    cp = FileCheckpointer(tmp_path)
    original = ThreadCheckpoint("prop", None, history, state)
    arun(cp.save(original))
    assert arun(cp.load("prop")) == original


def test_a_load_hands_out_the_saved_message_objects_when_they_read_back_equal(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        cp = FileCheckpointer(tmp_path)
        first = [Message("user", "hi"), Message("assistant", "hello", metadata={"n": 1})]
        await cp.save(ThreadCheckpoint("t", None, first))  # published whole
        more = [*first, Message("user", "again")]
        await cp.save(ThreadCheckpoint("t", None, more))  # a journal delta
        loaded = await cp.load("t")
        assert loaded is not None
        assert all(a is b for a, b in zip(loaded.messages, more, strict=True))
        fresh = await FileCheckpointer(tmp_path).load("t")  # another instance reads the file
        assert fresh is not None and fresh.messages == more
        assert not any(a is b for a, b in zip(fresh.messages, more, strict=True))

    asyncio.run(main())


def test_a_release_that_reads_no_journal_refuses_the_document_instead_of_reading_it_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from framework_agents.checkpoint import model as model_module

    cp = FileCheckpointer(tmp_path)
    history = [Message("user", "a")]
    arun(cp.save(ThreadCheckpoint("t1", None, history)))
    arun(cp.save(ThreadCheckpoint("t1", None, [*history, Message("assistant", "b")])))  # journal
    monkeypatch.setattr(model_module, "CHECKPOINT_FORMAT_VERSION", 1)  # a release before it
    with pytest.raises(CheckpointCorruptError, match="newer"):
        arun(FileCheckpointer(tmp_path).load("t1"))
