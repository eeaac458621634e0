"""Files written by format v1 (``tests/fixtures/persisted/v1``) load forever; newer ones fail.

The corpus was written once by the release that defined v1 (``make_v1.py`` records how).
Each test copies it to a temporary directory first: a load must not need to write, but
a store may create its lock files, and the corpus itself must never change. The v2 corpus
(files with their journals, and the SQLite, PostgreSQL and Redis layouts) is read by
``tests/stores/test_stores_golden_v2.py``.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import shutil
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from framework_agents import (
    AgentError,
    FileCheckpointer,
    FileMemory,
    LocalFileStorage,
    Message,
    SessionManager,
)

CORPUS = Path(__file__).parents[1] / "fixtures" / "persisted" / "v1"
WHEN = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
LATEST = "session/s1/scopes/agent/default/snapshots/snapshot_latest.json"
IMMUTABLE = "0190f6c2-0000-7000-8000-000000000002"


def _sync(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body in a fresh event loop (the suite's convention)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


def _expected_history() -> list[Message]:
    spec = importlib.util.spec_from_file_location("make_v1", CORPUS.parent / "make_v1.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    history: list[Message] = module.history()
    return history


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    target = tmp_path / "v1"
    shutil.copytree(CORPUS, target)
    return target


def _bump(path: Path, key: str, value: object) -> None:
    doc = json.loads(path.read_bytes())
    doc[key] = value
    path.write_text(json.dumps(doc))


@_sync
async def test_v1_memory_json_loads(corpus: Path) -> None:
    loaded = await FileMemory(corpus / "memory", max_messages=100).load()
    assert loaded == _expected_history()


@_sync
async def test_v1_checkpoint_loads(corpus: Path) -> None:
    cp = FileCheckpointer(corpus / "checkpoints")
    plain = await cp.load("plain")
    assert plain is not None
    assert plain.messages == _expected_history()
    assert plain.state == {"step": 1, "nested": {"x": [1, 2]}}
    assert plain.saved_at == WHEN
    assert plain.pending is None
    assert await cp.list_threads() == ["plain", "progress"]


@_sync
async def test_v1_checkpoint_with_progress_json_loads_the_delta(corpus: Path) -> None:
    cp = FileCheckpointer(corpus / "checkpoints")
    got = await cp.load("progress")
    assert got is not None
    assert got.messages == _expected_history()
    assert got.state == {"k": "v2"}
    assert got.turn is not None and got.turn.id == "m-turn"
    assert [r.id for r in got.results] == ["m-res"]
    assert [c.id for c in got.in_flight] == ["c-b"]
    assert got.pending is not None and got.pending.id == "c-b"
    assert got.outcome_unknown is True
    assert got.decisions == {"publish": "approve"}


@_sync
async def test_v1_snapshots_load(corpus: Path) -> None:
    session = SessionManager("s1", LocalFileStorage(corpus / "sessions"))
    latest = await session.load_latest()
    assert latest is not None
    assert latest.snapshot_id == "0190f6c2-0000-7000-8000-000000000001"
    assert latest.created_at == WHEN
    assert latest.data.messages == _expected_history()
    assert latest.data.state == {"mood": "ok"}
    assert latest.data.system_prompt == "be kind"
    assert latest.app_data == {"ui": [1, "two"]}
    assert await session.list_snapshot_ids() == [IMMUTABLE]
    old = await session.restore_snapshot(IMMUTABLE)
    assert old.data.messages == _expected_history()[:2]
    assert old.data.state is None


@_sync
async def test_v1_files_load_again_after_new_saves(corpus: Path) -> None:
    memory = FileMemory(corpus / "memory", max_messages=100)
    extra = Message("user", "after the upgrade", id="m-new")
    await memory.save([extra])
    assert await FileMemory(corpus / "memory", max_messages=100).load() == [
        *_expected_history(),
        extra,
    ]


@_sync
async def test_newer_memory_version_is_refused(corpus: Path) -> None:
    path = corpus / "memory" / "memory.json"
    _bump(path, "version", 99)
    before = path.read_bytes()
    memory = FileMemory(corpus / "memory")
    for attempt in (memory.load(), memory.save([Message("user", "x")])):
        with pytest.raises(AgentError) as info:
            await attempt
        assert info.value.code == "MEMORY_CORRUPT"
        assert "newer" in str(info.value)
    assert path.read_bytes() == before


@_sync
async def test_newer_checkpoint_version_is_refused(corpus: Path) -> None:
    _bump(corpus / "checkpoints" / "threads" / "plain" / "checkpoint.json", "version", 99)
    with pytest.raises(AgentError) as info:
        await FileCheckpointer(corpus / "checkpoints").load("plain")
    assert info.value.code == "CHECKPOINT_CORRUPT"


@_sync
async def test_newer_progress_version_is_refused(corpus: Path) -> None:
    _bump(corpus / "checkpoints" / "threads" / "progress" / "progress.json", "version", 99)
    with pytest.raises(AgentError) as info:
        await FileCheckpointer(corpus / "checkpoints").load("progress")
    assert info.value.code == "CHECKPOINT_CORRUPT"


@_sync
async def test_newer_snapshot_version_is_refused(corpus: Path) -> None:
    root = corpus / "sessions"
    _bump(root / LATEST, "schema_version", 99)
    with pytest.raises(AgentError) as info:
        await SessionManager("s1", LocalFileStorage(root)).load_latest()
    assert info.value.code == "SNAPSHOT_CORRUPT"
