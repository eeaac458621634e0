"""FileMemory's journal: torn tails, damaged records, idempotent saves, merges, I/O faults."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework_agents import (
    AgentError,
    CompactedMemory,
    FileMemory,
    InvalidArgumentError,
    Message,
    StorageIOError,
)
from framework_agents._persist import FRAME_BYTES, frame, scan
from framework_agents.memory import file as file_module


def _m(text: str) -> Message:
    return Message("user", text, id=text)


def _ids(directory: Path, window: int = 10_000) -> list[str]:
    return [m.id for m in asyncio.run(FileMemory(directory, window).load())]


def _save(memory: FileMemory, *texts: str) -> None:
    asyncio.run(memory.save([_m(t) for t in texts]))


def _temp_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def _journal(directory: Path) -> bytes:
    return (directory / "memory.json.journal").read_bytes()


def test_a_torn_tail_is_ignored_and_cut_by_the_next_save(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 100)
    _save(memory, "a")
    _save(memory, "b")
    _save(memory, "c")
    data = _journal(tmp_path)
    for cut in (1, FRAME_BYTES - 1, FRAME_BYTES + 3):  # inside the frame, inside the payload
        (tmp_path / "memory.json.journal").write_bytes(data[:-cut])
        assert _ids(tmp_path) == ["a", "b"]  # the last save was never acknowledged
    zeros = data[: len(data) - 40] + b"\0" * 40  # a filesystem's zero-filled tail
    (tmp_path / "memory.json.journal").write_bytes(zeros)
    assert _ids(tmp_path) == ["a", "b"]
    _save(FileMemory(tmp_path, 100), "d")
    assert _ids(tmp_path) == ["a", "b", "d"]
    assert not scan(_journal(tmp_path)).torn


def test_a_damaged_record_before_the_tail_is_corrupt_and_left_untouched(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 100)
    for t in "abcd":
        _save(memory, t)
    data = bytearray(_journal(tmp_path))
    data[len(data) // 2] ^= 0x01  # a bit flip inside an acknowledged record
    (tmp_path / "memory.json.journal").write_bytes(bytes(data))
    for attempt in (FileMemory(tmp_path).load(), FileMemory(tmp_path).save([_m("e")])):
        with pytest.raises(AgentError) as info:
            asyncio.run(attempt)
        assert info.value.code == "MEMORY_CORRUPT"
    assert _journal(tmp_path) == bytes(data)


def test_a_journal_of_a_newer_version_is_refused(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 100)
    _save(memory, "a")
    _save(memory, "b")
    token = (tmp_path / "memory.json").read_bytes().split(b'"journal":"')[1][:32].decode()
    header = frame(b'{"journal":99,"token":"%s"}' % token.encode())
    (tmp_path / "memory.json.journal").write_bytes(header)
    with pytest.raises(AgentError, match="newer") as info:
        asyncio.run(FileMemory(tmp_path).load())
    assert info.value.code == "MEMORY_CORRUPT"


def test_a_stale_journal_is_ignored(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 100)
    _save(memory, "a")
    _save(memory, "b")
    stale = _journal(tmp_path)
    asyncio.run(memory.replace([_m("x")]))  # a new document, journal removed
    (tmp_path / "memory.json.journal").write_bytes(stale)  # a fold killed before the unlink
    assert _ids(tmp_path) == ["x"]
    _save(FileMemory(tmp_path, 100), "y")
    assert _ids(tmp_path) == ["x", "y"]


def test_a_retried_save_never_duplicates(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 100)
    batch = [_m("a"), _m("b")]
    for _ in range(3):
        asyncio.run(memory.save(batch))
        asyncio.run(FileMemory(tmp_path, 100).save(batch))  # another instance, same ids
    assert _ids(tmp_path) == ["a", "b"]


def test_saves_fold_into_the_document_and_total_bytes_stay_linear(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 10**6)

    async def main() -> None:
        for i in range(400):
            await memory.save([Message("user", "x" * 400, id=f"m{i}")])

    asyncio.run(main())
    assert memory._folds >= 2
    assert _ids(tmp_path, 10**6) == [f"m{i}" for i in range(400)]
    doc = os.stat(memory.path).st_size
    journal = os.stat(memory.journal_path).st_size if memory.journal_path.exists() else 0
    assert journal <= max(0.5 * doc, 64 << 10) + 600


def test_replace_keeps_what_another_writer_appended_since_the_load(tmp_path: Path) -> None:
    """Regression: two agents sharing one FileMemory lost half the turns (clear-then-save)."""

    async def main() -> None:
        mine, theirs = FileMemory(tmp_path, 100), FileMemory(tmp_path, 100)
        await mine.save([_m("seed")])
        base_mine = await mine.load()
        base_theirs = await theirs.load()
        await theirs.replace([*base_theirs, _m("their-q"), _m("their-a")])
        await mine.replace([*base_mine, _m("my-q"), _m("my-a")])
        assert [m.id for m in await FileMemory(tmp_path).load()] == [
            "seed",
            "my-q",
            "my-a",
            "their-q",
            "their-a",
        ]
        # What this instance removed on purpose stays removed.
        await mine.load()
        await mine.replace([_m("only")])
        assert [m.id for m in await FileMemory(tmp_path).load()] == ["only"]

    asyncio.run(main())


def test_commit_takes_an_explicit_base(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, 100)
        await memory.save([_m("a"), _m("b")])
        await FileMemory(tmp_path, 100).save([_m("c")])
        await memory.commit([_m("a"), _m("z")], base={"a", "b"})
        assert [m.id for m in await FileMemory(tmp_path).load()] == ["a", "z", "c"]
        with pytest.raises(InvalidArgumentError):
            await memory.commit([], base="ab")

    asyncio.run(main())


def test_two_compacted_memories_over_one_file_lose_no_append(tmp_path: Path) -> None:
    """Regression: CompactedMemory over one FileMemory dropped appends of another instance."""

    async def main() -> None:
        one = CompactedMemory(FileMemory(tmp_path, 1000), max_messages=10)
        two = CompactedMemory(FileMemory(tmp_path, 1000), max_messages=10)
        await asyncio.gather(*((one if i % 2 else two).save([_m(f"t{i}")]) for i in range(60)))
        loaded = await FileMemory(tmp_path, 1000).load()
        boundary, tail = loaded[0], loaded[1:]
        assert boundary.kind == "compaction"
        covered = boundary.metadata["covers"]
        assert covered + len(tail) == 60
        assert len({m.id for m in tail}) == len(tail)

    asyncio.run(main())


def test_odd_files_are_corrupt_and_never_followed(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "memory.json")
    with pytest.raises(AgentError) as info:
        asyncio.run(FileMemory(tmp_path).load())  # must not hang
    assert info.value.code == "MEMORY_CORRUPT"
    os.unlink(tmp_path / "memory.json")
    outside = tmp_path / "outside.json"
    outside.write_text('{"version":1,"messages":[]}')
    os.symlink(outside, tmp_path / "memory.json")
    with pytest.raises(AgentError) as info:
        asyncio.run(FileMemory(tmp_path).save([_m("a")]))
    assert info.value.code == "MEMORY_CORRUPT"
    os.unlink(tmp_path / "memory.json")
    os.symlink("/dev/zero", tmp_path / "memory.json")
    with pytest.raises(AgentError) as info:
        asyncio.run(FileMemory(tmp_path).load())
    assert info.value.code == "MEMORY_CORRUPT"


def test_documents_past_the_bounds_are_corrupt_before_parsing(tmp_path: Path) -> None:
    _save(FileMemory(tmp_path, 100), "a", "b", "c")
    with pytest.raises(AgentError, match="bound") as info:
        asyncio.run(FileMemory(tmp_path, max_bytes=64).load())
    assert info.value.code == "MEMORY_CORRUPT"
    with pytest.raises(AgentError, match="bound") as info:
        asyncio.run(FileMemory(tmp_path, max_items=2).load())
    assert info.value.code == "MEMORY_CORRUPT"


def test_metadata_deeper_than_the_one_json_rule_is_refused_on_save(tmp_path: Path) -> None:
    deep: Any = "leaf"
    for _ in range(201):
        deep = {"d": deep}
    with pytest.raises(InvalidArgumentError, match="nested deeper"):
        asyncio.run(FileMemory(tmp_path).save([Message("user", "x", metadata=deep)]))
    assert not (tmp_path / "memory.json").exists()


# -- fault injection -------------------------------------------------------------------

_SYSCALLS = ["open", "write", "pwrite", "fsync", "fdatasync", "replace", "ftruncate", "fstat"]


def _fail_on(monkeypatch: pytest.MonkeyPatch, name: str, nth: int, code: int) -> list[int]:
    calls = [0]
    real: Callable[..., Any] = getattr(os, name)

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == nth:
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)
    return calls


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
@pytest.mark.parametrize("fold", [False, True], ids=["append", "fold"])
@pytest.mark.parametrize("syscall", _SYSCALLS)
def test_an_os_error_at_any_syscall_is_storage_io_and_keeps_the_previous_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syscall: str, fold: bool, code: int
) -> None:
    memory = FileMemory(tmp_path, 100, stale_temp_seconds=0)
    _save(memory, "a")
    _save(memory, "b")  # a journal exists
    if fold:  # every save publishes a new document
        monkeypatch.setattr(file_module, "FOLD_MIN_BYTES", 0)
        monkeypatch.setattr(file_module, "FOLD_RATIO", 0.0)
    for nth in range(1, 12):
        with monkeypatch.context() as patch:
            calls = _fail_on(patch, syscall, nth, code)
            try:
                asyncio.run(memory.save([_m(f"n{nth}")]))
            except StorageIOError as exc:
                assert exc.code == "STORAGE_IO" and exc.errno == code
                assert "memory.json" in str(exc) and str(tmp_path) in str(exc)
                assert isinstance(exc.__cause__, OSError)
                ids = _ids(tmp_path)
                if exc.may_have_landed:
                    assert ids[-1] in (f"n{nth - 1}", f"n{nth}", "b")
                else:
                    assert f"n{nth}" not in ids  # the previous state
            else:
                if calls[0] < nth:
                    break  # the save makes fewer such calls: every one was tried
        # The next save works, cuts any torn record and leaves no temp file.
        asyncio.run(memory.save([_m(f"n{nth}")]))
        ids = _ids(tmp_path)
        assert ids.count(f"n{nth}") == 1 and ids[:2] == ["a", "b"]
        assert len(ids) == len(set(ids))
        assert _temp_files(tmp_path) == []
        if memory.journal_path.exists():
            assert not scan(_journal(tmp_path)).torn


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Any:
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_storage_io_and_keeps_every_acknowledged_save(tiny_tmpfs: Path) -> None:
    memory = FileMemory(tiny_tmpfs, 10**6, stale_temp_seconds=0)
    acknowledged: list[str] = []
    with pytest.raises(StorageIOError) as info:
        for i in range(10_000):
            asyncio.run(memory.save([Message("user", "y" * 300, id=f"m{i}")]))
            acknowledged.append(f"m{i}")
    assert info.value.errno == errno.ENOSPC
    ids = _ids(tiny_tmpfs, 10**6)
    assert ids[: len(acknowledged)] == acknowledged
    assert len(ids) <= len(acknowledged) + 1
