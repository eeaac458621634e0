"""The one-pass reader of checkpoint files the checkpointer wrote, against the strict reader.

A file that is byte for byte the serialisation of what it parses to takes the one-pass
path; everything else goes to the strict reader. Both must give the same checkpoint, and
a defect spliced into an otherwise canonical file must still be CHECKPOINT_CORRUPT.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Message, ReasoningBlock, TextBlock, ToolCall
from framework_agents._persist import strict_loads
from framework_agents.checkpoint import FileCheckpointer, ThreadCheckpoint
from framework_agents.checkpoint._file_format import SLICED_BYTES as _SLICED_BYTES
from framework_agents.checkpoint._file_format import canonical as _canonical
from framework_agents.checkpoint._file_format import canonical_enveloped, envelope, find_envelope
from framework_agents.checkpoint._file_format import canonical_sliced as _canonical_sliced
from framework_agents.checkpoint.model import to_json
from framework_agents.errors import CheckpointCorruptError
from property_budget import examples

# Text JSON escapes or writes raw: quotes, backslashes, controls, U+2028, astral characters.
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
_calls = st.lists(st.builds(ToolCall, _text, _text, _objects), max_size=2)
_content = _text | st.lists(
    st.builds(TextBlock, _text) | st.builds(ReasoningBlock, _text, st.none() | _text), max_size=2
)
_messages = st.lists(
    st.builds(
        Message,
        st.sampled_from(["user", "assistant", "system"]),
        _content,
        metadata=_objects,
    ),
    max_size=4,
)
_times = st.datetimes(timezones=st.just(UTC)) | st.datetimes()  # naive ones are taken as UTC


def _slow(data: bytes) -> ThreadCheckpoint:
    """The strict reader's checkpoint, as a value (a stored version 2 reads as version 1)."""
    checkpoint = ThreadCheckpoint.model_validate(strict_loads(data))
    return checkpoint.model_copy(update={"version": 1})


@settings(max_examples=examples(150), deadline=None)
@given(
    messages=_messages,
    state=_objects,
    pending=st.none() | st.builds(ToolCall, _text, _text, _objects),
    decisions=_objects,
    saved_at=_times,
    calls=_calls,
)
def test_a_written_checkpoint_reads_back_in_one_pass_as_the_strict_reader_reads_it(
    messages: list[Message],
    state: dict[str, Any],
    pending: ToolCall | None,
    decisions: dict[str, Any],
    saved_at: datetime,
    calls: list[ToolCall],
) -> None:
    fields: dict[str, Any] = {"state": state, "pending": pending, "decisions": decisions}
    if calls:
        unique = [ToolCall(f"c{i}", c.name, c.args) for i, c in enumerate(calls)]
        fields["turn"] = Message("assistant", "", unique)
        fields["results"] = [Message("tool", "r", tool_call_id="c0")]
        fields["in_flight"] = unique[1:]
    checkpoint = ThreadCheckpoint("t1", saved_at, messages, **fields)
    data = to_json(checkpoint)
    fast = _canonical(data)
    assert fast is not None  # what the checkpointer writes takes the one-pass path
    assert fast == _slow(data) == checkpoint
    assert to_json(fast) == data


def _saved(tmp_path: Path) -> tuple[FileCheckpointer, Path, bytes]:
    messages = [Message("user", "hello 😀", id="m1"), Message("assistant", "hi", id="m2")]
    checkpoint = ThreadCheckpoint("t1", None, messages, {"x": 1, "y": [1.5, "s"]})
    cp = FileCheckpointer(tmp_path)
    asyncio.run(cp.save(checkpoint))
    path = cp.path("t1")
    return cp, path, _as_v2(path)


def _as_v2(path: Path) -> bytes:
    """Rewrite a written ``checkpoint.json`` as the checkpoint alone (a version-2 file).

    Layout v3 wraps the checkpoint in a checksummed envelope, which any edit breaks; the
    strict reader's rules are those of the checkpoint inside, and of a version-2 file.
    """
    data = path.read_bytes()
    marker = b'"checkpoint":'
    inner = data[data.index(marker) + len(marker) : -1]
    path.write_bytes(inner)
    return inner


# Defects spliced into the compact form the checkpointer writes (so only they differ).
_DEFECTS = [
    pytest.param(b'"state":{"x":1,', b'"state":{"x":1,"x":1,', id="duplicate-key"),
    pytest.param(b'"state":{"x":1,', b'"state":{"x":NaN,', id="nan"),
    pytest.param(b'"state":{"x":1,', b'"state":{"x":Infinity,', id="infinity"),
    pytest.param(b'"state":{"x":1,', b'"state":{"x":1e999,', id="out-of-range"),
    pytest.param(b'"hello \xf0\x9f\x98\x80"', b'"hello \\ud800"', id="lone-surrogate"),
    pytest.param(b'"thread_id":"t1",', b'"thread_id":"t1","thread_id":"t1",', id="duplicate-top"),
    pytest.param(b'"version":2,', b'"version":2.0,', id="version-float"),
]


@pytest.mark.parametrize(("old", "new"), _DEFECTS)
def test_a_defect_in_a_written_file_is_still_corrupt(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    _, path, data = _saved(tmp_path)
    assert data.count(old) == 1
    edited = data.replace(old, new)
    assert _canonical(edited) is None
    path.write_bytes(edited)
    with pytest.raises(CheckpointCorruptError):
        asyncio.run(FileCheckpointer(tmp_path).load("t1"))


def _reformatted(data: bytes, how: str) -> bytes:
    doc = json.loads(data)
    if how == "indented":
        return json.dumps(doc, indent=1, ensure_ascii=False).encode()
    if how == "sorted-keys":
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if how == "ascii-escapes":  # the astral character as an escaped surrogate pair
        return json.dumps(doc, separators=(",", ":")).encode()
    assert how == "exponent"
    return data.replace(b'"y":[1.5,', b'"y":[15e-1,')


@pytest.mark.parametrize("how", ["indented", "sorted-keys", "ascii-escapes", "exponent"])
def test_a_valid_file_in_another_form_goes_to_the_strict_reader_and_reads_the_same(
    tmp_path: Path, how: str
) -> None:
    cp, path, data = _saved(tmp_path)
    original = asyncio.run(cp.load("t1"))
    edited = _reformatted(data, how)
    assert edited != data
    assert _canonical(edited) is None
    path.write_bytes(edited)
    assert asyncio.run(FileCheckpointer(tmp_path).load("t1")) == original == _slow(edited)


# -- a large checkpoint: its messages are parsed in slices ---------------------------------

_PADDING = [Message("user", f"{i} " + "p" * 3000, id=f"p{i}") for i in range(100)]
# Messages whose nested values hold what the slicer looks for: a message's opening
# (a cut there leaves the slice unparseable) and the closing of the messages array.
_TRICKY = [
    Message("assistant", "", [ToolCall("c9", "t", {"m": [{"role": "user"}] * 3})], id="t1"),
    Message("user", "x", id="t2", metadata={"a": [1], "state": {"role": "x"}}),
    Message("user", '],"state":{', id="t3"),
]


@settings(max_examples=40, deadline=None)
@given(
    messages=_messages,
    state=_objects,
    tricky_state=st.booleans(),
    where=st.integers(0, len(_PADDING)),
    calls=_calls,
)
def test_a_large_checkpoint_reads_in_slices_as_the_strict_reader_reads_it(
    messages: list[Message],
    state: dict[str, Any],
    tricky_state: bool,
    where: int,
    calls: list[ToolCall],
) -> None:
    history = [*_PADDING[:where], *_TRICKY, *messages, *_PADDING[where:]]
    if tricky_state:  # the array's closing again, later in the document
        state = {**state, "x": [1], "state": [{"role": "user"}]}
    fields: dict[str, Any] = {"state": state}
    if calls:
        unique = [ToolCall(f"c{i}", c.name, c.args) for i, c in enumerate(calls)]
        fields["turn"] = Message("assistant", "", unique)
        fields["results"] = [Message("tool", '],"state":', tool_call_id="c0")]
    checkpoint = ThreadCheckpoint("t1", None, history, **fields)
    data = to_json(checkpoint)
    assert len(data) >= _SLICED_BYTES
    sliced = _canonical_sliced(data)
    assert sliced is not None  # a later closing is tried first, then the real one
    assert sliced == _canonical(data) == _slow(data) == checkpoint
    assert to_json(sliced) == data
    # The messages of a slice share one fields set (a load's peak memory).
    assert sliced.messages[0].__pydantic_fields_set__ is sliced.messages[1].__pydantic_fields_set__
    # Inside its version-3 envelope, read in place (no copy of the checkpoint's bytes).
    head, tail = envelope("a" * 32, "", data)
    found = find_envelope(Path("checkpoint.json"), head + data + tail)
    assert found is not None
    inside = canonical_enveloped(head + data + tail, found)
    assert inside == checkpoint
    assert inside.messages[0].__pydantic_fields_set__ is inside.messages[1].__pydantic_fields_set__


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(b'"id":"p50"', b'"id":"p50","id":"p50"', id="duplicate-key-mid-array"),
        pytest.param(b'"id":"p50"', b'"id": "p50"', id="space-mid-array"),
        pytest.param(b'"id":"p99"', b'"id":"p99","role":"user"', id="duplicate-key-last"),
        pytest.param(b'"p0"', b'"\\u0070\\u0030"', id="escaped-mid-array"),
    ],
)
def test_a_large_checkpoint_not_in_its_stored_form_goes_to_the_strict_reader(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    checkpoint = ThreadCheckpoint("t1", None, _PADDING, {"k": 1})
    cp = FileCheckpointer(tmp_path)
    asyncio.run(cp.save(checkpoint))
    data = _as_v2(cp.path("t1"))
    assert data.count(old) == 1
    edited = data.replace(old, new)
    assert _canonical_sliced(edited) is None and _canonical(edited) is None
    cp.path("t1").write_bytes(edited)
    if b'","id"' in new or b'","role"' in new:
        with pytest.raises(CheckpointCorruptError):
            asyncio.run(FileCheckpointer(tmp_path).load("t1"))
    else:  # another form of the same values: read strictly, the same checkpoint
        loaded = asyncio.run(FileCheckpointer(tmp_path).load("t1"))
        assert loaded is not None and loaded.messages == _PADDING
