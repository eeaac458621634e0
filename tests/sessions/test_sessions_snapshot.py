"""Snapshot models, their stored form, UUIDv7 ids and field selection."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from framework_agents import Message, ToolCall
from framework_agents.errors import SnapshotCorruptError, SnapshotFieldError, StateNotJsonError
from framework_agents.sessions import Snapshot, SnapshotData, select_snapshot_fields
from framework_agents.sessions.snapshot import (
    PLAIN_SNAPSHOT_FORMAT_VERSION,
    SNAPSHOT_FORMAT_VERSION,
    is_snapshot_id,
    new_snapshot_id,
)

# -- select_snapshot_fields ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, set()),
        ({"preset": "session"}, {"messages", "state"}),
        (
            {"preset": "session", "include": ["system_prompt"]},
            {"messages", "state", "system_prompt"},
        ),
        ({"preset": "session", "exclude": ["state"]}, {"messages"}),
        ({"preset": "session", "exclude": ["messages", "state"]}, set()),
        ({"include": ["state"]}, {"state"}),
        ({"include": ("system_prompt", "messages")}, {"system_prompt", "messages"}),
        ({"exclude": ["state"]}, set()),
        # include wins over exclude: (base - exclude) | include
        ({"preset": "session", "exclude": ["state"], "include": ["state"]}, {"messages", "state"}),
        ({"include": ["state"], "exclude": ["state"]}, {"state"}),
        ({"preset": "session", "exclude": ["system_prompt"]}, {"messages", "state"}),
    ],
    ids=[
        "no-preset",
        "session",
        "session+prompt",
        "session-state",
        "session-all",
        "include-only",
        "include-tuple",
        "exclude-only",
        "include-beats-exclude",
        "include-beats-exclude-no-preset",
        "exclude-absent",
    ],
)
def test_select_snapshot_fields(kwargs: dict[str, object], expected: set[str]) -> None:
    assert select_snapshot_fields(**kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"preset": "everything"},
        {"preset": ""},
        {"include": ["memory"]},
        {"exclude": ["systemPrompt"]},
        {"include": "state"},
        {"include": 5},
        {"preset": "session", "include": ["messages", "bogus"]},
    ],
    ids=["preset", "empty-preset", "include", "exclude", "str-include", "int", "mixed"],
)
def test_unknown_presets_and_fields_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(SnapshotFieldError) as info:
        select_snapshot_fields(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "SNAPSHOT_FIELD"


# -- ids ----------------------------------------------------------------------------------


def test_snapshot_ids_are_uuid7() -> None:
    sid = new_snapshot_id()
    parsed = uuid.UUID(sid)
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert is_snapshot_id(sid)
    ms = parsed.int >> 80
    now_ms = datetime.now(UTC).timestamp() * 1000
    assert abs(now_ms - ms) < 60_000


def test_snapshot_ids_strictly_increase_within_a_process() -> None:
    ids = [new_snapshot_id() for _ in range(20_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_snapshot_ids_are_monotonic_across_threads() -> None:
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def work(out: list[str]) -> None:
        out.extend(new_snapshot_id() for _ in range(2000))

    threads = [threading.Thread(target=work, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [i for out in per_thread for i in out]
    assert len(set(everything)) == len(everything)
    for out in per_thread:
        assert out == sorted(out)


@pytest.mark.parametrize(
    "value",
    ["", "not-a-uuid", "../../etc/passwd", str(uuid.uuid4()).upper(), uuid.uuid4().hex, None, 7],
    ids=["empty", "word", "traversal", "upper", "hex", "none", "int"],
)
def test_is_snapshot_id_refuses_non_canonical(value: object) -> None:
    assert not is_snapshot_id(value)


# -- models -------------------------------------------------------------------------------


def _history() -> list[Message]:
    return [
        Message("user", "hi"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "add", {"a": 1})]),
        Message("tool", "2", tool_call_id="c1", name="add"),
        Message("assistant", "done", metadata={"kind": "x"}),
    ]


def test_absent_fields_are_absent_from_the_stored_form() -> None:
    snap = Snapshot(SnapshotData(state={"n": 1}))
    doc = json.loads(snap.to_json())
    assert doc["data"] == {"state": {"n": 1}}
    assert doc["schema_version"] == PLAIN_SNAPSHOT_FORMAT_VERSION  # every release reads it
    assert doc["app_data"] is None
    assert snap.data.fields == {"state"}
    assert SnapshotData().fields == set()
    assert json.loads(Snapshot(SnapshotData()).to_json())["data"] == {}


def test_round_trip_keeps_everything() -> None:
    data = SnapshotData(messages=_history(), state={"k": [1, 2.5, None, "x"]}, system_prompt="be")
    snap = Snapshot(data, app_data={"ui": {"tab": 3}})
    back = Snapshot.from_json(snap.to_json())
    assert back == snap
    assert back.data.messages is not None and data.messages is not None
    assert [m.id for m in back.data.messages] == [m.id for m in data.messages]
    assert back.created_at.tzinfo is not None


def test_empty_state_and_prompt_are_present_not_absent() -> None:
    snap = Snapshot(SnapshotData(messages=[], state={}, system_prompt=""))
    back = Snapshot.from_json(snap.to_json())
    assert back.data.fields == {"messages", "state", "system_prompt"}


def test_created_at_is_utc_and_must_be_aware() -> None:
    plus2 = timezone(timedelta(hours=2))
    snap = Snapshot(SnapshotData(), created_at=datetime(2024, 1, 1, 12, tzinfo=plus2))
    assert snap.created_at == datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert snap.created_at.utcoffset() == timedelta(0)
    with pytest.raises(ValidationError):
        Snapshot(SnapshotData(), created_at=datetime(2024, 1, 1))


def test_snapshot_id_must_be_a_uuid() -> None:
    with pytest.raises(ValidationError):
        Snapshot(SnapshotData(), snapshot_id="../../x")


@pytest.mark.parametrize(
    "bad",
    [{"f": object()}, {"f": float("nan")}, {"f": float("inf")}, {1: "k"}, {"f": {1, 2}}],
    ids=["object", "nan", "inf", "int-key", "set"],
)
def test_state_and_app_data_must_be_json(bad: dict[object, object]) -> None:
    with pytest.raises((StateNotJsonError, ValidationError)):
        SnapshotData(state=bad)  # type: ignore[arg-type]
    with pytest.raises(StateNotJsonError):
        Snapshot(SnapshotData(), app_data=bad)


@pytest.mark.parametrize("where", ["app_data", "state"])
def test_state_changed_in_place_after_validation_is_refused_when_stored(where: str) -> None:
    # Not written as null (pydantic's default for a NaN): the stored form would differ.
    snap = Snapshot(SnapshotData(state={"a": 1}), app_data={"b": 2})
    (snap.app_data if where == "app_data" else snap.data.state)["x"] = float("nan")  # type: ignore[index]
    with pytest.raises(StateNotJsonError):
        snap.to_json()


def _stored(**overrides: object) -> bytes:
    doc = json.loads(Snapshot(SnapshotData(messages=_history(), state={"a": 1})).to_json())
    doc.update(overrides)
    return json.dumps(doc).encode()


CORRUPT = {
    "truncated": _stored()[:-7],
    "not-json": b"\x00\xff garbage",
    "empty": b"",
    "list": b"[]",
    "null": b"null",
    "no-version": json.dumps({"data": {}}).encode(),
    "string-version": _stored(schema_version="1"),
    "bool-version": _stored(schema_version=True),
    "newer-version": _stored(schema_version=SNAPSHOT_FORMAT_VERSION + 1),
    "zero-version": _stored(schema_version=0),
    "unknown-key": _stored(surprise=1),
    "bad-data": _stored(data={"messages": "nope"}),
    "unknown-data-field": _stored(data={"memory": []}),
    "bad-message": _stored(data={"messages": [{"role": "robot"}]}),
    "bad-id": _stored(snapshot_id="../../x"),
    "naive-time": _stored(created_at="2024-01-01T00:00:00"),
    "no-data": _stored(data=None),
    "deep": b'{"schema_version": 1, "data": {}, "app_data": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}",
}


@pytest.mark.parametrize("raw", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_documents_raise_snapshot_corrupt(raw: bytes) -> None:
    with pytest.raises(SnapshotCorruptError) as info:
        Snapshot.from_json(raw)
    assert info.value.code == "SNAPSHOT_CORRUPT"


def test_newer_schema_version_says_upgrade() -> None:
    with pytest.raises(SnapshotCorruptError, match="upgrade"):
        Snapshot.from_json(_stored(schema_version=99))


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(
    state=st.none() | st.dictionaries(st.text(), _json, max_size=4),
    prompt=st.none() | st.text(),
    app=_json,
)
def test_any_json_state_round_trips(
    state: dict[str, object] | None, prompt: str | None, app: object
) -> None:
    snap = Snapshot(SnapshotData(state=state, system_prompt=prompt), app_data=app)
    back = Snapshot.from_json(snap.to_json())
    assert back.data.state == state
    assert back.data.system_prompt == prompt
    assert back.app_data == app
    assert back.snapshot_id == snap.snapshot_id


def test_an_appending_managers_latest_is_marked_so_a_release_without_logs_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from framework_agents.sessions import InMemoryStorage, SessionManager
    from framework_agents.sessions import snapshot as snapshot_module

    async def body() -> None:
        storage = InMemoryStorage()
        appending = SessionManager("s", storage)  # append=True: a log may follow
        first = Snapshot(SnapshotData(messages=[Message("user", "a")]))
        await appending.save_latest(first)
        stored = await storage.get(appending.latest_key)
        assert stored is not None and json.loads(stored)["schema_version"] == 2
        more = Snapshot(SnapshotData(messages=[Message("user", "a"), Message("user", "b")]))
        await appending.save_latest(more)  # a delta in the log
        loaded = await SessionManager("s", storage).load_latest()
        assert loaded == more and loaded.schema_version == PLAIN_SNAPSHOT_FORMAT_VERSION
        # A release that reads version 1 only (no logs) refuses instead of reading "a".
        monkeypatch.setattr(snapshot_module, "SNAPSHOT_FORMAT_VERSION", 1)
        with pytest.raises(SnapshotCorruptError, match="newer"):
            Snapshot.from_json(stored)
        monkeypatch.undo()
        plain = SessionManager("p", storage, append=False)
        await plain.save_latest(first)
        raw = await storage.get(plain.latest_key)
        assert (
            raw is not None and json.loads(raw)["schema_version"] == PLAIN_SNAPSHOT_FORMAT_VERSION
        )

    asyncio.run(body())


def _count_json_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the snapshot's plain-JSON check looks at, from now on."""
    from framework_agents.sessions import snapshot as snapshot_module

    seen: list[str] = []
    real = snapshot_module._json_problem

    def counting(value: Any, path: str) -> str | None:
        seen.append(path)
        return real(value, path)

    monkeypatch.setattr(snapshot_module, "_json_problem", counting)
    return seen


def test_a_message_is_checked_as_json_once_and_a_new_one_always(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session's next snapshot checks what the run added, never skips a new message."""
    from framework_agents import ToolCall
    from framework_agents.errors import AgentError

    seen = _count_json_checks(monkeypatch)
    history = [
        Message("user", "hi", metadata={"k": 1}),
        Message("assistant", "", tool_calls=[ToolCall("c1", "f", {"a": 1})]),
        Message("tool", "r", tool_call_id="c1", name="f"),
        Message("assistant", "plain"),
    ]
    SnapshotData(messages=history)
    assert seen == ["messages[0].metadata", "messages[1].tool_calls[0].args"]
    seen.clear()
    grown = [*history, Message("user", "more", metadata={"n": 2})]
    SnapshotData(messages=grown)
    assert seen == ["messages[4].metadata"]  # only the new one
    bad = Message("user", "x", metadata={"when": {1, 2}})  # a set: not JSON
    with pytest.raises(AgentError) as info:
        SnapshotData(messages=[*grown, bad])
    assert info.value.code == "STATE_NOT_JSON"
    with pytest.raises(AgentError):  # refused every time, never remembered as checked
        SnapshotData(messages=[*grown, bad])


def test_what_was_checked_goes_with_its_messages() -> None:
    """No entry outlives its message, so a reused id is never taken for a checked message."""
    import gc

    from framework_agents.sessions import snapshot as snapshot_module

    def check_some() -> list[int]:
        made = [Message("user", f"m{i}", metadata={"i": i}) for i in range(5)]
        SnapshotData(messages=made)
        return [id(m) for m in made]

    ids = check_some()
    gc.collect()
    assert not set(ids) & set(snapshot_module._JSON_CHECKED)


def test_snapshot_data_of_a_manager_checks_only_what_it_has_not_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``SessionManager.snapshot_data``: the stored prefix (same objects) is not looked at."""
    from framework_agents import InMemoryStorage, SessionManager, ToolCall
    from framework_agents.errors import AgentError
    from framework_agents.sessions import snapshot as snapshot_module

    manager = SessionManager("s", InMemoryStorage())
    history = [
        Message("user", f"u{i}", metadata={"i": i}) if i % 2 == 0 else Message("assistant", "a")
        for i in range(6)
    ]
    asyncio.run(manager.save_latest(Snapshot(manager.snapshot_data(history))))
    seen = _count_json_checks(monkeypatch)
    monkeypatch.setattr(snapshot_module, "_checked_before", lambda msg: False)  # no memo
    call = ToolCall("c1", "f", {"a": 1})
    grown = [*history, Message("assistant", "", tool_calls=[call])]
    data = manager.snapshot_data(grown, {"k": 1})
    assert data.messages == grown and data.state == {"k": 1}
    # The stored six are not looked at; the new one is checked on its own (index 0 of
    # what is new), and a refusal is raised from the whole list, naming index 6.
    assert seen == ["messages[0].tool_calls[0].args", "state"]
    assert all(a is b for a, b in zip(data.messages, grown, strict=True))
    bad = Message("assistant", "", tool_calls=[ToolCall("c2", "f", {"a": float("nan")})])
    with pytest.raises(AgentError, match=r"messages\[6\]\.tool_calls\[0\]\.args"):
        manager.snapshot_data([*history, bad])
    seen.clear()
    edited = [history[0].model_copy(update={"metadata": {"x": float("nan")}}), *history[1:]]
    with pytest.raises(AgentError) as info:  # not the stored object: checked, and refused
        manager.snapshot_data(edited)
    assert info.value.code == "STATE_NOT_JSON"
    assert seen == ["messages[0].metadata"]
