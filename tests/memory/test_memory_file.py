"""FileMemory: layout, appends, windowing, copies, atomic publish, fragment cache, sweeping."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from framework_agents import (
    FileMemory,
    InvalidArgumentError,
    Memory,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    is_well_formed,
)


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def _temp_files(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def _rich_history() -> list[Message]:
    return [
        Message("system", "Be brief.", id="sys"),
        Message("user", "Wetter in Zürich? 🌦", id="u1", metadata={"lang": "de", "n": [1, 2.5]}),
        Message(
            "assistant",
            [ReasoningBlock("look it up", "sig=="), TextBlock("Checking.")],
            tool_calls=[ToolCall("c1", "weather", {"city": "Zürich", "days": 2})],
            id="a1",
        ),
        Message("tool", "12°C", tool_call_id="c1", name="weather", id="t1"),
        Message("assistant", "12°C and rain.", id="a2", metadata={"kind": "final", "x": None}),
    ]


def test_missing_file_is_fresh_memory_and_save_creates_the_layout(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"

    async def main() -> None:
        memory = FileMemory(directory)
        assert isinstance(memory, Memory)
        assert memory.max_messages == 50
        assert await memory.load() == []
        assert not directory.exists()  # loading creates nothing
        await memory.save(_rich_history())

    asyncio.run(main())
    assert sorted(os.listdir(directory)) == ["memory.json", "memory.json.lock"]
    doc = json.loads((directory / "memory.json").read_bytes())
    assert list(doc) == ["version", "journal", "folded", "check", "messages"]
    assert doc["version"] == 3
    assert os.stat(directory).st_mode & 0o777 == 0o700  # conversations are private
    for name in ("memory.json", "memory.json.lock"):
        assert os.stat(directory / name).st_mode & 0o777 == 0o600
    assert [m["id"] for m in doc["messages"]] == ["sys", "u1", "a1", "t1", "a2"]


def test_round_trip_is_exact_across_instances(tmp_path: Path) -> None:
    history = _rich_history()

    async def main() -> None:
        await FileMemory(tmp_path).save(history)
        loaded = await FileMemory(tmp_path).load()
        assert loaded == history
        assert loaded[2].reasoning[0].signature == "sig=="

    asyncio.run(main())


def test_save_appends_and_windows_to_the_newest(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, max_messages=3)
        await memory.save([Message("user", "1"), Message("assistant", "2")])
        await memory.save([Message("user", "3")])
        assert _texts(await memory.load()) == ["1", "2", "3"]
        await memory.save([Message("assistant", "4"), Message("user", "5")])
        assert _texts(await memory.load()) == ["3", "4", "5"]
        assert _texts(await FileMemory(tmp_path, max_messages=3).load()) == ["3", "4", "5"]

    asyncio.run(main())


def test_window_cuts_between_groups_in_the_stored_file(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, max_messages=4)
        await memory.save(
            [
                Message("user", "q"),
                Message(
                    "assistant", "", tool_calls=[ToolCall("c1", "f", {}), ToolCall("c2", "f", {})]
                ),
            ]
        )
        await memory.save(
            [
                Message("tool", "r1", tool_call_id="c1", name="f"),
                Message("tool", "r2", tool_call_id="c2", name="f"),
            ]
        )
        await memory.save([Message("assistant", "done")])

    asyncio.run(main())
    stored = asyncio.run(FileMemory(tmp_path, max_messages=4).load())
    # Keeping 4 would open on the call-only turn: it goes with both of its results.
    assert [m.text for m in stored] == ["done"]


def test_malformed_saves_are_stored_as_given_and_loaded_repaired(tmp_path: Path) -> None:
    async def main() -> list[Message]:
        memory = FileMemory(tmp_path)
        await memory.save(
            [
                Message("tool", "orphan", tool_call_id="ghost", name="f", id="o"),
                Message("user", "q", id="u"),
                Message("assistant", "", tool_calls=[ToolCall("c1", "f", {})], id="a"),
            ]
        )
        return await memory.load()

    loaded = asyncio.run(main())
    stored = json.loads((tmp_path / "memory.json").read_bytes())["messages"]
    assert [m["id"] for m in stored] == ["o", "u", "a"]  # nothing dropped on disk
    assert is_well_formed(loaded)
    assert [m.id for m in loaded] == ["u", "a", "interrupted-a-c1"]


def test_load_stays_within_the_bound_after_repair(tmp_path: Path) -> None:
    async def main() -> list[Message]:
        memory = FileMemory(tmp_path, max_messages=3)
        calls = [ToolCall("c1", "f", {}), ToolCall("c2", "f", {})]
        await memory.save(
            [
                Message("user", "a"),
                Message("user", "b"),
                Message("assistant", "x", tool_calls=calls),
            ]
        )
        return await memory.load()

    loaded = asyncio.run(main())
    assert len(loaded) <= 3
    assert is_well_formed(loaded)


def test_loaded_messages_are_independent_copies(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path)
        original = Message("user", "hi", metadata={"tags": ["a"]})
        await memory.save([original])
        original.metadata["tags"].append("after-save")
        loaded = await memory.load()
        loaded[0].metadata["tags"].append("after-load")
        loaded.clear()
        assert (await memory.load())[0].metadata == {"tags": ["a"]}

    asyncio.run(main())


def test_a_save_appends_one_journal_record_and_leaves_the_document_alone(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path)
        await memory.save([Message("user", "0")])
        document = memory.path.read_bytes()
        inode = os.stat(memory.path).st_ino
        sizes = []
        for i in range(1, 4):
            await memory.save([Message("user", str(i))])
            assert memory.path.read_bytes() == document
            assert os.stat(memory.path).st_ino == inode
            sizes.append(os.stat(memory.journal_path).st_size)
            assert _temp_files(tmp_path) == []
        assert sizes[0] < sizes[1] < sizes[2]
        assert _texts(await FileMemory(tmp_path).load()) == ["0", "1", "2", "3"]

    asyncio.run(main())


def test_a_save_reuses_cached_fragments_while_the_file_is_unchanged(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, max_messages=5)
        for i in range(12):
            await memory.save([Message("user", f"m{i}")])
        assert memory._reparses == 0
        assert _texts(await memory.load()) == [f"m{i}" for i in range(7, 12)]

    asyncio.run(main())


def test_a_file_changed_by_another_writer_is_reread(tmp_path: Path) -> None:
    async def main() -> None:
        mine, theirs = FileMemory(tmp_path), FileMemory(tmp_path)
        await mine.save([Message("user", "1")])
        await theirs.save([Message("user", "2")])
        await mine.save([Message("user", "3")])
        # Their append is read from the journal; the document is not parsed again.
        assert mine._reparses == 0
        await theirs.replace([Message("user", "4")])  # a new document
        await mine.save([Message("user", "5")])
        assert mine._reparses == 1
        assert _texts(await theirs.load()) == ["4", "5"]

    asyncio.run(main())


def test_an_unchanged_looking_file_is_still_checked_by_its_token(tmp_path: Path) -> None:
    """Inode reuse and coarse timestamps can fake an unchanged identity: the token decides."""

    async def main() -> None:
        mine, theirs = FileMemory(tmp_path), FileMemory(tmp_path)
        await mine.save([Message("user", "1")])
        await theirs.replace([Message("user", "2")])
        assert mine._state is not None
        st = os.stat(mine.path)
        mine._state.doc_ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        await mine.save([Message("user", "3")])
        assert _texts(await theirs.load()) == ["2", "3"]

    asyncio.run(main())


def test_a_foreign_but_valid_layout_is_read_and_rewritten_canonically(tmp_path: Path) -> None:
    msg = Message("user", "pretty", id="p")
    doc = {"messages": [json.loads(msg.to_json())], "version": 1}
    (tmp_path / "memory.json").write_text(json.dumps(doc, indent=2))

    async def main() -> None:
        memory = FileMemory(tmp_path)
        assert await memory.load() == [msg]
        await memory.save([Message("user", "next", id="n")])
        assert [m.id for m in await memory.load()] == ["p", "n"]

    asyncio.run(main())
    assert (tmp_path / "memory.json").read_bytes().startswith(b'{"version":3,"journal":"')


def test_concurrent_tasks_lose_no_append(tmp_path: Path) -> None:
    async def main() -> None:
        memories = [FileMemory(tmp_path, max_messages=1000) for _ in range(2)]
        await asyncio.gather(
            *(memories[i % 2].save([Message("user", f"t{i}", id=f"t{i}")]) for i in range(20))
        )
        ids = [m.id for m in await memories[0].load()]
        assert sorted(ids) == sorted(f"t{i}" for i in range(20))

    asyncio.run(main())


def test_replace_and_clear(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, max_messages=2)
        await memory.save([Message("user", "old")])
        await memory.replace(
            [Message("user", "1"), Message("assistant", "2"), Message("user", "3")]
        )
        assert _texts(await FileMemory(tmp_path).load()) == ["2", "3"]
        await memory.clear()
        assert await FileMemory(tmp_path).load() == []
        doc = json.loads(memory.path.read_bytes())
        assert (doc["version"], doc["messages"]) == (3, [])

    asyncio.run(main())


def test_clear_of_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    asyncio.run(FileMemory(tmp_path / "nowhere").clear())
    assert not (tmp_path / "nowhere").exists()


def test_stale_temp_files_are_swept_after_the_grace_period(tmp_path: Path) -> None:
    old = tmp_path / ".memory.json.deadbeef.tmp"
    young = tmp_path / ".memory.json.cafebabe.tmp"
    other = tmp_path / ".notes.json.deadbeef.tmp"
    for path in (old, young, other):
        path.write_bytes(b"partial")
    long_ago = time.time() - 3600
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))

    asyncio.run(FileMemory(tmp_path).save([Message("user", "x")]))
    assert _temp_files(tmp_path) == sorted([young.name, other.name])
    asyncio.run(FileMemory(tmp_path, stale_temp_seconds=0).save([Message("user", "y")]))
    assert _temp_files(tmp_path) == [other.name]  # another file's temps are not ours


@pytest.mark.parametrize(
    "metadata",
    [
        {"x": float("nan")},
        {"x": float("inf")},
        {"x": (1, 2)},
        {"x": {1, 2}},
        {"x": object()},
        {"x": "\ud800"},
    ],
    ids=["nan", "inf", "tuple", "set", "object", "lone-surrogate"],
)
def test_a_message_json_cannot_carry_exactly_is_refused(
    tmp_path: Path, metadata: dict[str, Any]
) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path)
        await memory.save([Message("user", "kept")])
        before = memory.path.read_bytes()
        bad = Message("user", "ok", metadata=metadata)
        with pytest.raises(InvalidArgumentError) as err:
            await memory.save([Message("user", "also not saved"), bad])
        assert err.value.code == "INVALID_ARGUMENT"
        assert memory.path.read_bytes() == before

    asyncio.run(main())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_messages": 0},
        {"max_messages": True},
        {"stale_temp_seconds": -1},
        {"stale_temp_seconds": float("nan")},
    ],
    ids=["max-zero", "max-bool", "grace-negative", "grace-nan"],
)
def test_bad_constructor_arguments_are_refused(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        FileMemory(tmp_path, **kwargs)


def test_bad_dir_and_bad_save_input_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        FileMemory(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        asyncio.run(FileMemory(tmp_path).save("hello"))  # type: ignore[arg-type]
    assert not (tmp_path / "memory.json").exists()


# -- cancellation: a cancel never lets the lock go while a write runs --------------------


def _hold_flock(path: Path) -> int:
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_transact_cancelled_while_taking_the_lock_gives_it_back(tmp_path: Path) -> None:
    # The lock is taken in a worker; the task is cancelled while the worker waits for
    # it. The worker takes it afterwards: it must be closed again, or every later write
    # of any process would wait for it forever.
    memory = FileMemory(tmp_path, max_messages=10)
    asyncio.run(memory.save([Message("user", "one", id="u1")]))
    other = _hold_flock(memory.lock_path)  # another writer holds the lock

    async def update(history: list[Message]) -> list[Message]:
        raise AssertionError("a cancelled transact must not run its update")

    async def main() -> None:
        task = asyncio.create_task(memory.transact(update))
        for _ in range(20):
            await asyncio.sleep(0.01)  # let the worker block on the lock
        task.cancel()
        os.close(other)  # the worker now takes the lock for a task that is gone
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(memory.save([Message("user", "two", id="u2")]), 10)

    asyncio.run(main())
    assert _texts(asyncio.run(FileMemory(tmp_path, max_messages=10).load())) == ["one", "two"]


def test_a_save_cancelled_mid_write_finishes_before_the_lock_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import framework_agents.memory.file as file_module

    memory = FileMemory(tmp_path, max_messages=10)
    writing, go_on = threading.Event(), threading.Event()
    real = file_module.FileMemory._write_sync

    def slow(self: FileMemory, *args: Any) -> None:
        writing.set()
        go_on.wait(10)
        real(self, *args)

    monkeypatch.setattr(file_module.FileMemory, "_write_sync", slow)

    async def main() -> None:
        task = asyncio.create_task(memory.save([Message("user", "one", id="u1")]))
        await asyncio.to_thread(writing.wait, 10)
        task.cancel()
        for _ in range(10):
            await asyncio.sleep(0)  # a cancel that did not wait would have ended it by now
        assert not task.done()  # it waits for the write, holding the lock meanwhile
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    monkeypatch.undo()
    assert _texts(asyncio.run(FileMemory(tmp_path, max_messages=10).load())) == ["one"]
