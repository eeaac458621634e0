"""ThreadCheckpoint refuses what a checkpointer never writes, with coded errors."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from framework_agents import AgentError, FileCheckpointer, Message, ThreadCheckpoint


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
    doc = json.loads(path.read_bytes())
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
