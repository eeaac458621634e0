"""The one-pass reader of memory.json files FileMemory wrote, against the strict reader.

A document that is byte for byte what writing its messages makes is parsed in one
pydantic-core pass; any other goes to the strict reader. Both must give the same
messages, and a defect spliced into an otherwise written file must stay MEMORY_CORRUPT.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_agents import FileMemory, Message, ReasoningBlock, TextBlock, ToolCall
from framework_agents._persist import _messages as codec
from framework_agents._persist import parse_items, strict_loads
from framework_agents.errors import MemoryCorruptError
from framework_agents.memory._document import _canonical_messages
from framework_agents.messages import MessageList
from property_budget import examples

_text = st.text(
    st.characters(exclude_categories=["Cs"]) | st.sampled_from(['"', "\\", "\n", "\u2028", "😀"]),
    max_size=6,
)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)
_objects = st.dictionaries(_text, _json, max_size=3)
_content = _text | st.lists(
    st.builds(TextBlock, _text) | st.builds(ReasoningBlock, _text, st.none() | _text), max_size=2
)
_messages = st.lists(
    st.builds(
        Message,
        st.sampled_from(["user", "assistant", "system"]),
        _content,
        st.lists(st.builds(ToolCall, _text, _text, _objects), max_size=2),
        metadata=_objects,
    ),
    min_size=1,
    max_size=4,
)


def _strict(data: bytes) -> list[Message]:
    return MessageList.validate_python(strict_loads(data)["messages"])


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(messages=_messages)
def test_a_written_document_reads_back_in_one_pass_as_the_strict_reader_reads_it(
    tmp_path: Path, messages: list[Message]
) -> None:
    for leftover in tmp_path.iterdir():  # the first write publishes the whole document
        leftover.unlink()
    memory = FileMemory(tmp_path, max_messages=100)
    asyncio.run(memory.replace(messages))
    data = memory.path.read_bytes()
    fast = _canonical_messages(data)
    assert fast is not None  # what FileMemory writes takes the one-pass path
    assert fast == _strict(data) == messages
    asyncio.run(memory.clear())  # the empty document a clear() writes, too
    assert _canonical_messages(memory.path.read_bytes()) == []


def _written(tmp_path: Path) -> tuple[Path, bytes, list[Message]]:
    messages = [
        Message("user", "hello 😀", id="m1", metadata={"x": 1, "y": [1.5, "s"]}),
        Message("assistant", "hi", id="m2"),
    ]
    memory = FileMemory(tmp_path)
    asyncio.run(memory.replace(messages))
    return memory.path, memory.path.read_bytes(), messages


_DEFECTS = [
    pytest.param(b'"metadata":{"x":1,', b'"metadata":{"x":1,"x":1,', id="duplicate-key"),
    pytest.param(b'"metadata":{"x":1,', b'"metadata":{"x":NaN,', id="nan"),
    pytest.param(b'"metadata":{"x":1,', b'"metadata":{"x":-Infinity,', id="infinity"),
    pytest.param(b'"metadata":{"x":1,', b'"metadata":{"x":1e999,', id="out-of-range"),
    pytest.param(b'"hello \xf0\x9f\x98\x80"', b'"hello \\udc00"', id="lone-surrogate"),
    pytest.param(b'"role":"user",', b'"role":"user","role":"user",', id="duplicate-field"),
    pytest.param(b'{"version":3,', b'{"version":3,"version":3,', id="duplicate-top"),
]


@pytest.mark.parametrize(("old", "new"), _DEFECTS)
def test_a_defect_in_a_written_file_is_still_corrupt(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    path, data, _ = _written(tmp_path)
    assert data.count(old) == 1
    edited = data.replace(old, new)
    assert _canonical_messages(edited) is None
    path.write_bytes(edited)
    with pytest.raises(MemoryCorruptError):
        asyncio.run(FileMemory(tmp_path).load())
    assert path.read_bytes() == edited


def _reformatted(data: bytes, how: str) -> bytes:
    """A version-1 document (what a person may write) of the same messages, reformatted."""
    doc = {"version": 1, "messages": json.loads(data)["messages"]}
    data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    if how == "indented":
        return json.dumps(doc, indent=1, ensure_ascii=False).encode()
    if how == "sorted-keys":
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if how == "ascii-escapes":
        return json.dumps(doc, separators=(",", ":")).encode()
    assert how == "exponent"
    return data.replace(b'"y":[1.5,', b'"y":[15e-1,')


@pytest.mark.parametrize("how", ["indented", "sorted-keys", "ascii-escapes", "exponent"])
def test_a_valid_file_in_another_form_goes_to_the_strict_reader_and_reads_the_same(
    tmp_path: Path, how: str
) -> None:
    path, data, messages = _written(tmp_path)
    edited = _reformatted(data, how)
    assert edited != data
    assert _canonical_messages(edited) is None
    path.write_bytes(edited)
    assert asyncio.run(FileMemory(tmp_path).load()) == messages == _strict(edited)


@pytest.mark.parametrize("how", ["indented", "bit-flip"])
def test_a_version_2_document_not_exactly_as_written_is_corrupt(tmp_path: Path, how: str) -> None:
    """The header's checksum covers the messages' bytes: an edit is never read as history."""
    path, data, _ = _written(tmp_path)
    if how == "indented":
        edited = json.dumps(json.loads(data), indent=1, ensure_ascii=False).encode()
    else:  # a flip that keeps valid JSON: a letter of a text changes
        at = data.index(b'"content":"') + len(b'"content":"') + 1
        edited = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]
    path.write_bytes(edited)
    with pytest.raises(MemoryCorruptError):
        asyncio.run(FileMemory(tmp_path).load())
    assert path.read_bytes() == edited


# -- parsing a messages array a slice at a time ---------------------------------------------

#: Values that put the cut marker ``,{"role":"`` inside a message: in nested args and
#: metadata (where a cut leaves the slice unparseable) and inside strings (escaped there).
_DECOYS: list[Any] = [
    [{"role": "user"}, {"role": "assistant", "content": "x"}],
    {"a": [{"role": "tool"}, {"role": "x"}]},
    ',{"role":"user"',
]
_decoy_args = st.fixed_dictionaries({"q": st.sampled_from(_DECOYS)})
_decoyed = st.lists(
    st.builds(
        Message,
        st.sampled_from(["user", "assistant", "system"]),
        _text | st.sampled_from([',{"role":"user","content":"', ']},{"role"']),
        st.lists(st.builds(ToolCall, _text, _text, _decoy_args), max_size=2),
        metadata=st.fixed_dictionaries({}, optional={"m": st.sampled_from(_DECOYS)}),
    ),
    max_size=12,
)


@settings(max_examples=examples(150), deadline=None)
@given(messages=_decoyed, size=st.integers(1, 400))
def test_a_sliced_parse_gives_what_one_parse_gives(messages: list[Message], size: int) -> None:
    data = b'{"x":' + MessageList.dump_json(messages) + b"}"
    start, end = data.index(b"[") + 1, len(data) - 2
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "PARSE_SLICE", size)
        parsed = parse_items(data, start, end)
    assert parsed == messages
    assert [m.model_dump_json() for m in parsed] == [m.model_dump_json() for m in messages]
    assert all(m.model_fields_set == set(Message.model_fields) for m in parsed)


@pytest.mark.parametrize("size", [1, 64, 1 << 16])
def test_a_bad_array_raises_as_one_parse_does(size: int) -> None:
    good = MessageList.dump_json([Message("user", f"m{i}", id=f"m{i}") for i in range(20)])
    bad = good[:-30] + b"\x01" + good[-29:]  # a control character in the last message
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "PARSE_SLICE", size)
        with pytest.raises(ValueError):
            parse_items(bad, 1, len(bad) - 1)
        with pytest.raises(ValueError):
            parse_items(b"[" + good[1:-1] + b",]", 1, len(good))  # a trailing comma


def test_a_long_history_loads_in_slices_sharing_one_fields_set(tmp_path: Path) -> None:
    messages = [Message("user", f"text {i} " * 20, id=f"m{i}") for i in range(3000)]
    # The cut marker in nested metadata too (the property test above makes cuts fall on it).
    messages[2500] = Message("user", "decoy", id="m2500", metadata={"m": _DECOYS[0]})
    memory = FileMemory(tmp_path, max_messages=10_000)
    asyncio.run(memory.replace(messages))
    asyncio.run(memory.save([Message("user", "more", id=f"j{i}") for i in range(500)]))
    assert memory.path.stat().st_size > 4 * codec.PARSE_SLICE
    loaded = asyncio.run(FileMemory(tmp_path, max_messages=10_000).load())
    assert [m.id for m in loaded] == [m.id for m in messages] + [f"j{i}" for i in range(500)]
    assert loaded[: len(messages)] == messages
    sets = {id(m.model_fields_set) for m in loaded}  # one set per slice of ~64 KiB
    assert len(sets) <= memory.path.stat().st_size // codec.PARSE_SLICE + 2
    assert all(m.model_fields_set == set(Message.model_fields) for m in loaded)


@pytest.mark.parametrize(("every", "bound"), [(97, 0.25), (5, 2.2)], ids=["sparse", "dense"])
def test_a_cut_inside_a_message_costs_little(
    monkeypatch: pytest.MonkeyPatch, every: int, bound: float
) -> None:
    # A tool's arguments holding {"role": ...} objects (a hand-off, say): slices already
    # parsed are kept. Sparse, no parse takes more than a quarter of the array; dense
    # (most cuts fall inside a message), all the parses together take < 2.2x of it.
    sizes: list[int] = []
    real = MessageList.validate_json

    def counting(data: bytes) -> list[Message]:
        sizes.append(len(data))
        return real(data)

    handoff = {"history": [{"role": "user", "content": "x" * 50}] * 40}
    messages = [
        Message(
            "assistant",
            f"text {i} " * 30,
            tool_calls=[ToolCall(f"c{i}", "handoff", handoff)] if i % every == 0 else [],
            id=f"m{i}",
        )
        for i in range(1000)
    ]
    data = MessageList.dump_json(messages)
    monkeypatch.setattr(codec, "PARSE_SLICE", 4096)
    monkeypatch.setattr(MessageList, "validate_json", counting)
    assert parse_items(data, 1, len(data) - 1) == messages
    assert len(data) > 100_000
    measure = max(sizes) if every > 5 else sum(sizes)
    assert measure < bound * len(data)
