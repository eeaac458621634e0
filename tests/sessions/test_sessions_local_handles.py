"""LocalFileStorage keeps a key's directory open between appends, safely (issue 34).

An append reuses the directory it walked to last time only while the path still names
it; a value this instance stored (a fold) is not read back by the append that follows;
and a value read whole has its checksum checked without a copy of it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from async_helper import arun
from framework_agents import LocalFileStorage
from framework_agents.errors import AgentError
from framework_agents.sessions._log import Value

KEY = "agents/a1/snapshots/snapshot_latest.json"


def _reads(storage: LocalFileStorage, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = storage._read_stored

    def counted(key: str, dfd: int, name: str) -> Value | None:
        seen.append(key)
        return real(key, dfd, name)

    monkeypatch.setattr(storage, "_read_stored", counted)
    return seen


def _appended(storage: LocalFileStorage, records: list[bytes]) -> str:
    tag: str | None = arun(storage.read_logged(KEY))[2]
    assert tag is not None
    for record in records:
        tag = arun(storage.append_logged(KEY, record, tag))
        assert tag is not None
    return tag


def test_appends_after_a_fold_read_the_value_not_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = LocalFileStorage(tmp_path)
    arun(storage.put(KEY, b"v0"))
    tag = _appended(storage, [b"r1"])
    reads = _reads(storage, monkeypatch)
    arun(storage.swap(KEY, b"v1", tag))  # the fold: reads the stored value once, to compare
    assert reads == [KEY]
    from framework_agents.sessions._base import digest

    tag = arun(storage.append_logged(KEY, b"r2", digest(b"v1")))
    tag = arun(storage.append_logged(KEY, b"r3", tag))
    assert reads == [KEY]  # neither append read the value back
    value, records, stored_tag = arun(LocalFileStorage(tmp_path).read_logged(KEY))
    assert (value, records, stored_tag) == (b"v1", [b"r2", b"r3"], tag)


def test_an_append_after_another_writer_folded_reads_again(tmp_path: Path) -> None:
    ours, theirs = LocalFileStorage(tmp_path), LocalFileStorage(tmp_path)
    arun(ours.put(KEY, b"v0"))
    tag = _appended(ours, [b"r1"])
    arun(theirs.swap(KEY, b"v1", arun(theirs.read_logged(KEY))[2]))
    with pytest.raises(AgentError) as info:
        arun(ours.append_logged(KEY, b"r2", tag))
    assert info.value.code == "CHECKPOINT_CONFLICT"
    assert arun(LocalFileStorage(tmp_path).read_logged(KEY))[:2] == (b"v1", [])


def test_a_directory_replaced_between_appends_is_walked_again(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put(KEY, b"v0"))
    _appended(storage, [b"r1"])
    # The key's directory is moved away and a new one made at its path: the kept
    # descriptor (which follows the moved one) must not be written through.
    snapshots = tmp_path / "root" / "agents" / "a1" / "snapshots"
    snapshots.rename(tmp_path / "moved")
    arun(LocalFileStorage(tmp_path / "root").put(KEY, b"fresh"))
    tag = arun(LocalFileStorage(tmp_path / "root").read_logged(KEY))[2]
    assert tag is not None
    arun(storage.append_logged(KEY, b"r2", tag))
    assert arun(LocalFileStorage(tmp_path / "root").read_logged(KEY))[:2] == (b"fresh", [b"r2"])
    assert arun(LocalFileStorage(tmp_path / "moved").read_logged("snapshot_latest.json"))[:2] == (
        b"v0",
        [b"r1"],
    )


def test_a_directory_swapped_for_a_symlink_between_appends_is_refused(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put(KEY, b"v0"))
    tag = _appended(storage, [b"r1"])
    a1 = tmp_path / "root" / "agents" / "a1"
    shutil.copytree(a1, tmp_path / "elsewhere")
    shutil.rmtree(a1)
    a1.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(AgentError) as info:
        arun(storage.append_logged(KEY, b"r2", tag))
    assert info.value.code == "STORAGE_KEY_INVALID"


def test_a_key_deleted_between_appends_is_gone_and_its_directory_too(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    arun(storage.put(KEY, b"v0"))
    tag = _appended(storage, [b"r1"])
    arun(LocalFileStorage(tmp_path).delete(KEY))  # another instance: prunes the directories
    assert not (tmp_path / "agents").exists()
    with pytest.raises(AgentError) as info:
        arun(storage.append_logged(KEY, b"r2", tag))
    assert info.value.code == "CHECKPOINT_CONFLICT"
    assert not (tmp_path / "agents").exists()  # the append made nothing


def test_kept_directories_are_bounded_and_closed(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd")
    before = open_fds()
    for i in range(80):
        key = f"agents/a{i}/s.json"
        arun(storage.put(key, b"v"))
        arun(storage.append_logged(key, b"r", arun(storage.read_logged(key))[2] or ""))
    kept = open_fds() - before
    assert 0 < kept <= 32
    arun(storage.close())
    assert open_fds() == before
    key = "agents/a0/s.json"  # still usable after close()
    arun(storage.append_logged(key, b"r2", arun(storage.read_logged(key))[2] or ""))
    assert arun(storage.read_logged(key))[1] == [b"r", b"r2"]


def test_a_large_value_reads_back_checked(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    big = os.urandom(3 << 20)
    arun(storage.put(KEY, big))
    assert arun(storage.get(KEY)) == big
    path = tmp_path / KEY
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(AgentError) as info:
        arun(storage.get(KEY))
    assert info.value.code == "SNAPSHOT_CORRUPT"
