"""SessionManager: key layout, latest and immutable snapshots, id validation, corruption."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from async_helper import arun
from framework_agents import Message
from framework_agents.errors import (
    SnapshotCorruptError,
    SnapshotMissingError,
    StorageKeyInvalidError,
)
from framework_agents.sessions import (
    InMemoryStorage,
    LocalFileStorage,
    SessionManager,
    Snapshot,
    SnapshotData,
    Storage,
)

T = TypeVar("T")

LATEST = "session/user-42/scopes/agent/default/snapshots/snapshot_latest.json"


BACKENDS: dict[str, Callable[[Path], Storage]] = {
    "memory": lambda _tmp: InMemoryStorage(),
    "local": lambda tmp: LocalFileStorage(tmp / "store"),
}


@pytest.fixture(params=list(BACKENDS), ids=list(BACKENDS))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    return BACKENDS[request.param](tmp_path)


def _data(n: int = 1) -> SnapshotData:
    return SnapshotData(
        messages=[Message("user", f"q{n}"), Message("assistant", f"a{n}")], state={"n": n}
    )


def test_latest_round_trip_uses_the_documented_key(storage: Storage) -> None:
    sm = SessionManager("user-42", storage)

    async def body() -> None:
        assert await sm.load_latest() is None
        snap = Snapshot(_data(), app_data={"v": 1})
        await sm.save_latest(snap)
        assert await storage.list() == [LATEST]
        assert await sm.load_latest() == snap
        raw = await storage.get(LATEST)
        assert raw is not None and json.loads(raw)["data"]["state"] == {"n": 1}
        newer = Snapshot(_data(2))
        await sm.save_latest(newer)
        assert await sm.load_latest() == newer
        assert await storage.list() == [LATEST]

    arun(body())
    assert sm.latest_key == LATEST


def test_local_storage_layout_on_disk(tmp_path: Path) -> None:
    sm = SessionManager("s1", LocalFileStorage(tmp_path), agent_id="writer")

    async def body() -> str:
        await sm.save_latest(Snapshot(_data()))
        return await sm.save_snapshot(_data())

    sid = arun(body())
    snaps = tmp_path / "session" / "s1" / "scopes" / "agent" / "writer" / "snapshots"
    assert sorted(p.name for p in snaps.iterdir()) == sorted(
        ["snapshot_latest.json", f"{sid}.json"]
    )


def test_immutable_snapshots(storage: Storage) -> None:
    sm = SessionManager("user-42", storage)

    async def body() -> None:
        assert await sm.list_snapshot_ids() == []
        ids = [await sm.save_snapshot(_data(i), app_data={"i": i}) for i in range(12)]
        assert all(str(uuid.UUID(i)) == i and uuid.UUID(i).version == 7 for i in ids)
        assert await sm.list_snapshot_ids() == ids  # oldest first
        for i, sid in enumerate(ids):
            snap = await sm.restore_snapshot(sid)
            assert snap.snapshot_id == sid
            assert snap.data.state == {"n": i}
            assert snap.app_data == {"i": i}
        # save_latest does not add to the immutable list; save_snapshot does not touch latest.
        await sm.save_latest(Snapshot(_data(99)))
        assert await sm.list_snapshot_ids() == ids
        latest = await sm.load_latest()
        assert latest is not None and latest.data.state == {"n": 99}
        await sm.delete_snapshot(ids[0])
        assert await sm.list_snapshot_ids() == ids[1:]

    arun(body())


def test_save_snapshot_accepts_a_plain_mapping(storage: Storage) -> None:
    sm = SessionManager("u", storage)

    async def body() -> None:
        sid = await sm.save_snapshot({"state": {"x": 1}, "system_prompt": "p"})
        snap = await sm.restore_snapshot(sid)
        assert snap.data.fields == {"state", "system_prompt"}

    arun(body())


def test_restore_unknown_snapshot_is_missing(storage: Storage) -> None:
    sm = SessionManager("u", storage)
    with pytest.raises(SnapshotMissingError) as info:
        arun(sm.restore_snapshot(str(uuid.uuid4())))
    assert info.value.code == "SNAPSHOT_MISSING"


@pytest.mark.parametrize(
    "bad_id",
    ["../../../../etc/passwd", "snapshot_latest", "", "x/y", str(uuid.uuid4()).upper(), "a\x00"],
    ids=["traversal", "latest", "empty", "slash", "upper", "nul"],
)
def test_restore_with_a_non_uuid_id_is_missing_and_reads_nothing(
    storage: Storage, bad_id: str
) -> None:
    sm = SessionManager("u", storage)
    arun(sm.save_latest(Snapshot(_data())))
    with pytest.raises(SnapshotMissingError):
        arun(sm.restore_snapshot(bad_id))


def test_ids_of_foreign_files_are_not_listed(storage: Storage) -> None:
    sm = SessionManager("u", storage)
    prefix = "session/u/scopes/agent/default/snapshots/"

    async def body() -> None:
        sid = await sm.save_snapshot(_data())
        await storage.put(prefix + "notes.txt", b"x")
        await storage.put(prefix + "not-a-uuid.json", b"{}")
        await storage.put(prefix + "sub/" + str(uuid.uuid4()) + ".json", b"{}")
        await sm.save_latest(Snapshot(_data()))
        assert await sm.list_snapshot_ids() == [sid]

    arun(body())


def test_agents_and_sessions_are_isolated(storage: Storage) -> None:
    a = SessionManager("s", storage, agent_id="a")
    b = SessionManager("s", storage, agent_id="b")
    other = SessionManager("s2", storage, agent_id="a")
    prefix_clash = SessionManager("s", storage, agent_id="a-1")  # "a" is a string prefix

    async def body() -> None:
        await a.save_latest(Snapshot(_data(1)))
        sid = await a.save_snapshot(_data(1))
        await prefix_clash.save_snapshot(_data(3))
        assert await b.load_latest() is None
        assert await other.load_latest() is None
        assert await b.list_snapshot_ids() == []
        assert await a.list_snapshot_ids() == [sid]
        with pytest.raises(SnapshotMissingError):
            await b.restore_snapshot(sid)

    arun(body())


@pytest.mark.parametrize(
    "bad",
    ["", "..", ".", "a/b", "../x", "a\\b", "a\x00", "CON", "caf\u00e9", " x", ".hidden", 42],
    ids=[
        "empty",
        "dotdot",
        "dot",
        "slash",
        "up",
        "bs",
        "nul",
        "device",
        "unicode",
        "space",
        "hidden",
        "int",
    ],
)
def test_session_and_agent_ids_are_validated(bad: object) -> None:
    with pytest.raises(StorageKeyInvalidError, match="session_id") as info:
        SessionManager(bad, InMemoryStorage())  # type: ignore[arg-type]
    assert info.value.code == "STORAGE_KEY_INVALID"
    with pytest.raises(StorageKeyInvalidError, match="agent_id"):
        SessionManager("ok", InMemoryStorage(), agent_id=bad)  # type: ignore[arg-type]


def test_corrupt_latest_raises_snapshot_corrupt(storage: Storage) -> None:
    sm = SessionManager("u", storage)

    async def body() -> None:
        await storage.put(sm.latest_key, b'{"schema_version": 1, "data": {"messages": 3}}')
        with pytest.raises(SnapshotCorruptError):
            await sm.load_latest()
        await storage.put(sm.latest_key, b"{not json")
        with pytest.raises(SnapshotCorruptError):
            await sm.load_latest()
        # The corrupt document is left as it was for a human to inspect.
        assert await storage.get(sm.latest_key) == b"{not json"

    arun(body())


def test_immutable_snapshot_holding_another_id_is_corrupt(storage: Storage) -> None:
    sm = SessionManager("u", storage)

    async def body() -> None:
        sid = await sm.save_snapshot(_data())
        forged = Snapshot(_data(), snapshot_id=str(uuid.uuid4()))
        await storage.put(sm.snapshot_key(sid), forged.to_json())
        with pytest.raises(SnapshotCorruptError, match="holds id"):
            await sm.restore_snapshot(sid)

    arun(body())


def test_save_latest_takes_a_snapshot() -> None:
    with pytest.raises(TypeError, match="Snapshot"):
        arun(SessionManager("u", InMemoryStorage()).save_latest(_data()))  # type: ignore[arg-type]


def test_a_restarted_process_sees_the_saved_session(tmp_path: Path) -> None:
    arun(SessionManager("u", LocalFileStorage(tmp_path)).save_latest(Snapshot(_data(7))))
    fresh = SessionManager("u", LocalFileStorage(tmp_path))
    snap = arun(fresh.load_latest())
    assert snap is not None and snap.data.state == {"n": 7}


def test_snapshot_data_refuses_what_says_it_equals_a_stored_message() -> None:
    # The manager skips validating the messages it stored: an object that is no message
    # but says it equals one (``unittest.mock.ANY``) must still be refused, and must not
    # get into the manager's record (junk would then pass by equality to it).
    from unittest import mock

    from framework_agents import AgentError, InMemoryStorage, Message, SessionManager
    from framework_agents.sessions import Snapshot

    manager = SessionManager("s", InMemoryStorage())
    history = [Message("user", f"u{i}", id=f"u{i}") for i in range(3)]
    arun(manager.save_latest(Snapshot(manager.snapshot_data(history))))
    for bad in (mock.ANY, "junk"):
        with pytest.raises(AgentError) as info:
            manager.snapshot_data([bad, *history[1:]])  # type: ignore[list-item]
        assert info.value.code == "INVALID_ARGUMENT"


def test_a_stored_message_whose_class_says_it_equals_anything_hides_no_change() -> None:
    from framework_agents import InMemoryStorage, Message, SessionManager
    from framework_agents.sessions import Snapshot

    class Loose(Message):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    storage = InMemoryStorage()
    manager = SessionManager("s", storage)
    first: list[Message] = [Loose(role="user", content="a", id="a")]
    arun(manager.save_latest(Snapshot(manager.snapshot_data(first))))
    later = [Message("user", "b", id="b"), Message("user", "c", id="c")]
    arun(manager.save_latest(Snapshot(manager.snapshot_data(later))))
    loaded = arun(SessionManager("s", storage).load_latest())
    assert loaded is not None and loaded.data.messages is not None
    assert [m.id for m in loaded.data.messages] == ["b", "c"]


def test_save_latest_never_replaces_a_corrupt_latest(storage: Storage) -> None:
    """After a load that reported SNAPSHOT_CORRUPT, and as a manager's first write: the
    save is refused with the same code and the damaged value is left as it is (it used to
    be replaced by a blind put, the damage gone without a trace).
    """
    damaged = b'{"schema_version": 1, "data": {"messages": 5}}'

    async def body() -> None:
        await storage.put(LATEST, damaged)
        reader = SessionManager("user-42", storage)
        with pytest.raises(SnapshotCorruptError):
            await reader.load_latest()
        with pytest.raises(SnapshotCorruptError):
            await reader.save_latest(Snapshot(_data(2)))
        with pytest.raises(SnapshotCorruptError):  # a manager that never read it
            await SessionManager("user-42", storage).save_latest(Snapshot(_data(3)))
        assert await storage.get(LATEST) == damaged
        await storage.delete(LATEST)  # a person removes it: saves go on
        await reader.save_latest(Snapshot(_data(4)))
        latest = await SessionManager("user-42", storage).load_latest()
        assert latest is not None and latest.data.state == {"n": 4}

    arun(body())
