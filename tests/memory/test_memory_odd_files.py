"""Memory backends: odd file-system states fail with a code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import FileMemory, Message
from framework_agents.errors import InvalidArgumentError, MemoryCorruptError


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


# -- replace() (the agent's commit) re-encodes only what changed ---------------------------


def _history(n: int) -> list[Message]:
    return [Message("user" if i % 2 else "assistant", f"turn {i}", id=f"m{i}") for i in range(n)]


class _CountingEncode:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from framework_agents.memory import file as file_module

        self.calls = 0
        real = file_module.encode_message  # type: ignore[attr-defined]  # patched below

        def counting(msg: Message) -> Any:
            self.calls += 1
            return real(msg)

        monkeypatch.setattr(file_module, "encode_message", counting)


def test_replace_with_one_more_message_encodes_only_that_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _CountingEncode(monkeypatch)
    memory = FileMemory(tmp_path, max_messages=100)
    history = _history(40)
    arun(memory.replace(history))
    assert counter.calls == 40
    # The agent's next run: it loads (fresh objects), appends, and replaces.
    loaded = arun(memory.load())
    arun(memory.replace([*loaded, Message("user", "new", id="new")]))
    assert counter.calls == 41
    assert [m.id for m in arun(FileMemory(tmp_path, max_messages=100).load())] == [
        *(m.id for m in history),
        "new",
    ]


def test_a_message_changed_in_place_after_saving_is_encoded_again(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path)
    history = _history(3)
    arun(memory.replace(history))
    history[1].metadata["edited"] = True
    object.__setattr__(history[2], "content", "changed")  # forced past the frozen model
    arun(memory.replace(history))
    back = arun(FileMemory(tmp_path).load())
    assert back == history
    assert back[1].metadata == {"edited": True}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (1, True),
        (True, 1),
        (1, 1.0),
        (0, False),
        (0.0, -0.0),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    ],
    ids=["int-to-bool", "bool-to-int", "int-to-float", "zero-to-false", "zero-sign", "key-order"],
)
def test_values_equal_in_python_but_not_in_json_are_encoded_again(
    tmp_path: Path, before: object, after: object
) -> None:
    memory = FileMemory(tmp_path)
    arun(memory.replace([Message("user", "x", id="m", metadata={"v": before})]))
    arun(memory.replace([Message("user", "x", id="m", metadata={"v": after})]))
    (back,) = arun(FileMemory(tmp_path).load())
    assert type(back.metadata["v"]) is type(after)
    assert back.metadata["v"] == after
    if isinstance(after, dict):
        assert list(back.metadata["v"]) == list(after)  # type: ignore[call-overload]
    if isinstance(after, float):
        assert repr(back.metadata["v"]) == repr(after)


def test_a_value_json_cannot_carry_is_still_refused_after_an_equal_one(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path)
    arun(memory.replace([Message("user", "x", id="m", metadata={"v": [1, 2]})]))
    with pytest.raises(InvalidArgumentError):
        arun(memory.replace([Message("user", "x", id="m", metadata={"v": (1, 2)})]))
    (back,) = arun(FileMemory(tmp_path).load())
    assert back.metadata == {"v": [1, 2]}


# -- symlinks planted in the memory directory are not followed -----------------------------


@pytest.mark.parametrize("op", ["save", "replace", "clear"])
def test_a_symlinked_lock_file_never_creates_a_file_outside_dir(tmp_path: Path, op: str) -> None:
    memdir, outside = tmp_path / "mem", tmp_path / "outside"
    memdir.mkdir()
    outside.mkdir()
    (memdir / "memory.json.lock").symlink_to(outside / "planted")
    with pytest.raises(MemoryCorruptError, match="symlink"):
        arun(_ops(FileMemory(memdir))[op]())
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("op", ["load", "save", "replace", "clear"])
def test_a_symlinked_memory_json_is_corrupt_not_followed(tmp_path: Path, op: str) -> None:
    memdir, outside = tmp_path / "mem", tmp_path / "outside"
    memdir.mkdir()
    outside.mkdir()
    elsewhere = outside / "memory.json"
    elsewhere.write_bytes(b'{"version":1,"messages":[]}')
    (memdir / "memory.json").symlink_to(elsewhere)
    with pytest.raises(MemoryCorruptError, match="symlink"):
        arun(_ops(FileMemory(memdir))[op]())
    assert (memdir / "memory.json").is_symlink()
    assert elsewhere.read_bytes() == b'{"version":1,"messages":[]}'


def test_an_empty_dir_is_refused_not_taken_as_the_working_directory() -> None:
    with pytest.raises(InvalidArgumentError):
        FileMemory("")
