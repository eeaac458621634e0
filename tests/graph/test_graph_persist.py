"""The graph store's files on the persistence layer: owner-only, odd files refused without
hanging or being followed (GRAPH_STORE_CORRUPT, left untouched), I/O failures coded."""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents.errors import GraphStoreCorruptError, StorageIOError
from framework_agents.graph import GraphStore
from framework_agents.graph import store as store_module
from framework_agents.graph._disk import DB_NAME
from framework_agents.graph._lock import LOCK_NAME
from framework_agents.graph._snapshot import SNAPSHOT_NAME


def _open(path: Path) -> None:
    async def body() -> None:
        store = GraphStore(path)
        try:
            await store.open()
        finally:
            await store.close()

    arun(body(), timeout=30)  # a hang on an odd file would fail here, not block the suite


def _made(path: Path) -> None:
    async def body() -> None:
        store = GraphStore(path)
        await store.add("ex:a", "rdf:type", "ex:B")
        await store.close()

    arun(body(), timeout=30)


def test_every_file_and_directory_it_makes_is_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN", 1)  # write the closure snapshot too
    path = tmp_path / "g"
    _made(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for name in (DB_NAME, LOCK_NAME, SNAPSHOT_NAME):
        assert stat.S_IMODE((path / name).stat().st_mode) == 0o600, name
    _open(path)  # and it opens again from them


@pytest.mark.parametrize("name", [SNAPSHOT_NAME, LOCK_NAME, DB_NAME])
@pytest.mark.parametrize("odd", ["fifo", "symlink-to-dev-zero", "symlink-to-a-file"])
def test_an_odd_file_is_corrupt_never_followed_and_left_untouched(
    tmp_path: Path, name: str, odd: str
) -> None:
    path = tmp_path / "g"
    _made(path)
    target = path / name
    target.unlink(missing_ok=True)  # the snapshot exists only for big closures
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not ours")
    if odd == "fifo":
        os.mkfifo(target)
    elif odd == "symlink-to-dev-zero":
        target.symlink_to("/dev/zero")
    else:
        target.symlink_to(outside)
    before = os.lstat(target)
    with pytest.raises(GraphStoreCorruptError) as info:
        _open(path)
    assert info.value.code == "GRAPH_STORE_CORRUPT"
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert outside.read_bytes() == b"not ours"


def test_an_os_error_is_graph_store_io_with_its_errno(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device (simulated)")

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(StorageIOError) as info:
        _open(tmp_path / "g")
    assert info.value.code == "GRAPH_STORE_IO"
    assert info.value.errno == errno.ENOSPC and info.value.may_have_landed is False
    assert isinstance(info.value.__cause__, OSError)


def test_a_damaged_snapshot_is_only_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN", 1)
    path = tmp_path / "g"
    _made(path)
    snapshot = path / SNAPSHOT_NAME
    snapshot.write_bytes(snapshot.read_bytes()[:-3])  # torn: a cache, rebuilt

    async def body() -> bool:
        store = GraphStore(path)
        try:
            return store.contains("ex:a", "rdf:type", "ex:B")
        finally:
            await store.close()

    assert arun(body(), timeout=30)


# -- issue 34: the graph store on the persistence layer's reader, lock and error codes ----


@pytest.mark.parametrize(
    "stored",
    [
        '{"literal":"a","literal":"b"}',  # a duplicate key: json.loads kept the last
        '{"datatype":"xsd:integer","literal":"5","literal":"6"}',
        "[" * 100_000 + "]" * 100_000,  # a raw RecursionError
        '"ex:a" ',  # not the canonical text: a remove would never find the row again
        '{"literal":"5","datatype":"xsd:integer"}',
        '{"lang":"EN","literal":"a"}',
    ],
    ids=["duplicate-key", "duplicate-key-typed", "deep", "trailing-space", "key-order", "lang"],
)
def test_a_stored_object_the_strict_reader_refuses_is_corrupt_and_left_alone(
    tmp_path: Path, stored: str
) -> None:
    path = tmp_path / "g"
    _made(path)
    with sqlite3.connect(path / DB_NAME) as conn:
        conn.execute("INSERT INTO quads VALUES ('ex:s', 'ex:p', ?, '')", (stored,))
    conn.close()
    before = (path / DB_NAME).read_bytes()
    with pytest.raises(GraphStoreCorruptError) as info:
        _open(path)
    assert info.value.code == "GRAPH_STORE_CORRUPT"
    assert str(path / DB_NAME) in info.value.message
    assert (path / DB_NAME).read_bytes() == before


def test_an_os_error_looking_at_the_store_is_graph_store_io(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory that cannot be searched (EACCES, simulated: root searches anything)."""
    path = tmp_path / "g"
    _made(path)
    real = os.lstat

    def lstat(target: object, *args: object, **kwargs: object) -> os.stat_result:
        if os.fspath(target).endswith(DB_NAME):  # type: ignore[call-overload]
            raise PermissionError(errno.EACCES, "Permission denied (simulated)")
        return real(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(StorageIOError) as info:
        _open(path)
    assert info.value.code == "GRAPH_STORE_IO"
    assert info.value.errno == errno.EACCES
    assert isinstance(info.value.__cause__, OSError)


class _FailingCommit:
    """A connection whose COMMIT fails as SQLite does on a full disk."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, *args: Any) -> object:
        if sql == "COMMIT":
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise error
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.conn, name)


def test_a_full_disk_on_a_write_is_graph_store_io_with_enospc(tmp_path: Path) -> None:
    async def body() -> None:
        store = GraphStore(tmp_path / "g")
        await store.add("ex:a", "rdf:type", "ex:B")
        disk = store._disk
        assert disk is not None and disk._conn is not None
        real = disk._conn
        disk._conn = _FailingCommit(real)  # type: ignore[assignment]
        try:
            with pytest.raises(StorageIOError) as info:
                await store.add("ex:c", "rdf:type", "ex:D")
        finally:
            disk._conn = real
        assert info.value.code == "GRAPH_STORE_IO"
        assert info.value.errno == errno.ENOSPC and info.value.may_have_landed is False
        assert not store.contains("ex:c", "rdf:type", "ex:D")  # nothing half-applied
        await store.close()

    arun(body(), timeout=30)


def test_a_cancelled_open_waiting_for_the_lock_stops_and_takes_nothing(tmp_path: Path) -> None:
    """The wait was a thread polling on: cancelled, it still took the store when it came."""
    path = tmp_path / "g"

    async def body() -> None:
        holder = GraphStore(path)
        await holder.open()
        waiter = GraphStore(path, lock_timeout=60)
        task = asyncio.create_task(waiter.open())
        while waiter._lock.acquire(blocking=False):  # until its worker is in the open
            waiter._lock.release()
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert waiter._lock.acquire(blocking=False), "the open goes on after its cancel"
        waiter._lock.release()
        assert waiter._disk is None
        await holder.close()
        other = GraphStore(path)  # lock_timeout=0: the path is free at once
        await other.open()
        await other.close()

    arun(body(), timeout=60)


def _damage(file: Path, how: str) -> None:
    data = bytearray(file.read_bytes())
    if how == "garbage":
        data = bytearray(b"not a database at all " * 300)
    elif how == "truncated":
        data = data[: len(data) // 2 + 7]
    elif how == "header":
        data[:16] = b"SQLite format 9\x00"
    else:  # the pages after the schema: the quads' b-tree
        for i in range(4096, len(data), 7):
            data[i] ^= 0x5A
    file.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["garbage", "truncated", "header", "pages"])
def test_a_damaged_database_is_corrupt_and_left_byte_identical(tmp_path: Path, how: str) -> None:
    path = tmp_path / "g"

    async def made() -> None:
        store = GraphStore(path)
        await store.add_many([(f"ex:e{i}", "ex:name", f'"name {i}"') for i in range(400)])
        await store.close()

    arun(made(), timeout=30)
    with sqlite3.connect(path / DB_NAME) as conn:  # everything in the database file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    _damage(path / DB_NAME, how)
    before = (path / DB_NAME).read_bytes()
    with pytest.raises(GraphStoreCorruptError) as info:
        _open(path)
    assert info.value.code == "GRAPH_STORE_CORRUPT"
    assert (path / DB_NAME).read_bytes() == before
