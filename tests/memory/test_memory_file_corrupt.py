"""A corrupt or wrongly shaped memory.json fails loudly everywhere and is never overwritten."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from framework_agents import FileMemory, MemoryCorruptError, Message, ToolCall

_MSG = '{"role":"user","content":"hi","id":"m1"}'


def _doc(messages: str = f"[{_MSG}]", version: str = "1") -> bytes:
    return f'{{"version":{version},"messages":{messages}}}'.encode()


CORRUPT: dict[str, bytes] = {
    "empty-file": b"",
    "whitespace-only": b"  \n",
    "not-json": b"hello",
    "truncated": _doc()[:-1],
    "trailing-garbage": _doc() + b"x",
    "two-documents": _doc() + _doc(),
    "top-level-array": b"[]",
    "top-level-string": b'"memory"',
    "top-level-null": b"null",
    "missing-version": f'{{"messages":[{_MSG}]}}'.encode(),
    "missing-messages": b'{"version":1}',
    "extra-top-level-key": b'{"version":1,"messages":[],"cursor":3}',
    "duplicate-key": b'{"version":1,"version":1,"messages":[]}',
    "version-string": _doc(version='"1"'),
    "version-float": _doc(version="1.0"),
    "version-bool": _doc(version="true"),
    "version-zero": _doc(version="0"),
    "version-negative": _doc(version="-1"),
    "future-version": _doc(version="99"),
    "messages-object": _doc(messages="{}"),
    "messages-null": _doc(messages="null"),
    "message-not-object": _doc(messages="[5]"),
    "unknown-role": _doc(messages='[{"role":"robot","content":"hi"}]'),
    "content-wrong-type": _doc(messages='[{"role":"user","content":5}]'),
    "block-wrong-type": _doc(messages='[{"role":"user","content":[{"type":"image"}]}]'),
    "tool-calls-wrong-type": _doc(messages='[{"role":"assistant","tool_calls":"f"}]'),
    "tool-call-missing-id": _doc(messages='[{"role":"assistant","tool_calls":[{"name":"f"}]}]'),
    "id-wrong-type": _doc(messages='[{"role":"user","id":7}]'),
    "metadata-array": _doc(messages='[{"role":"user","metadata":[]}]'),
    "extra-message-key": _doc(messages='[{"role":"user","mood":"happy"}]'),
    "message-duplicate-key": _doc(messages='[{"role":"user","role":"tool"}]'),
    "nan": _doc(messages='[{"role":"user","metadata":{"x":NaN}}]'),
    "infinity": _doc(messages='[{"role":"user","metadata":{"x":Infinity}}]'),
    "negative-infinity": _doc(messages='[{"role":"user","metadata":{"x":-Infinity}}]'),
    "overflowing-float": _doc(messages='[{"role":"user","metadata":{"x":1e999}}]'),
    "huge-integer": _doc(messages='[{"role":"user","metadata":{"x":' + "9" * 5000 + "}}]"),
    "deep-nesting": _doc(
        messages='[{"role":"user","metadata":{"x":' + "[" * 100_000 + "]" * 100_000 + "}}]"
    ),
    "invalid-utf8": _doc(messages='[{"role":"user","content":"\xff"}]').replace(
        b"\xc3\xbf", b"\xff"
    ),
    "utf8-bom": b"\xef\xbb\xbf" + _doc(),
    "utf16": _doc().decode().encode("utf-16"),
    "lone-surrogate": _doc(messages='[{"role":"user","content":"\\ud800"}]'),
    "control-char-in-string": _doc(messages='[{"role":"user","content":"a\nb"}]'),
}


def _listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("data", list(CORRUPT.values()), ids=list(CORRUPT))
def test_corrupt_file_fails_load_save_and_clear_and_stays_untouched(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "memory.json"
    path.write_bytes(data)
    before = os.stat(path)

    async def main() -> None:
        memory = FileMemory(tmp_path)
        for attempt in (
            memory.load(),
            memory.save([Message("user", "would overwrite")]),
            memory.replace([Message("user", "would overwrite")]),
            memory.clear(),
        ):
            with pytest.raises(MemoryCorruptError) as err:
                await attempt
            assert err.value.code == "MEMORY_CORRUPT"
            assert str(path) in str(err.value)

    asyncio.run(main())
    assert path.read_bytes() == data
    assert os.stat(path).st_ino == before.st_ino
    assert _listing(tmp_path) == ["memory.json", "memory.json.lock"]


def test_future_version_says_so(tmp_path: Path) -> None:
    (tmp_path / "memory.json").write_bytes(CORRUPT["future-version"])
    with pytest.raises(MemoryCorruptError, match="newer framework-agents"):
        asyncio.run(FileMemory(tmp_path).load())


def test_escaped_surrogate_pairs_are_valid(tmp_path: Path) -> None:
    (tmp_path / "memory.json").write_bytes(
        _doc(messages='[{"role":"user","content":"\\ud83d\\ude00"}]')
    )
    assert [m.text for m in asyncio.run(FileMemory(tmp_path).load())] == ["😀"]


def test_truncation_at_every_byte_is_detected_and_never_overwritten(tmp_path: Path) -> None:
    source = tmp_path / "source"

    async def write_valid() -> bytes:
        memory = FileMemory(source)
        await memory.save(
            [
                Message("user", "q", id="u"),
                Message("assistant", "", tool_calls=[ToolCall("c1", "f", {"n": 1.5})], id="a"),
                Message("tool", "r", tool_call_id="c1", name="f", id="t", metadata={"k": [1]}),
            ]
        )
        return memory.path.read_bytes()

    valid = asyncio.run(write_valid())
    target = tmp_path / "target"
    target.mkdir()
    path = target / "memory.json"

    async def check_all() -> None:
        memory = FileMemory(target)
        for cut in range(len(valid)):
            path.write_bytes(valid[:cut])
            with pytest.raises(MemoryCorruptError):
                await memory.load()
            with pytest.raises(MemoryCorruptError):
                await memory.save([Message("user", "x")])
            assert path.read_bytes() == valid[:cut], f"overwritten at cut {cut}"
        path.write_bytes(valid)
        assert [m.id for m in await memory.load()] == ["u", "a", "t"]

    asyncio.run(check_all())
