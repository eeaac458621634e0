"""Sessions, strictly: snapshots never store an altered message, bad input is clear."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from async_helper import arun
from framework_agents import (
    InMemoryStorage,
    LocalFileStorage,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
    TimelineEntry,
    ToolCall,
)
from framework_agents._persist import MAX_JSON_DEPTH, strict_loads
from framework_agents.errors import (
    AgentError,
    InvalidArgumentError,
    SnapshotCorruptError,
    StateNotJsonError,
)
from framework_agents.sessions import Storage
from framework_agents.sessions import snapshot as snapshot_module
from property_budget import examples

# -- messages in a snapshot must read back equal ------------------------------------------

NOT_JSON_MESSAGES = {
    "nan-metadata": Message("user", "x", metadata={"a": float("nan")}),
    "inf-metadata": Message("user", "x", metadata={"a": float("inf")}),
    "datetime-metadata": Message("user", "x", metadata={"at": datetime(2024, 1, 1, tzinfo=UTC)}),
    "set-metadata": Message("user", "x", metadata={"a": {1, 2}}),
    "int-key-metadata": Message("user", "x", metadata={"a": {1: "one"}}),
    "object-args": Message("assistant", "", tool_calls=[ToolCall("c1", "t", {"x": object()})]),
    "nan-args": Message("assistant", "", tool_calls=[ToolCall("c1", "t", {"x": float("nan")})]),
}


@pytest.mark.parametrize("msg", NOT_JSON_MESSAGES.values(), ids=NOT_JSON_MESSAGES.keys())
def test_a_message_that_json_cannot_carry_is_refused(msg: Message) -> None:
    # Stored, it would come back altered (NaN -> null, datetime -> str, set -> list) or
    # fail deep inside pydantic's serialiser: refuse it up front, like FileMemory does.
    with pytest.raises(StateNotJsonError) as info:
        SnapshotData(messages=[msg])
    assert info.value.code == "STATE_NOT_JSON"
    assert "messages[0]" in str(info.value)


def test_a_lone_surrogate_in_content_is_a_clear_error_not_a_serializer_crash() -> None:
    snap = Snapshot(SnapshotData(messages=[Message("user", "a\ud800b")]))
    with pytest.raises(StateNotJsonError):
        snap.to_json()
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    with pytest.raises(AgentError):
        arun(sm.save_latest(snap))
    assert arun(storage.list()) == []


def test_a_message_with_json_values_round_trips_exactly() -> None:
    msg = Message(
        "assistant",
        "",
        tool_calls=[ToolCall("c1", "t", {"x": [1, 2.5, None, {"y": "z"}]})],
        metadata={"usage": {"input_tokens": 3}, "tags": ["a"], "ok": True},
    )
    back = Snapshot.from_json(Snapshot(SnapshotData(messages=[msg])).to_json())
    assert back.data.messages == [msg]


# -- the reader is as strict as the memory reader -----------------------------------------


def _doc(messages: list[dict[str, Any]]) -> dict[str, Any]:
    base: dict[str, Any] = json.loads(Snapshot(SnapshotData(messages=[])).to_json())
    return base | {"data": {"messages": messages}}


STRICT_CORRUPT = {
    "nan-in-metadata": json.dumps(
        _doc([{"role": "user", "content": "x", "metadata": {"a": float("nan")}}])
    ).encode(),
    "infinity-in-args": json.dumps(
        _doc(
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "name": "t", "args": {"x": float("inf")}}],
                }
            ]
        )
    ).encode(),
    "duplicate-key": b'{"schema_version": 1, "schema_version": 1, "data": {}}',
    "duplicate-key-in-state": b'{"schema_version": 1, "data": {"state": {"a": 1, "a": 2}}}',
    "number-overflow": b'{"schema_version": 1, "data": {"state": {"a": 1e999}}}',
    "escaped-lone-surrogate": b'{"schema_version": 1, "data": {"system_prompt": "\\ud800"}}',
}


@pytest.mark.parametrize("raw", STRICT_CORRUPT.values(), ids=STRICT_CORRUPT.keys())
def test_documents_that_would_not_read_back_equal_are_corrupt(raw: bytes) -> None:
    with pytest.raises(SnapshotCorruptError):
        Snapshot.from_json(raw)


@pytest.mark.parametrize("raw", [5, None, ["x"]], ids=["int", "none", "list"])
def test_from_json_of_a_non_document_is_a_clear_error(raw: object) -> None:
    with pytest.raises(SnapshotCorruptError):
        Snapshot.from_json(raw)  # type: ignore[arg-type]


def test_from_json_still_reads_str() -> None:
    snap = Snapshot(SnapshotData(state={"k": "é"}))
    assert Snapshot.from_json(snap.to_json().decode()) == snap


# -- bad arguments are clear AgentErrors ---------------------------------------------------


@pytest.fixture(params=["memory", "local"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return InMemoryStorage() if request.param == "memory" else LocalFileStorage(tmp_path / "st")


@pytest.mark.parametrize("data", ["text", None, 5, [1, 2]], ids=["str", "none", "int", "list"])
def test_put_of_non_bytes_is_invalid_argument(storage: Storage, data: object) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        arun(storage.put("k", data))  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
    assert isinstance(info.value, TypeError)  # the earlier contract still holds
    assert arun(storage.list()) == []


@pytest.mark.parametrize("bad", [123, None, b"/tmp/x", 1.5], ids=["int", "none", "bytes", "float"])
def test_local_storage_dir_must_be_a_path(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        LocalFileStorage(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [None, "storage", object(), {}], ids=["none", "str", "obj", "dict"])
def test_session_manager_storage_must_be_a_storage(bad: object) -> None:
    with pytest.raises(InvalidArgumentError):
        SessionManager("s", bad)  # type: ignore[arg-type]


def test_save_latest_of_a_non_snapshot_is_invalid_argument() -> None:
    sm = SessionManager("s", InMemoryStorage())
    with pytest.raises(InvalidArgumentError):
        arun(sm.save_latest(None))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data",
    [None, {"memory": []}, {"messages": [1]}, {"messages": "x"}, {"state": 5}, "messages"],
    ids=["none", "unknown-field", "bad-message", "messages-str", "state-int", "str"],
)
def test_save_snapshot_of_bad_data_is_invalid_argument_and_stores_nothing(data: object) -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    with pytest.raises(InvalidArgumentError):
        arun(sm.save_snapshot(data))  # type: ignore[arg-type]
    assert arun(storage.list()) == []


@pytest.mark.parametrize(
    "field", ["snapshot_id", "created_at", "data", "schema_version"], ids=lambda f: f
)
def test_a_stored_null_is_corrupt_not_a_fresh_default(field: str) -> None:
    doc = json.loads(Snapshot(SnapshotData(state={})).to_json())
    doc[field] = None
    with pytest.raises(SnapshotCorruptError):
        Snapshot.from_json(json.dumps(doc).encode())


def test_a_long_lived_storage_sweeps_temp_files_left_after_its_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer killed (and restarted quickly) leaves a temp file too young for the first
    # sweep; the same storage must sweep it on a later write once it is stale, not never.
    import os
    import time

    from framework_agents.sessions import local

    monkeypatch.setattr(local, "_SWEEP_INTERVAL_SECONDS", 0.0)
    storage = LocalFileStorage(tmp_path / "root")
    arun(storage.put("d/k", b"1"))
    stale = tmp_path / "root" / "d" / ".k.deadbeef.tmp"
    stale.write_bytes(b"left by a killed writer")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    arun(storage.put("d/k", b"2"))
    assert not stale.exists()
    assert arun(storage.get("d/k")) == b"2"


def test_an_empty_dir_is_refused_not_taken_as_the_working_directory() -> None:
    # "" (an unset environment variable, say) would silently put sessions in the cwd.
    with pytest.raises(InvalidArgumentError):
        LocalFileStorage("")


# -- the one-pass reader of stored snapshots ---------------------------------------------------

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_messages = st.lists(
    st.builds(
        Message,
        st.sampled_from(["user", "assistant", "system"]),
        st.text(max_size=8),
        st.lists(
            st.builds(
                ToolCall,
                st.text(max_size=3),
                st.text(max_size=3),
                st.dictionaries(st.text(max_size=3), _values, max_size=2),
            ),
            max_size=2,
        ),
        metadata=st.dictionaries(st.text(max_size=3), _values, max_size=2),
    ),
    max_size=4,
)


@settings(max_examples=examples(150), deadline=None)
@given(
    messages=st.none() | _messages,
    state=st.none() | st.dictionaries(st.text(max_size=3), _values, max_size=3),
    prompt=st.none() | st.text(max_size=5),
    app_data=_values,
)
def test_a_stored_snapshot_reads_in_one_pass_as_the_strict_reader_reads_it(
    messages: list[Message] | None, state: dict[str, Any] | None, prompt: str | None, app_data: Any
) -> None:
    snap = Snapshot(SnapshotData(messages, state, prompt), app_data=app_data)
    raw = snap.to_json()
    fast = Snapshot._canonical(raw)
    assert fast is not None  # what this package stores takes the one-pass path
    strict = Snapshot.model_validate(strict_loads(raw))
    assert fast == strict == snap
    assert fast.to_json() == raw
    stored = json.loads(raw)["data"]  # an absent field is left out, in both dump modes
    present = {
        k
        for k, v in (("messages", messages), ("state", state), ("system_prompt", prompt))
        if v is not None
    }
    assert set(stored) == present == set(snap.model_dump()["data"])


_PADDING = [Message("user", f"{i} " + "p" * 3000, id=f"p{i}") for i in range(100)]
# What the slicer looks for, inside values: a message's opening and the array's closings.
_TRICKY = [
    Message("assistant", "", [ToolCall("c", "t", {"m": [{"role": "user"}] * 3})], id="t1"),
    Message("user", "x", id="t2", metadata={"a": [1], "state": {"role": "x"}}),
    Message("user", '],"state":{ ],"system_prompt": ]},"app_data":', id="t3"),
]
_LATER = {"a": [1], "state": [2], "system_prompt": [{"app_data": [3]}]}


@settings(max_examples=40, deadline=None)
@given(
    messages=_messages,
    state=st.none() | st.dictionaries(st.text(max_size=3), _values, max_size=3),
    prompt=st.none() | st.text(max_size=5),
    app_data=_values,
    tricky=st.booleans(),
    where=st.integers(0, len(_PADDING)),
)
def test_a_large_stored_snapshot_reads_in_slices_as_the_strict_reader_reads_it(
    messages: list[Message],
    state: dict[str, Any] | None,
    prompt: str | None,
    app_data: Any,
    tricky: bool,
    where: int,
) -> None:
    history = [*_PADDING[:where], *_TRICKY, *messages, *_PADDING[where:]]
    if tricky:  # the array's closings again, after it
        state, app_data = (None if state is None else {**state, **_LATER}), _LATER
    snap = Snapshot(SnapshotData(history, state, prompt), app_data=app_data)
    raw = snap.to_json()
    assert len(raw) >= snapshot_module._SLICED_BYTES
    sliced = Snapshot._canonical_sliced(raw)
    assert sliced is not None
    assert sliced == Snapshot.model_validate(strict_loads(raw)) == snap
    assert sliced.to_json() == raw and Snapshot.from_json(raw) == snap
    assert sliced.data.model_fields_set == Snapshot.from_json(raw).data.model_fields_set
    first, second = sliced.data.messages[:2]  # type: ignore[index]
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'"id":"p50"', b'"id":"p50","id":"p50"'),
        (b'"id":"p50"', b'"id": "p50"'),
        (b'"id":"p99"', b'"id":"p99","role":"user"'),
        (b'"schema_version":1', b'"schema_version":1.0'),
    ],
    ids=["duplicate-key", "space", "duplicate-key-last", "version-float"],
)
def test_a_large_snapshot_not_in_its_stored_form_goes_to_the_strict_reader(
    old: bytes, new: bytes
) -> None:
    snap = Snapshot(SnapshotData(_PADDING, {"k": 1}))
    raw = snap.to_json()
    assert raw.count(old) == 1
    edited = raw.replace(old, new)
    assert Snapshot._canonical_sliced(edited) is None and Snapshot._canonical(edited) is None
    if new == b'"id": "p50"':
        assert Snapshot.from_json(edited) == snap  # another form of the same values
    else:
        with pytest.raises(SnapshotCorruptError):
            Snapshot.from_json(edited)


@pytest.mark.parametrize("how", ["indented", "sorted-keys"])
def test_a_snapshot_in_another_form_goes_to_the_strict_reader_and_reads_the_same(how: str) -> None:
    msg = Message("user", "x", metadata={"b": 1, "a": [1.5, None]})
    snap = Snapshot(SnapshotData([msg], {"k": "v"}), app_data={"z": 1, "y": 2})
    doc = json.loads(snap.to_json())
    raw = json.dumps(doc, indent=2 if how == "indented" else None, sort_keys=how == "sorted-keys")
    assert Snapshot._canonical(raw.encode()) is None
    read = Snapshot.from_json(raw)
    if how == "indented":
        assert read == snap
    else:  # the same values; messages are equal only when stored alike, keys in order
        messages = read.data.messages
        assert json.loads(read.to_json()) == doc and messages is not None and messages != [msg]
        assert list(messages[0].metadata) == ["a", "b"]


@pytest.mark.parametrize("depth", [201, 260])
def test_a_byte_exact_snapshot_nested_too_deeply_is_still_corrupt(depth: int) -> None:
    # Written as the serialiser writes (no spaces): the one-pass reader skips the
    # plain-JSON checks, so its parser's own nesting bound must refuse it first.
    nested = "1"
    for _ in range(depth):
        nested = f"[{nested}]"
    base = Snapshot(SnapshotData([Message("user", "x", id="m")]))
    raw = base.to_json().replace(b'"metadata":{}', b'"metadata":{"k":' + nested.encode() + b"}")
    assert Snapshot._canonical(raw) is None
    with pytest.raises(SnapshotCorruptError):
        Snapshot.from_json(raw)


def _nested(depth: int) -> Any:
    """A plain-JSON value ``depth`` levels deep (a scalar is depth 0, ``{"k": 1}`` depth 1)."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return {"k": value}


@pytest.mark.parametrize("where", ["app_data", "state"])
def test_the_one_pass_reader_never_takes_a_value_the_depth_rule_refuses(where: str) -> None:
    # app_data sits one level below the document, the shallowest free-form value: the
    # parser's bound, not a plain-JSON check, must refuse MAX_JSON_DEPTH + 1 there.
    for depth in (MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH + 40):
        placeholder = Snapshot(SnapshotData(state={"k": 0}), app_data={"k": 0})
        nested = json.dumps(_nested(depth), separators=(",", ":")).encode()
        raw = placeholder.to_json().replace(b'{"k":0}', nested, 1 if where == "state" else 2)
        if where == "state":
            assert b'"state":{"k":[' in raw
        assert Snapshot._canonical(raw) is None
        with pytest.raises(SnapshotCorruptError, match="nested deeper"):
            Snapshot.from_json(raw)
    # The deepest value the rule accepts is stored and read back (either reader).
    snap = Snapshot(SnapshotData(state=_nested(MAX_JSON_DEPTH)), app_data=_nested(MAX_JSON_DEPTH))
    assert Snapshot.from_json(snap.to_json()) == snap


EARLY = "0001-01-01T00:00:00+01:00"  # before the first datetime UTC can hold


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(_doc([]) | {"created_at": EARLY}).encode(),
        json.dumps(_doc([]) | {"created_at": EARLY, "app_data": float("nan")}).encode(),
        b'{"schema_version": 1, "created_at": "' + EARLY.encode() + b'", "data": {"a": 1, "a": 1}}',
    ],
    ids=["early", "early-and-nan", "early-and-duplicate-key"],
)
def test_a_time_with_no_utc_equivalent_is_corrupt_not_an_overflow(raw: bytes) -> None:
    # It was a bare OverflowError from Snapshot._utc, which also hid the strict
    # reader's own refusal of the NaN and the duplicate key.
    with pytest.raises(SnapshotCorruptError, match=r"has no UTC equivalent|NaN|duplicate"):
        Snapshot.from_json(raw)


def test_a_timeline_entry_at_such_a_time_is_a_validation_error() -> None:
    with pytest.raises(ValueError, match="has no UTC equivalent"):
        TimelineEntry(rev=1, kind="edit", at=datetime.fromisoformat(EARLY))
