"""``SessionManager(append=True)``: save_latest appends what is new to the value's log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from framework_agents import (
    AgentError,
    InMemoryStorage,
    LocalFileStorage,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
)
from framework_agents._persist import scan
from framework_agents.sessions import Storage
from framework_agents.sessions import manager as manager_module

LATEST = "session/s/scopes/agent/default/snapshots/snapshot_latest.json"
LOG = "session/s/scopes/agent/default/snapshots/.snapshot_latest.json.log"


def _storage(kind: str, root: Path) -> Storage:
    return InMemoryStorage() if kind == "memory" else LocalFileStorage(root)


def _snap(history: list[Message], n: int) -> Snapshot:
    return Snapshot(SnapshotData(messages=history, state={"n": n}), app_data={"turn": n})


def _grow(sm: SessionManager, history: list[Message], start: int, stop: int) -> None:
    async def main() -> None:
        for i in range(start, stop):
            history.append(Message("user", f"m{i}", id=f"m{i}"))
            await sm.save_latest(_snap(history, i))

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_saves_that_extend_the_history_append_and_load_whole(tmp_path: Path, kind: str) -> None:
    storage = _storage(kind, tmp_path)
    sm = SessionManager("s", storage, append=True)
    history: list[Message] = []
    _grow(sm, history, 0, 1)
    first = asyncio.run(storage.get(LATEST))
    _grow(sm, history, 1, 6)
    assert asyncio.run(storage.get(LATEST)) == first  # the stored value is untouched
    if kind == "file":
        assert scan((tmp_path / LOG).read_bytes()).payloads[1:]  # five records
    latest = asyncio.run(SessionManager("s", storage).load_latest())
    assert latest is not None
    assert [m.id for m in latest.data.messages or []] == [f"m{i}" for i in range(6)]
    assert latest.data.state == {"n": 5} and latest.app_data == {"turn": 5}
    # Another history is stored whole and starts a new log.
    other = [Message("user", "other", id="o")]
    asyncio.run(sm.save_latest(_snap(other, 99)))
    latest = asyncio.run(SessionManager("s", storage).load_latest())
    assert latest is not None and [m.id for m in latest.data.messages or []] == ["o"]
    if kind == "file":
        assert not (tmp_path / LOG).exists()


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_stale_appender_is_refused(tmp_path: Path, kind: str) -> None:
    storage = _storage(kind, tmp_path)
    seed = SessionManager("s", storage, append=True)
    history: list[Message] = []
    _grow(seed, history, 0, 2)

    async def main() -> None:
        mine = SessionManager("s", storage, append=True)
        theirs = SessionManager("s", storage, append=True)
        base_mine = await mine.load_latest()
        base_theirs = await theirs.load_latest()
        assert base_mine is not None and base_theirs is not None
        msgs = list(base_theirs.data.messages or [])
        await theirs.save_latest(_snap([*msgs, Message("user", "t", id="t")], 7))
        msgs = list(base_mine.data.messages or [])
        with pytest.raises(AgentError) as info:
            await mine.save_latest(_snap([*msgs, Message("user", "x", id="x")], 8))
        assert info.value.code == "CHECKPOINT_CONFLICT"
        latest = await SessionManager("s", storage).load_latest()
        assert latest is not None
        assert [m.id for m in latest.data.messages or []] == ["m0", "m1", "t"]

    asyncio.run(main())


def test_the_log_is_folded_once_it_outgrows_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager_module, "FOLD_MIN_BYTES", 0)
    storage = LocalFileStorage(tmp_path)
    sm = SessionManager("s", storage, append=True)
    history: list[Message] = []
    _grow(sm, history, 0, 40)
    size = (tmp_path / LATEST).stat().st_size
    log = (tmp_path / LOG).stat().st_size if (tmp_path / LOG).exists() else 0
    assert log <= size  # folded along the way: never more than about half plus a record
    latest = asyncio.run(SessionManager("s", storage).load_latest())
    assert latest is not None and len(latest.data.messages or []) == 40


def test_a_torn_log_tail_is_ignored_and_cut_by_the_next_append(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    history: list[Message] = []
    _grow(SessionManager("s", storage, append=True), history, 0, 4)
    data = (tmp_path / LOG).read_bytes()
    (tmp_path / LOG).write_bytes(data[:-7])

    async def main() -> None:
        sm = SessionManager("s", storage, append=True)
        latest = await sm.load_latest()
        assert latest is not None
        assert [m.id for m in latest.data.messages or []] == ["m0", "m1", "m2"]
        msgs = [*(latest.data.messages or []), Message("user", "next", id="next")]
        await sm.save_latest(_snap(msgs, 9))

    asyncio.run(main())
    assert not scan((tmp_path / LOG).read_bytes()).torn
    latest = asyncio.run(SessionManager("s", storage).load_latest())
    assert latest is not None
    assert [m.id for m in latest.data.messages or []] == ["m0", "m1", "m2", "next"]


def test_append_must_be_a_bool() -> None:
    with pytest.raises(AgentError) as info:
        SessionManager("s", InMemoryStorage(), append="yes")  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"


_TAILS: dict[str, list[Any]] = {
    "nothing": [],
    "messages": [Message("user", "new", id="n1"), Message("assistant", "ok", id="n2")],
    "a dict": [{"role": "user", "content": "as a dict", "id": "n3"}],
    "not a message": [Message("user", "new", id="n4"), 5],
    "bad metadata": [Message("user", "x", id="n5", metadata={"v": float("nan")})],
    "a copy of a stored one": ["copy"],
}


@pytest.mark.parametrize("tail", _TAILS.values(), ids=_TAILS.keys())
def test_snapshot_data_validates_what_is_new_as_the_constructor_validates_it(
    tmp_path: Path, tail: list[Any]
) -> None:
    # SessionManager.snapshot_data skips the stored prefix (validated when it was
    # stored): same messages, same objects, same errors as SnapshotData(...) itself.
    stored = [Message("user", f"m{i}", id=f"m{i}", metadata={"i": i}) for i in range(6)]
    tail = [stored[2].model_copy() if t == "copy" else t for t in tail]
    manager = SessionManager("s", LocalFileStorage(tmp_path))
    asyncio.run(manager.save_latest(Snapshot(manager.snapshot_data(stored, {}))))

    def build(make: Any) -> Any:
        try:
            return make([*stored, *tail], {})
        except (ValidationError, AgentError) as exc:
            return type(exc), str(exc)

    fast, full = build(manager.snapshot_data), build(SnapshotData)
    if isinstance(full, tuple):
        assert fast == full
        return
    assert fast == full and len(fast.messages) == len(stored) + len(tail)
    given = [*stored, *tail]
    for i, (a, b) in enumerate(zip(fast.messages, full.messages, strict=True)):
        assert a is b is given[i] if isinstance(given[i], Message) else a == b
    assert manager._messages == stored  # the manager's record of the stored history
