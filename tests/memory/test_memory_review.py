"""Review pass over the memory backends: odd file-system states fail with a code."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from framework_agents import FileMemory, Message
from framework_agents.errors import InvalidArgumentError, MemoryCorruptError


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


def _ops(memory: FileMemory) -> dict[str, Any]:
    return {
        "load": memory.load,
        "save": lambda: memory.save([Message("user", "x")]),
        "replace": lambda: memory.replace([Message("user", "x")]),
        "clear": memory.clear,
    }


@pytest.mark.parametrize("op", ["load", "save", "replace", "clear"])
def test_a_memory_json_that_is_a_directory_is_corrupt_and_left_alone(
    tmp_path: Path, op: str
) -> None:
    (tmp_path / "memory.json").mkdir()
    (tmp_path / "memory.json" / "inside").write_bytes(b"keep")
    with pytest.raises(MemoryCorruptError) as info:
        arun(_ops(FileMemory(tmp_path))[op]())
    assert info.value.code == "MEMORY_CORRUPT"
    assert (tmp_path / "memory.json" / "inside").read_bytes() == b"keep"


@pytest.mark.parametrize("op", ["load", "save", "replace", "clear"])
def test_a_memory_json_that_is_a_fifo_is_corrupt_and_does_not_hang(tmp_path: Path, op: str) -> None:
    os.mkfifo(tmp_path / "memory.json")
    with pytest.raises(MemoryCorruptError):
        arun(_ops(FileMemory(tmp_path))[op]())
    assert (tmp_path / "memory.json").is_fifo()


@pytest.mark.parametrize("op", ["load", "save", "replace", "clear"])
def test_a_dir_that_is_a_file_is_invalid_argument_and_left_alone(tmp_path: Path, op: str) -> None:
    target = tmp_path / "not-a-dir"
    target.write_bytes(b"precious")
    with pytest.raises(InvalidArgumentError) as info:
        arun(_ops(FileMemory(target))[op]())
    assert "not a directory" in str(info.value)
    assert target.read_bytes() == b"precious"


def test_a_stored_null_content_is_corrupt_not_read_as_empty(tmp_path: Path) -> None:
    raw = b'{"version":1,"messages":[{"role":"user","content":null,"id":"m1"}]}'
    (tmp_path / "memory.json").write_bytes(raw)
    with pytest.raises(MemoryCorruptError):
        arun(FileMemory(tmp_path).load())
    with pytest.raises(MemoryCorruptError):
        arun(FileMemory(tmp_path).save([Message("user", "x")]))
    assert (tmp_path / "memory.json").read_bytes() == raw
