"""The durable-write primitives every on-disk backend builds on."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from framework_agents._fs import atomic_write, read_bytes_or_none, sweep_temp_files, temp_name


def test_atomic_write_publishes_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    atomic_write(target, b"first")
    atomic_write(target, [b"sec", b"ond"])
    assert target.read_bytes() == b"second"
    assert sorted(os.listdir(tmp_path)) == ["doc.json"]


def test_failed_write_keeps_previous_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    atomic_write(target, b"good")

    def chunks() -> object:
        yield b"partial"
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(target, chunks())  # type: ignore[arg-type]
    assert target.read_bytes() == b"good"
    assert sorted(os.listdir(tmp_path)) == ["doc.json"]


def test_temp_names_are_unique_and_hidden(tmp_path: Path) -> None:
    target = tmp_path / "memory.json"
    names = {temp_name(target).name for _ in range(100)}
    assert len(names) == 100
    assert all(n.startswith(".memory.json.") and n.endswith(".tmp") for n in names)


def test_sweep_removes_only_old_temp_files_of_the_target(tmp_path: Path) -> None:
    target = tmp_path / "memory.json"
    old, young, other = temp_name(target), temp_name(target), tmp_path / ".other.json.x.tmp"
    for p in (old, young, other):
        p.write_bytes(b"x")
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(other, (past, past))
    assert sweep_temp_files(target, grace_seconds=60) == 1
    assert not old.exists() and young.exists() and other.exists()


def test_read_bytes_or_none(tmp_path: Path) -> None:
    assert read_bytes_or_none(tmp_path / "missing") is None
    (tmp_path / "f").write_bytes(b"abc")
    assert read_bytes_or_none(tmp_path / "f") == b"abc"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_read_bytes_or_none_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    # A FIFO planted where a document belongs must fail fast, not block the reader forever.
    path = tmp_path / "doc.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(OSError, match="not a regular file"):
        read_bytes_or_none(path)
