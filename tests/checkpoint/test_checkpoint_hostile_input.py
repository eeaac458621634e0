"""Checkpointers and the file lock under hostile input: strict reads, values JSON cannot
hold, junk on disk, argument validation, descriptors, a lock file deleted while held."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import Message, ToolCall
from framework_agents.checkpoint import (
    FileCheckpointer,
    InMemoryCheckpointer,
    ThreadCheckpoint,
    with_file_lock,
)
from framework_agents.checkpoint import lock as lock_module
from framework_agents.checkpoint._file_format import OVERLAY_FIELDS as _OVERLAY
from framework_agents.checkpoint._file_format import Progress as _Progress
from framework_agents.checkpoint.model import to_json
from framework_agents.errors import (
    CheckpointCorruptError,
    InvalidArgumentError,
    LockTimeoutError,
    StateNotJsonError,
    ThreadBusyError,
)


def sample(thread_id: str = "t1") -> ThreadCheckpoint:
    messages = [Message("user", "publish it"), Message("assistant", "done")]
    return ThreadCheckpoint(thread_id, None, messages, {"step": 3})


# -- strict reads: what would not read back equal once saved again is corrupt ----------

STRICT_CORRUPT = [
    pytest.param(b'{"thread_id": "t1", "state": {"x": NaN}}', id="nan"),
    pytest.param(b'{"thread_id": "t1", "state": {"x": Infinity}}', id="infinity"),
    pytest.param(b'{"thread_id": "t1", "state": {"x": -Infinity}}', id="minus-infinity"),
    pytest.param(b'{"thread_id": "t1", "state": {"x": 1e999}}', id="out-of-range"),
    pytest.param(b'{"thread_id": "t1", "state": {"x": 1, "x": 2}}', id="duplicate-key"),
    pytest.param(b'{"thread_id": "t1", "thread_id": "t1"}', id="duplicate-top-key"),
    pytest.param(b'{"version": "1", "thread_id": "t1"}', id="version-string"),
    pytest.param(b'{"version": 1.0, "thread_id": "t1"}', id="version-float"),
    pytest.param(b'{"version": true, "thread_id": "t1"}', id="version-bool"),
    pytest.param(
        b'{"thread_id": "t1", "messages": [{"role": "user", "content": "\\ud800"}]}',
        id="lone-surrogate",
    ),
]


@pytest.mark.parametrize("data", STRICT_CORRUPT)
def test_a_checkpoint_that_would_not_read_back_equal_is_corrupt_and_kept(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "threads" / "t1" / "checkpoint.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    cp = FileCheckpointer(tmp_path)
    with pytest.raises(CheckpointCorruptError) as err:
        arun(cp.load("t1"))
    assert err.value.code == "CHECKPOINT_CORRUPT"
    with pytest.raises(CheckpointCorruptError):
        arun(cp.save(sample()))
    assert path.read_bytes() == data


def test_every_truncation_of_a_real_checkpoint_is_corrupt(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    call = ToolCall("c1", "publish", {"text": "hi"})
    arun(cp.save(ThreadCheckpoint("t1", None, sample().messages, {"a": [1.5, None]}, call)))
    data = cp.path("t1").read_bytes()
    for cut in range(len(data)):  # every proper prefix
        cp.path("t1").write_bytes(data[:cut])
        with pytest.raises(CheckpointCorruptError):
            arun(FileCheckpointer(tmp_path).load("t1"))
        assert cp.path("t1").read_bytes() == data[:cut]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'"state": {"x": NaN}', id="nan"),
        pytest.param(b'"state": {"x": 1, "x": 2}', id="duplicate-key"),
    ],
)
def test_a_progress_file_that_would_not_read_back_equal_is_corrupt(
    tmp_path: Path, data: bytes
) -> None:
    cp = FileCheckpointer(tmp_path)
    base = sample()
    arun(cp.save(base))
    path = cp.path("t1")
    digest = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    step = base.model_copy(update={"state": {"x": 1}})
    fields = {name: getattr(step, name) for name in _OVERLAY}
    progress = path.with_name("progress.json")  # as the release before the journal wrote it
    progress.write_bytes(to_json(_Progress(version=1, thread_id="t1", base=digest, **fields)))
    text = progress.read_bytes().replace(b'"state":{"x":1}', data)
    assert text != progress.read_bytes()
    progress.write_bytes(text)
    with pytest.raises(CheckpointCorruptError):
        arun(FileCheckpointer(tmp_path).load("t1"))
    assert progress.read_bytes() == text


# -- values JSON cannot hold are refused on save, never stored altered ---------------

NAN = float("nan")
TURN_CALL = ToolCall("c9", "publish", {"text": "x"})


def _not_json(kind: str) -> ThreadCheckpoint:
    base = sample()
    if kind == "state-nan":
        return base.model_copy(update={"state": {"x": NAN}})
    if kind == "state-infinity":
        return base.model_copy(update={"state": {"deep": [{"x": float("inf")}]}})
    if kind == "state-object":
        return base.model_copy(update={"state": {"x": {1, 2}}})
    if kind == "state-int-key":
        return base.model_copy(update={"state": {"x": {1: "a"}}})
    if kind == "metadata-nan":
        return ThreadCheckpoint("t1", None, [Message("user", "u", metadata={"score": NAN})])
    if kind == "args-nan":
        call = ToolCall("c1", "f", {"v": NAN})
        messages = [
            Message("user", "u"),
            Message("assistant", "", tool_calls=[call]),
            Message("tool", "r", tool_call_id="c1", name="f"),
        ]
        return ThreadCheckpoint("t1", None, messages)
    if kind == "pending-nan":
        return base.model_copy(update={"pending": ToolCall("c1", "f", {"v": NAN})})
    if kind == "decisions-nan":
        return base.model_copy(update={"decisions": {"f": {"edit": {"v": NAN}}}})
    if kind == "turn-nan":
        turn = Message("assistant", "", tool_calls=[ToolCall("c9", "f", {"v": NAN})])
        return base.model_copy(update={"turn": turn})
    if kind == "lone-surrogate":
        return ThreadCheckpoint("t1", None, [Message("user", "bad \ud800 text")])
    raise AssertionError(kind)


NOT_JSON = [
    "state-nan",
    "state-infinity",
    "state-object",
    "state-int-key",
    "metadata-nan",
    "args-nan",
    "pending-nan",
    "decisions-nan",
    "turn-nan",
    "lone-surrogate",
]


@pytest.mark.parametrize("kind", NOT_JSON)
@pytest.mark.parametrize("method", ["save", "save_progress"])
@pytest.mark.parametrize("which", ["file", "memory"])
def test_values_json_cannot_hold_are_state_not_json_and_nothing_is_written(
    tmp_path: Path, kind: str, method: str, which: str
) -> None:
    cp = FileCheckpointer(tmp_path) if which == "file" else InMemoryCheckpointer()
    before = sample()

    async def main() -> None:
        await cp.save(before)
        with pytest.raises(StateNotJsonError) as err:
            await getattr(cp, method)(_not_json(kind))
        assert err.value.code == "STATE_NOT_JSON"
        assert await cp.load("t1") == before

    arun(main())


# -- junk where a checkpoint should be --------------------------------------------------


def test_a_directory_named_checkpoint_json_is_corrupt_and_kept(tmp_path: Path) -> None:
    junk = tmp_path / "threads" / "t1" / "checkpoint.json"
    (junk / "inner").mkdir(parents=True)
    cp = FileCheckpointer(tmp_path)
    for attempt in (cp.load("t1"), cp.save(sample()), cp.delete("t1")):
        with pytest.raises(CheckpointCorruptError, match="not a file"):
            arun(attempt)
    assert (junk / "inner").is_dir()
    assert arun(cp.list_threads()) == []


def test_a_file_where_the_thread_directory_should_be_is_corrupt_and_kept(
    tmp_path: Path,
) -> None:
    junk = tmp_path / "threads" / "t1"
    junk.parent.mkdir()
    junk.write_text("not a directory")
    cp = FileCheckpointer(tmp_path)
    assert arun(cp.load("t1")) is None  # nothing checkpointed there

    async def lock() -> None:
        async with cp.thread_lock("t1"):
            pass

    for attempt in (cp.save(sample()), cp.save_progress(sample()), lock()):
        with pytest.raises(CheckpointCorruptError, match="not a directory"):
            arun(attempt)
    arun(cp.delete("t1"))  # no checkpoint: nothing to forget
    assert junk.read_text() == "not a directory"
    assert arun(cp.list_threads()) == []


def test_a_file_where_the_threads_directory_should_be_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "threads").write_text("junk")
    cp = FileCheckpointer(tmp_path)
    assert arun(cp.load("t1")) is None and arun(cp.list_threads()) == []
    with pytest.raises(CheckpointCorruptError, match="not a directory"):
        arun(cp.save(sample()))
    assert (tmp_path / "threads").read_text() == "junk"


def test_list_threads_ignores_junk(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(sample("good")))
    threads = tmp_path / "threads"
    for name in [".hidden", "bad name", "-dash", "é", "x" * 129]:
        (threads / name).mkdir()
        (threads / name / "checkpoint.json").write_bytes(b"{}")
    (threads / "a-file").write_text("x")
    (threads / "only-locks").mkdir()
    (threads / "only-locks" / "run.lock").write_text("")
    (threads / "only-locks" / "progress.json").write_text("{}")
    (threads / "dir-checkpoint" / "checkpoint.json").mkdir(parents=True)
    (threads / "empty").mkdir()
    assert arun(cp.list_threads()) == ["good"]


# -- argument validation: a clear INVALID_ARGUMENT, never a stray TypeError ------------

BAD_WAITS = [
    pytest.param("1", id="str"),
    pytest.param([1], id="list"),
    pytest.param(True, id="bool"),
    pytest.param(10**400, id="huge-int"),
    pytest.param(-0.5, id="negative"),
    pytest.param(float("nan"), id="nan"),
    pytest.param(float("-inf"), id="minus-inf"),
]


@pytest.mark.parametrize("value", BAD_WAITS)
@pytest.mark.parametrize("name", ["timeout", "stale_after"])
def test_bad_lock_waits_are_invalid_argument(tmp_path: Path, name: str, value: object) -> None:
    async def main() -> None:
        async with with_file_lock(tmp_path / "a.lock", **{name: value}):  # type: ignore[arg-type]
            pass

    with pytest.raises(InvalidArgumentError, match=name) as err:
        arun(main())
    assert err.value.code == "INVALID_ARGUMENT"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("stale_after", None, id="stale-none"),
        pytest.param("stale_after", 0, id="stale-zero"),
    ],
)
def test_stale_after_must_be_positive(tmp_path: Path, name: str, value: object) -> None:
    async def main() -> None:
        async with with_file_lock(tmp_path / "a.lock", **{name: value}):  # type: ignore[arg-type]
            pass

    with pytest.raises(InvalidArgumentError, match=name):
        arun(main())


@pytest.mark.parametrize("kwargs", [{"timeout": None}, {"timeout": float("inf")}, {"timeout": 0}])
def test_good_lock_waits_are_accepted(tmp_path: Path, kwargs: dict[str, object]) -> None:
    async def main() -> None:
        async with with_file_lock(tmp_path / "a.lock", stale_after=float("inf"), **kwargs):  # type: ignore[arg-type]
            assert (tmp_path / "a.lock").exists()

    arun(main())
    assert not (tmp_path / "a.lock").exists()


@pytest.mark.parametrize("path", [None, 5, b"a.lock", ""], ids=["none", "int", "bytes", "empty"])
def test_bad_lock_paths_are_invalid_argument(path: object) -> None:
    async def main() -> None:
        async with with_file_lock(path):  # type: ignore[arg-type]
            pass

    with pytest.raises(InvalidArgumentError, match="lock path"):
        arun(main())


def test_a_directory_at_the_lock_path_is_invalid_argument(tmp_path: Path) -> None:
    (tmp_path / "a.lock").mkdir()

    async def main() -> None:
        async with with_file_lock(tmp_path / "a.lock", timeout=1):
            pass

    with pytest.raises(InvalidArgumentError, match="directory"):
        arun(main())
    assert (tmp_path / "a.lock").is_dir()


@pytest.mark.parametrize("missing", ["nope/a.lock", "file/a.lock"])
def test_a_lock_in_a_missing_directory_is_invalid_argument_and_file_not_found(
    tmp_path: Path, missing: str
) -> None:
    (tmp_path / "file").write_text("a file, not a directory")

    async def main() -> None:
        async with with_file_lock(tmp_path / missing, timeout=1):
            pass

    with pytest.raises(InvalidArgumentError, match="directory") as err:
        arun(main())
    assert isinstance(err.value, FileNotFoundError)  # still an OSError for old callers
    assert err.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lock_timeout": "1"},
        {"lock_timeout": True},
        {"lock_timeout": -1},
        {"stale_after": "30"},
        {"stale_after": None},
        {"stale_after": float("nan")},
    ],
    ids=repr,
)
def test_bad_checkpointer_arguments_are_invalid_argument(
    tmp_path: Path, kwargs: dict[str, object]
) -> None:
    with pytest.raises(InvalidArgumentError):
        FileCheckpointer(tmp_path, **kwargs)  # type: ignore[arg-type]
    if "lock_timeout" in kwargs:
        with pytest.raises(InvalidArgumentError):
            InMemoryCheckpointer(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("root", [None, 5, b"x"], ids=repr)
def test_a_bad_checkpointer_root_is_invalid_argument(root: object) -> None:
    with pytest.raises(InvalidArgumentError, match="root"):
        FileCheckpointer(root)  # type: ignore[arg-type]


@pytest.mark.parametrize("which", ["file", "memory"])
@pytest.mark.parametrize("timeout", ["1", True, -1, float("nan")], ids=repr)
def test_a_bad_thread_lock_timeout_is_invalid_argument(
    tmp_path: Path, which: str, timeout: object
) -> None:
    cp = FileCheckpointer(tmp_path) if which == "file" else InMemoryCheckpointer()

    async def main() -> None:
        async with cp.thread_lock("t1", timeout=timeout):  # type: ignore[arg-type]
            pass

    with pytest.raises(InvalidArgumentError, match="timeout"):
        arun(main())


# -- release, descriptors, a lock file deleted under its holder ------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_no_descriptor_leaks_on_any_path(tmp_path: Path) -> None:
    lock = tmp_path / "a.lock"
    corrupt = tmp_path / "threads" / "bad" / "checkpoint.json"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"{torn")

    async def body() -> None:
        for _ in range(20):
            async with with_file_lock(lock):
                pass
            with pytest.raises(RuntimeError):
                async with with_file_lock(lock):
                    raise RuntimeError("inside")
            async with with_file_lock(lock):  # a waiter that times out
                with pytest.raises(LockTimeoutError):
                    async with with_file_lock(lock, timeout=0):
                        pass
            holder_in = asyncio.Event()
            holder = asyncio.create_task(_hold(lock, holder_in))
            await holder_in.wait()
            waiter = asyncio.create_task(_enter(lock))
            await asyncio.sleep(0)
            waiter.cancel()
            holder.cancel()
            for task in (waiter, holder):
                with pytest.raises(asyncio.CancelledError):
                    await task
            cp = FileCheckpointer(tmp_path, lock_timeout=0)
            await cp.save(sample())
            await cp.save_progress((await cp.load("t1")) or sample())
            with pytest.raises(CheckpointCorruptError):
                await cp.load("bad")
            with pytest.raises(CheckpointCorruptError):
                await cp.save(sample("bad"))
            async with cp.thread_lock("t1"):
                with pytest.raises(ThreadBusyError):
                    async with cp.thread_lock("t1"):
                        pass
            await cp.delete("t1")
            await cp.list_threads()

    arun(body())  # warm up: worker threads, imports, the loop's own descriptors
    before = _open_fds()
    arun(body())
    assert _open_fds() == before
    assert not lock.exists()


async def _enter(path: Path) -> None:
    async with with_file_lock(path):
        pass


async def _hold(path: Path, inside: asyncio.Event) -> None:
    async with with_file_lock(path):
        inside.set()
        await asyncio.Event().wait()


def test_release_after_the_lock_file_was_deleted_by_someone_else(tmp_path: Path) -> None:
    """Deleting a held lock file breaks exclusion (do not): a waiter elsewhere gets in.
    The first holder's release then neither fails nor removes the newcomer's lock."""
    path = tmp_path / "a.lock"
    order: list[str] = []

    def elsewhere(step: str) -> None:
        async def take() -> None:
            async with with_file_lock(path, timeout=0):
                order.append(step)
                if step == "keeps it":
                    holding.set()
                    await asyncio.to_thread(release_newcomer.wait)

        asyncio.run(take())  # another event loop: only the file excludes it

    holding, release_newcomer = threading.Event(), threading.Event()

    async def main() -> None:
        async with with_file_lock(path):
            os.unlink(path)  # someone removes the lock file of a live holder
            await asyncio.to_thread(elsewhere, "got in")
            assert not path.exists()  # the newcomer released its own file
            newcomer = threading.Thread(target=elsewhere, args=("keeps it",))
            newcomer.start()
            await asyncio.to_thread(holding.wait)
        assert path.exists()  # our release left the newcomer's file alone
        release_newcomer.set()
        await asyncio.to_thread(newcomer.join)
        assert not path.exists()
        async with with_file_lock(path, timeout=0):
            order.append("free again")

    arun(main())
    assert order == ["got in", "keeps it", "free again"]


# -- degraded mode (no flock): a cancel that arrives while the heartbeat stops -----------


def test_without_flock_a_cancel_during_release_is_not_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "no locks available (simulated)")

    monkeypatch.setattr(lock_module, "_flock", no_flock)
    in_utime, let_go = threading.Event(), threading.Event()
    real_utime = os.utime

    def slow_utime(target: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(target, int):  # the heartbeat's utime(fd)
            in_utime.set()
            let_go.wait(10)
        real_utime(target, *args, **kwargs)

    monkeypatch.setattr(os, "utime", slow_utime)
    path = tmp_path / "a.lock"
    after_block: list[str] = []

    async def holder(leaving: asyncio.Event) -> None:
        async with with_file_lock(path, stale_after=0.02):
            await asyncio.to_thread(in_utime.wait, 10)  # a heartbeat is mid-utime
            leaving.set()
        after_block.append("went on")  # must not run: the task was cancelled

    async def main() -> None:
        leaving = asyncio.Event()
        task = asyncio.create_task(holder(leaving))
        await leaving.wait()
        for _ in range(5):
            await asyncio.sleep(0)  # the holder now waits for its heartbeat to stop
        task.cancel()
        let_go.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not path.exists()  # released all the same
        async with with_file_lock(path, timeout=0, stale_after=0.02):
            pass

    arun(main())
    assert after_block == []


# -- the model's constructor -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        pytest.param(("a",), {"thread_id": "b"}, id="thread_id"),
        pytest.param(("a", None, [Message("user", "x")]), {"messages": []}, id="messages"),
        pytest.param(("a", None, None, {"k": 1}), {"state": {}}, id="state"),
    ],
)
def test_a_field_given_positionally_and_by_name_is_a_type_error(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    with pytest.raises(TypeError, match="multiple values"):
        ThreadCheckpoint(*args, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("which", ["file", "memory"])
def test_a_tuple_in_tool_arguments_is_stored_as_a_list_like_a_session_does(
    tmp_path: Path, which: str
) -> None:
    cp = FileCheckpointer(tmp_path) if which == "file" else InMemoryCheckpointer()
    call = ToolCall("c1", "f", {"xs": (1, 2)})
    checkpoint = ThreadCheckpoint("t1", None, [Message("user", "u")], {}, call)
    arun(cp.save(checkpoint))
    assert some(some(arun(cp.load("t1"))).pending).args == {"xs": [1, 2]}
