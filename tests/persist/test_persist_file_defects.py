"""The file stores' small defects of issue 34, each as it was met, and the journal rules.

Odd files, full and read-only disks (a real tmpfs, mounted when the tests run as root),
progress files without a version, loader bounds, journal records that are not strict
JSON, the journal a document folded, and a fold the disk has no room for.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from async_helper import arun
from framework_agents import (
    AgentError,
    FileCheckpointer,
    FileMemory,
    LocalFileStorage,
    Message,
    ToolCall,
)
from framework_agents._persist import COMMIT, frame, scan
from framework_agents.checkpoint import ThreadCheckpoint


def _history(n: int, start: int = 0) -> list[Message]:
    return [Message("user", f"m{i}", id=f"m{i}") for i in range(start, start + n)]


def _code(exc: pytest.ExceptionInfo[AgentError]) -> str:
    return exc.value.code


# -- a real small tmpfs (root only) --------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(where: Path, size: str = "1m") -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


def _fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` until a write fails with ENOSPC."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for size in (1 << 16, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\xff" * size):
                    pass
    finally:
        os.close(fd)
    return filler


# -- run.lock --------------------------------------------------------------------------


async def _hold(cp: FileCheckpointer, thread_id: str) -> None:
    async with cp.thread_lock(thread_id):
        pass


def test_a_fifo_or_a_device_at_run_lock_is_a_coded_error(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(ThreadCheckpoint("t1", None, _history(1))))
    run_lock = tmp_path / "threads" / "t1" / "run.lock"
    os.mkfifo(run_lock)
    with pytest.raises(AgentError) as info:
        arun(_hold(cp, "t1"), timeout=10)
    assert _code(info) == "INVALID_ARGUMENT"
    assert run_lock.exists() and not run_lock.is_file()  # left as it was
    if os.geteuid() == 0:
        run_lock.unlink()
        os.mknod(run_lock, 0o600 | 0o020000, os.makedev(1, 3))  # a character device
        with pytest.raises(AgentError) as info:
            arun(_hold(cp, "t1"), timeout=10)
        assert _code(info) == "INVALID_ARGUMENT"


def test_run_lock_on_a_full_or_read_only_disk_is_storage_io(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "mnt", "64k") as mnt:
        cp = FileCheckpointer(mnt)
        arun(cp.save(ThreadCheckpoint("t1", None, _history(1))))
        filler = _fill(mnt)
        with pytest.raises(AgentError) as info:
            arun(_hold(cp, "t1"), timeout=10)
        assert _code(info) == "STORAGE_IO"
        filler.unlink()
        arun(_hold(cp, "t1"), timeout=10)  # room again: it works
        _read_only(mnt)
        with pytest.raises(AgentError) as info:
            arun(_hold(cp, "t1"), timeout=10)
        assert _code(info) == "STORAGE_IO"
        loaded = arun(FileCheckpointer(mnt).load("t1"))  # reading still works
        assert loaded is not None and loaded.messages == _history(1)


# -- read-only file systems: every store reads ------------------------------------------


def test_every_file_store_reads_on_a_read_only_file_system(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "mnt") as mnt:
        memory = FileMemory(mnt / "memory")
        arun(memory.save(_history(2)))
        arun(memory.save(_history(1, 2)))  # a journal record, and the lock file exists
        storage = LocalFileStorage(mnt / "storage")
        arun(storage.put("k", b"v0"))
        tag = arun(storage.read_logged("k"))[2]
        assert tag is not None
        arun(storage.append_logged("k", b"r1", tag))  # the key's lock file exists now
        _read_only(mnt)
        assert arun(FileMemory(mnt / "memory").load()) == _history(3)
        value, records, _ = arun(LocalFileStorage(mnt / "storage").read_logged("k"))
        assert (value, records) == (b"v0", [b"r1"])
        assert arun(LocalFileStorage(mnt / "storage").get("k")) == b"v0"


# -- progress.json, checkpoint.json and delete -----------------------------------------


def _progress(directory: Path, doc: dict[str, object]) -> None:
    (directory / "progress.json").write_text(json.dumps(doc))


def test_a_progress_file_without_a_version_is_corrupt(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(ThreadCheckpoint("t1", None, _history(1))))
    directory = tmp_path / "threads" / "t1"
    doc: dict[str, object] = {
        "thread_id": "t1",
        "base": "0" * 32,
        "saved_at": "2026-01-02T03:04:05Z",
        "state": {},
        "pending": None,
        "turn": None,
        "results": [],
        "in_flight": [],
        "outcome_unknown": False,
        "decisions": {},
    }
    _progress(directory, doc)
    with pytest.raises(AgentError) as info:
        arun(FileCheckpointer(tmp_path).load("t1"))
    assert _code(info) == "CHECKPOINT_CORRUPT"
    _progress(directory, {"version": 1, **doc})  # as every release wrote it: read (stale)
    assert arun(FileCheckpointer(tmp_path).load("t1")) is not None


@pytest.mark.parametrize("name", ["progress.json", "checkpoint.journal", "checkpoint.json"])
def test_a_directory_at_any_thread_file_is_checkpoint_corrupt_and_delete_changes_nothing(
    tmp_path: Path, name: str
) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(ThreadCheckpoint("t1", None, _history(1))))
    directory = tmp_path / "threads" / "t1"
    target = directory / name
    if target.exists():
        target.unlink()
    target.mkdir()
    before = sorted(p.name for p in directory.iterdir())
    with pytest.raises(AgentError) as info:
        arun(FileCheckpointer(tmp_path).load("t1"))
    assert _code(info) == "CHECKPOINT_CORRUPT"
    with pytest.raises(AgentError) as info:
        arun(FileCheckpointer(tmp_path).delete("t1"))
    assert _code(info) == "CHECKPOINT_CORRUPT"
    assert sorted(p.name for p in directory.iterdir()) == before  # nothing half-deleted


# -- LocalFileStorage: a directory where a value belongs ----------------------------------


def test_an_empty_directory_where_a_value_belongs_is_an_error_not_a_fresh_session(
    tmp_path: Path,
) -> None:
    storage = LocalFileStorage(tmp_path)
    (tmp_path / "session" / "s1").mkdir(parents=True)
    (tmp_path / "session" / "s1" / "snapshot_latest.json").mkdir()
    for call in (storage.get, storage.read_logged):
        with pytest.raises(AgentError) as info:
            arun(call("session/s1/snapshot_latest.json"))
        assert _code(info) == "STORAGE_KEY_INVALID"
    arun(storage.put("a/b", b"1"))  # a directory of other keys is still "no value"
    assert arun(storage.get("a")) is None


# -- loader bounds ---------------------------------------------------------------------


def test_the_checkpointer_refuses_more_items_than_its_bound_before_parsing(
    tmp_path: Path,
) -> None:
    calls = [ToolCall(f"c{i}", "f", {}) for i in range(15)]
    history = [Message("assistant", "", tool_calls=calls, id="a")]
    history += [Message("tool", "r", tool_call_id=c.id, id=f"r{c.id}") for c in calls]
    arun(FileCheckpointer(tmp_path).save(ThreadCheckpoint("t1", None, history)))
    with pytest.raises(AgentError) as info:
        arun(FileCheckpointer(tmp_path, max_items=20).load("t1"))
    assert _code(info) == "CHECKPOINT_CORRUPT"
    assert "max_items" in str(info.value)
    assert arun(FileCheckpointer(tmp_path, max_items=31).load("t1")) is not None  # 31 ids
    with pytest.raises(AgentError) as info:
        FileCheckpointer(tmp_path, max_items=0)
    assert _code(info) == "INVALID_ARGUMENT"


def test_the_checkpointer_bounds_the_items_of_its_journal_too(tmp_path: Path) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(ThreadCheckpoint("t1", None, _history(2))))
    arun(cp.save(ThreadCheckpoint("t1", None, _history(30))))  # a delta of 28 messages
    assert (tmp_path / "threads" / "t1" / "checkpoint.journal").exists()
    with pytest.raises(AgentError) as info:
        arun(FileCheckpointer(tmp_path, max_items=20).load("t1"))
    assert _code(info) == "CHECKPOINT_CORRUPT"


def test_memory_bounds_the_items_of_its_journal_records(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, max_messages=100)
    arun(memory.save(_history(2)))
    arun(memory.save(_history(30, 2)))  # one record of 30 messages
    with pytest.raises(AgentError) as info:
        arun(FileMemory(tmp_path, max_messages=100, max_items=20).load())
    assert _code(info) == "MEMORY_CORRUPT"


# -- journal records are read as strictly as documents ----------------------------------

_NOT_STRICT = [
    pytest.param(b'"n":1', b'"n":NaN', id="nan"),
    pytest.param(b'"n":1', b'"n":Infinity', id="infinity"),
    pytest.param(b'"n":1', b'"n":1e400', id="out-of-range"),
    pytest.param(b'"n":1', b'"n":1,"n":1', id="duplicate-key"),
]


def _reframe_last(journal: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` with ``new`` in the journal's last record, framed anew (valid CRC)."""
    data = journal.read_bytes()
    found = scan(data)
    last = found.payloads[-1]
    assert last.count(old) == 1
    start = found.end - len(frame(last))
    journal.write_bytes(data[:start] + frame(last.replace(old, new)))


@pytest.mark.parametrize(("old", "new"), _NOT_STRICT)
def test_a_memory_journal_record_that_is_not_strict_json_is_corrupt(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    memory = FileMemory(tmp_path)
    arun(memory.save(_history(1)))
    arun(memory.save([Message("user", "x", id="x", metadata={"n": 1, "k": "v"})]))
    journal = tmp_path / "memory.json.journal"
    _reframe_last(journal, old, new)
    data = journal.read_bytes()
    for call in (FileMemory(tmp_path).load(), FileMemory(tmp_path).save(_history(1, 5))):
        with pytest.raises(AgentError) as info:
            arun(call)
        assert _code(info) == "MEMORY_CORRUPT"
    assert journal.read_bytes() == data


@pytest.mark.parametrize(("old", "new"), _NOT_STRICT)
def test_a_checkpoint_journal_record_that_is_not_strict_json_is_corrupt(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    cp = FileCheckpointer(tmp_path)
    arun(cp.save(ThreadCheckpoint("t1", None, _history(1))))
    arun(cp.save(ThreadCheckpoint("t1", None, _history(2), {"n": 1, "k": "v"})))
    journal = tmp_path / "threads" / "t1" / "checkpoint.journal"
    _reframe_last(journal, old, new)
    with pytest.raises(AgentError) as info:
        arun(FileCheckpointer(tmp_path).load("t1"))
    assert _code(info) == "CHECKPOINT_CORRUPT"


# -- torn tails and damaged records ------------------------------------------------------


def _memory_with_journal(tmp_path: Path) -> tuple[Path, bytes]:
    memory = FileMemory(tmp_path)
    arun(memory.save(_history(1)))
    arun(memory.save(_history(1, 1)))
    arun(memory.save(_history(1, 2)))
    journal = tmp_path / "memory.json.journal"
    return journal, journal.read_bytes()


def test_a_torn_last_record_is_an_unacknowledged_save_and_is_ignored(tmp_path: Path) -> None:
    journal, data = _memory_with_journal(tmp_path)
    last = len(frame(scan(data).payloads[-1]))
    for torn in (
        data[:-1],  # the file ends inside the record
        data[: len(data) - last + 5],  # ... inside its frame
        data[: -len(COMMIT)] + b"\0" * len(COMMIT),  # complete in size, never committed
        data[: len(data) - last] + b"\0" * last,  # allocated, never written
    ):
        journal.write_bytes(torn)
        assert arun(FileMemory(tmp_path).load()) == _history(2)
    arun(FileMemory(tmp_path).save(_history(1, 7)))  # the next save cuts the tail first
    assert [m.id for m in arun(FileMemory(tmp_path).load())] == ["m0", "m1", "m7"]


def test_a_damaged_complete_last_record_is_corrupt_not_torn(tmp_path: Path) -> None:
    journal, data = _memory_with_journal(tmp_path)
    for at in (len(data) - len(COMMIT) - 3, len(data) - 1):  # its payload, its marker
        damaged = bytearray(data)
        damaged[at] ^= 0x04
        journal.write_bytes(damaged)
        with pytest.raises(AgentError) as info:
            arun(FileMemory(tmp_path).load())
        assert _code(info) == "MEMORY_CORRUPT"
        assert journal.read_bytes() == damaged


# -- the journal a document folded --------------------------------------------------------


def test_only_the_journal_the_document_folded_is_taken_for_stale(tmp_path: Path) -> None:
    journal, data = _memory_with_journal(tmp_path)
    arun(FileMemory(tmp_path).replace(_history(1, 10)))  # a fold: the journal goes
    assert not journal.exists()
    doc = json.loads((tmp_path / "memory.json").read_bytes())
    assert doc["folded"] == json.loads(scan(data).payloads[0])["token"]
    journal.write_bytes(data)  # as a writer that died before removing it leaves it
    assert arun(FileMemory(tmp_path).load()) == _history(1, 10)
    # A journal bound to neither the document nor the one it folded: its saves would be
    # dropped in silence, so it is corrupt.
    other = frame(b'{"journal":2,"token":"%s"}' % (b"e" * 32)) + frame(b"[]")
    journal.write_bytes(other)
    with pytest.raises(AgentError) as info:
        arun(FileMemory(tmp_path).load())
    assert _code(info) == "MEMORY_CORRUPT"
    assert journal.read_bytes() == other


def test_a_changed_token_in_a_document_is_corrupt_even_with_its_checksum_redone(
    tmp_path: Path,
) -> None:
    # The check covers the tokens: a token changed alone never makes the journal stale.
    _memory_with_journal(tmp_path)
    path = tmp_path / "memory.json"
    data = path.read_bytes()
    token = json.loads(data)["journal"]
    path.write_bytes(data.replace(token.encode(), b"f" * 32))
    with pytest.raises(AgentError) as info:
        arun(FileMemory(tmp_path).load())
    assert _code(info) == "MEMORY_CORRUPT"
    assert zlib.crc32(data) != zlib.crc32(path.read_bytes())


# -- a fold the disk has no room for -----------------------------------------------------


def _enospc(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_memory_fold_with_no_room_appends_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = FileMemory(tmp_path, max_messages=4)
    arun(memory.save(_history(2)))
    arun(memory.save(_history(1, 2)))  # the journal exists: an append makes no new file
    folds = memory._folds
    monkeypatch.setattr("framework_agents.memory._journaled.atomic_publish", _enospc)
    journal = tmp_path / "memory.json.journal"
    # Past 2 * max_messages + 64 entries a save folds; with no room it appends.
    for i in range(3, 80):
        arun(memory.save(_history(1, i)))
    assert memory._folds == folds and journal.exists()
    assert [m.id for m in arun(FileMemory(tmp_path, max_messages=4).load())] == [
        f"m{i}" for i in range(76, 80)
    ]
    monkeypatch.undo()
    arun(memory.save(_history(1, 80)))  # room again: the fold is made
    assert memory._folds == folds + 1 and not journal.exists()


def test_a_checkpoint_fold_with_no_room_appends_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = FileCheckpointer(tmp_path)
    big = "x" * 40_000
    history = [Message("user", big, id="m0")]
    arun(cp.save(ThreadCheckpoint("t1", None, history)))
    monkeypatch.setattr("framework_agents.checkpoint._file_writer.atomic_write", _enospc)
    for i in range(1, 5):  # the journal outgrows half the document: each save would fold
        history = [*history, Message("user", big, id=f"m{i}")]
        arun(cp.save(ThreadCheckpoint("t1", None, history)))
    loaded = arun(FileCheckpointer(tmp_path).load("t1"))
    assert loaded is not None and [m.id for m in loaded.messages] == [f"m{i}" for i in range(5)]


def test_a_real_full_disk_still_takes_saves_that_fit_as_appends(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "mnt", "256k") as mnt:
        memory = FileMemory(mnt / "memory", max_messages=1000)
        arun(memory.save([Message("user", "y" * 100_000, id="big")]))
        filler = _fill(mnt)
        with pytest.raises(AgentError) as info:  # not even an append fits
            arun(memory.save(_history(1, 1)))
        assert _code(info) == "STORAGE_IO"
        # Some room, but not a whole new document's (~170 kB once the journal is folded
        # in): past 64 kB of journal every save would fold; each appends instead.
        os.truncate(filler, max(0, filler.stat().st_size - 96 * 1024))
        for i in range(2, 82):
            arun(memory.save([Message("user", "z" * 1_000, id=f"s{i}")]))
        assert memory._folds == 1  # the first save's only
        loaded = arun(FileMemory(mnt / "memory", max_messages=1000).load())
        assert [m.id for m in loaded] == ["big"] + [f"s{i}" for i in range(2, 82)]
