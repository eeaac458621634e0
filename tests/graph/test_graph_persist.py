"""The graph store's files on the persistence layer: owner-only, odd files refused without
hanging or being followed (GRAPH_STORE_CORRUPT, left untouched), I/O failures coded."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

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
