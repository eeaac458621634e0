"""ThreadCheckpoint refuses what a checkpointer never writes, with coded errors."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from framework_agents import AgentError, FileCheckpointer, Message, ThreadCheckpoint, ToolCall


@pytest.mark.parametrize("bad", [None, 1, ["a"], b"a", 1.5, {"a": 1}], ids=repr)
def test_a_thread_id_of_the_wrong_type_is_thread_id_invalid(bad: object) -> None:
    with pytest.raises(AgentError) as info:
        ThreadCheckpoint(thread_id=bad)
    assert info.value.code == "THREAD_ID_INVALID"
    with pytest.raises(AgentError) as info:
        ThreadCheckpoint(bad)  # type: ignore[arg-type]  # positionally too
    assert info.value.code == "THREAD_ID_INVALID"


def test_a_missing_thread_id_is_thread_id_invalid() -> None:
    with pytest.raises(AgentError) as info:
        ThreadCheckpoint()
    assert info.value.code == "THREAD_ID_INVALID"


def _stored(tmp_path: Path, **changes: object) -> Path:
    cp = FileCheckpointer(tmp_path)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    asyncio.run(cp.save(ThreadCheckpoint("t1", when, [Message("user", "hi", id="u")])))
    path = cp.path("t1")
    doc = json.loads(path.read_bytes())["checkpoint"]  # as a version-2 file holds it
    for key, value in changes.items():
        if value is ...:
            del doc[key]
        else:
            doc[key] = value
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "changes",
    [{"version": ...}, {"saved_at": 5}, {"saved_at": 5.5}, {"saved_at": True}],
    ids=["no-version", "saved-at-int", "saved-at-float", "saved-at-bool"],
)
def test_a_stored_checkpoint_without_version_or_with_a_numeric_time_is_corrupt(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    path = _stored(tmp_path, **changes)
    before = path.read_bytes()
    with pytest.raises(AgentError) as info:
        asyncio.run(FileCheckpointer(tmp_path).load("t1"))
    assert info.value.code == "CHECKPOINT_CORRUPT"
    assert path.read_bytes() == before


def test_an_iso_saved_at_string_still_loads(tmp_path: Path) -> None:
    _stored(tmp_path, saved_at="2026-01-01T00:00:00Z")
    got = asyncio.run(FileCheckpointer(tmp_path).load("t1"))
    assert got is not None and got.saved_at == datetime(2026, 1, 1, tzinfo=UTC)


# -- the constructor validates the message list on its own schema ------------------------------


def _whole(**data: object) -> ThreadCheckpoint:
    """The checkpoint pydantic's own validation of every field makes (no constructor)."""
    return ThreadCheckpoint.model_validate(data)


def test_messages_given_to_the_constructor_come_out_as_the_models_validation_gives() -> None:
    call = ToolCall("c1", "f", {"a": [1]})
    given = [
        Message("user", "hi", id="u"),
        Message("assistant", "", tool_calls=[call], id="a"),
        {"role": "tool", "content": "r", "tool_call_id": "c1", "id": "t"},  # a dict too
    ]
    when = datetime(2026, 1, 1, tzinfo=UTC)
    made = ThreadCheckpoint("t1", when, given)  # type: ignore[arg-type]
    want = _whole(thread_id="t1", messages=given, saved_at=when)
    assert made == want
    assert made.messages is not given and made.messages[0] is given[0]  # same instances
    assert made.model_fields_set == want.model_fields_set
    assert ThreadCheckpoint("t1", messages=[]).messages == []


@pytest.mark.parametrize(
    "bad",
    [[1], [Message("user", "ok"), {"role": "nobody"}], [{"role": "user", "extra": 1}]],
    ids=["number", "bad-role", "extra-key"],
)
def test_a_bad_message_is_reported_as_the_models_validation_reports_it(bad: list[object]) -> None:
    with pytest.raises(ValidationError) as made:
        ThreadCheckpoint("t1", None, bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as whole:
        _whole(thread_id="t1", messages=bad)
    assert made.value.errors() == whole.value.errors()
    assert made.value.errors()[0]["loc"][0] == "messages"


def test_a_model_level_error_shows_the_messages_given() -> None:
    given = [Message("user", "hi", id="u")]
    orphan = [Message("tool", "r", tool_call_id="c9", id="r")]  # results with no turn
    with pytest.raises(ValidationError) as made:
        ThreadCheckpoint("t1", None, given, results=orphan)
    with pytest.raises(ValidationError) as whole:
        _whole(thread_id="t1", messages=given, results=orphan)

    def plain(errors: list[Any]) -> list[Any]:  # ctx holds exception objects
        return [{k: v for k, v in e.items() if k != "ctx"} for e in errors]

    assert plain(made.value.errors()) == plain(whole.value.errors())
    assert made.value.errors()[0]["input"]["messages"] == given
