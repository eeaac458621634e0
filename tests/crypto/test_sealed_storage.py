"""SealedStorage: session snapshots and their logs sealed on the directory and SQLite stores."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, ParamSpec

import pytest

from async_helper import arun
from framework_agents import Cipher, Message, SessionManager, Snapshot, SnapshotData, open_store
from framework_agents.errors import CheckpointConflictError, StoreIntegrityError
from framework_agents.sessions import LocalFileStorage
from framework_agents.sessions._base import LoggedStorage
from framework_agents.sessions.sealed import SealedStorage
from framework_agents.stores import SqliteStorage

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
CANARY = "canary-7f3a"
P = ParamSpec("P")


def cipher(current: str = "k1") -> Cipher:
    return Cipher(keys={"k1": K1, "k2": K2}, current=current)


def sync(fn: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        arun(fn(*args, **kwargs), timeout=60)

    return run


@pytest.fixture(params=["directory", "sqlite"])
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LoggedStorage]:
    if request.param == "directory":
        yield LocalFileStorage(tmp_path / "store")
    else:
        (tmp_path / "store").mkdir()
        storage = SqliteStorage(tmp_path / "store" / "db.sqlite")
        yield storage
        arun(storage.close())


def raw_bytes(root: Path) -> bytes:
    out = b""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            out += Path(dirpath, name).read_bytes()
    return out


_HISTORIES: dict[str, list[Message]] = {}


def snapshot(n: int, text: str) -> Snapshot:
    """The first ``n`` messages of one history per ``text`` (so later saves append)."""
    history = _HISTORIES.setdefault(
        text, [Message(role="user", content=f"{text} {i}") for i in range(10)]
    )
    return Snapshot(SnapshotData(messages=history[:n], state={"secret": f"{CANARY}-state"}))


@sync
async def test_sessions_round_trip_and_no_plaintext_on_disk(
    inner: LoggedStorage, tmp_path: Path
) -> None:
    sealed = SealedStorage(inner, cipher())
    manager = SessionManager("s1", sealed)
    for n in range(1, 6):  # later saves append log records
        await manager.save_latest(snapshot(n, CANARY))
    await manager.save_snapshot(snapshot(2, CANARY).data)
    again = await SessionManager("s1", SealedStorage(inner, cipher())).load_latest()
    assert again is not None and again.data.messages is not None
    assert [m.text for m in again.data.messages] == [f"{CANARY} {i}" for i in range(5)]
    _value, records, _tag = await inner.read_logged(manager.latest_key)
    assert records, "the test meant to cover log records"
    close = getattr(inner, "close", None)
    if close is not None:
        await close()
    assert CANARY.encode() not in raw_bytes(tmp_path / "store")


@sync
async def test_planted_plain_value_refused(inner: LoggedStorage) -> None:
    sealed = SealedStorage(inner, cipher())
    await sealed.put("session/s1/x", b"sealed one")
    await inner.put("session/s1/y", b'{"planted": true}')
    with pytest.raises(StoreIntegrityError, match="plain"):
        await sealed.get("session/s1/y")
    assert await inner.get("session/s1/y") == b'{"planted": true}'  # left as it is


@sync
async def test_value_copied_to_another_session_or_key_refused(inner: LoggedStorage) -> None:
    sealed = SealedStorage(inner, cipher())
    await sealed.put("session/a/v", b"a's value")
    await sealed.put("session/b/v", b"b's value")
    await sealed.put("session/a/w", b"a's other")
    stolen = await inner.get("session/a/v")
    assert stolen is not None
    await inner.put("session/b/v", stolen)  # into another session (another data key)
    await inner.put("session/a/w", stolen)  # into another key of the same session
    for key in ("session/b/v", "session/a/w"):
        with pytest.raises(StoreIntegrityError):
            await SealedStorage(inner, cipher()).get(key)


@sync
async def test_record_replayed_from_an_older_value_refused(inner: LoggedStorage) -> None:
    sealed = SealedStorage(inner, cipher())
    await sealed.put("session/a/v", b"base 1")
    _v, _r, tag = await sealed.read_logged("session/a/v")
    assert tag is not None
    await sealed.append_logged("session/a/v", b"record of base 1", tag)
    _old_value, old_records, _ = await inner.read_logged("session/a/v")
    await sealed.put("session/a/v", b"base 2")
    _v, _r, inner_tag = await inner.read_logged("session/a/v")
    assert inner_tag is not None
    await inner.append_logged("session/a/v", old_records[0], inner_tag)
    with pytest.raises(StoreIntegrityError):
        await SealedStorage(inner, cipher()).read_logged("session/a/v")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
@sync
async def test_damaged_value_refused(inner: LoggedStorage, damage: str) -> None:
    sealed = SealedStorage(inner, cipher())
    await sealed.put("session/a/v", b"some value")
    raw = bytearray(await inner.get("session/a/v") or b"")
    if damage == "flip":
        raw[len(raw) // 2] ^= 0x10
    else:
        del raw[-5:]
    await inner.put("session/a/v", bytes(raw))
    with pytest.raises(StoreIntegrityError):
        await SealedStorage(inner, cipher()).get("session/a/v")


@sync
async def test_another_store_key_refused(inner: LoggedStorage) -> None:
    await SealedStorage(inner, cipher()).put("session/a/v", b"value")
    impostor = Cipher(keys={"k1": K2}, current="k1")
    with pytest.raises(StoreIntegrityError):
        await SealedStorage(inner, impostor).get("session/a/v")
    unknown = Cipher(keys={"k9": K1}, current="k9")
    with pytest.raises(StoreIntegrityError, match="does not hold"):
        await SealedStorage(inner, unknown).get("session/a/v")


@sync
async def test_compare_and_swap_speaks_plain_tags(inner: LoggedStorage) -> None:
    sealed = SealedStorage(inner, cipher())
    await sealed.compare_and_put("k/v", b"one", expected=None)
    await SealedStorage(inner, cipher()).compare_and_put("k/v", b"two", expected=b"one")
    with pytest.raises(CheckpointConflictError):
        await sealed.compare_and_put("k/v", b"three", expected=b"one")
    assert await sealed.get("k/v") == b"two"
    assert await sealed.list() == ["k/v"]  # the data keys stay hidden


@sync
async def test_forget_destroys_the_session_key(inner: LoggedStorage) -> None:
    sealed = SealedStorage(inner, cipher())
    manager = SessionManager("gone", sealed)
    for n in range(1, 4):
        await manager.save_latest(snapshot(n, CANARY))
    keep = SessionManager("kept", sealed)
    await keep.save_latest(snapshot(1, "kept"))
    backup = await inner.read_logged(manager.latest_key)
    await manager.forget()
    assert await sealed.list("session/gone/") == []
    # a backup of the value and its log, put back: unreadable without the destroyed key
    value, records, _ = backup
    assert value is not None
    await inner.put(manager.latest_key, value)
    with pytest.raises(StoreIntegrityError, match="no longer exists"):
        await SessionManager("gone", SealedStorage(inner, cipher())).load_latest()
    assert await SessionManager("kept", SealedStorage(inner, cipher())).load_latest()
    assert records


@sync
async def test_rotate_rewraps_keys_and_migrates_plain(tmp_path: Path) -> None:
    plain = open_store(tmp_path / "s")
    await SessionManager("s1", plain.storage).save_latest(snapshot(3, CANARY))
    await plain.close()
    inner = LocalFileStorage(tmp_path / "s" / "storage")
    with pytest.raises(StoreIntegrityError, match=r"rotate\(\)"):
        await SessionManager("s1", SealedStorage(inner, cipher())).load_latest()
    first = SealedStorage(inner, cipher("k1"))
    assert await first.rotate() == 1  # the plain snapshot, sealed in place
    assert CANARY.encode() not in raw_bytes(tmp_path / "s")
    loaded = await SessionManager("s1", first).load_latest()
    assert loaded is not None and loaded.data.state == {"secret": f"{CANARY}-state"}
    second = SealedStorage(inner, cipher("k2"))
    assert await second.rotate() == 1  # the one data key, re-wrapped under k2
    assert await second.rotate() == 0
    only_k2 = SealedStorage(inner, Cipher(keys={"k2": K2}, current="k2"))
    assert await SessionManager("s1", only_k2).load_latest() is not None
    # a marked store never migrates a plain value planted later: it stays refused
    await inner.put("session/s1/planted", b"{}")
    await only_k2.rotate()
    assert await inner.get("session/s1/planted") == b"{}"
    with pytest.raises(StoreIntegrityError):
        await only_k2.get("session/s1/planted")


@sync
async def test_forget_on_a_plain_storage_deletes_the_session(inner: LoggedStorage) -> None:
    gone, kept = SessionManager("gone", inner), SessionManager("kept", inner)
    other_agent = SessionManager("gone", inner, agent_id="other")
    for manager in (gone, kept, other_agent):
        await manager.save_latest(snapshot(2, "plain"))
    await gone.save_snapshot(snapshot(1, "plain").data)
    await gone.forget()
    assert await inner.list("session/gone/") == []
    assert await gone.load_latest() is None
    assert await kept.load_latest() is not None
