"""open_store(url, cipher=): every part of a SQLite store sealed; the bank's namespace keys."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Cipher,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
    ThreadCheckpoint,
    ToolCall,
    open_store,
)
from framework_agents.errors import InvalidArgumentError, StoreIntegrityError

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
CANARY = "canary-93be"


def cipher(current: str = "k1") -> Cipher:
    return Cipher(keys={"k1": K1, "k2": K2}, current=current)


@pytest.fixture(params=["directory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "directory":
        return str(tmp_path / "store")
    return f"sqlite:///{tmp_path / 'db.sqlite'}"


def raw_files(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def sql(path: Path, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(statement, params).fetchall()


def turn(i: int) -> list[Message]:
    call = ToolCall(id=f"c{i}", name="search_notes", args={"query": f"{CANARY}-arg-{i}"})
    return [
        Message(role="user", content=f"{CANARY}-user-{i}", id=f"u{i}"),
        Message(role="assistant", tool_calls=[call], id=f"a{i}"),
        Message(role="tool", content=f"{CANARY}-result-{i}", tool_call_id=call.id, id=f"t{i}"),
    ]


async def fill(url: str, c: Cipher | None) -> None:
    store = open_store(url, cipher=c)
    try:
        messages = turn(0) + turn(1)
        state = {"note": f"{CANARY}-state"}
        await store.checkpointer.save(
            ThreadCheckpoint(thread_id="t1", messages=messages, state=state)
        )
        await store.memory("user/1").save(messages)
        manager = SessionManager("s1", store.storage)
        await manager.save_latest(Snapshot(SnapshotData(messages=messages[:3], state=state)))
        await manager.save_latest(Snapshot(SnapshotData(messages=messages, state=state)))
        bank = store.bank()
        await bank.remember(f"{CANARY}-memory likes tea", namespace=("u1",), key="drink")
        await bank.remember(f"{CANARY}-memory of u2", namespace=("u2",))
    finally:
        await store.close()


async def read_back(url: str, c: Cipher) -> None:
    store = open_store(url, cipher=c)
    try:
        loaded = await store.checkpointer.load("t1")
        assert loaded is not None and loaded.messages == turn(0) + turn(1)
        assert await store.memory("user/1").load() == turn(0) + turn(1)
        snapshot = await SessionManager("s1", store.storage).load_latest()
        assert snapshot is not None and snapshot.data.state == {"note": f"{CANARY}-state"}
        hits = await store.bank().search("tea", namespace=("u1",))
        assert [h.record.text for h in hits] == [f"{CANARY}-memory likes tea"]
    finally:
        await store.close()


def test_every_part_sealed_canary_scan(tmp_path: Path, url: str) -> None:
    arun(fill(url, cipher()))
    arun(read_back(url, cipher()))
    raw = raw_files(tmp_path)
    assert len(raw) > 1000
    assert CANARY.encode() not in raw
    assert b"search_notes" not in raw  # tool names
    assert b"tea" not in raw


def test_rotate_then_drop_the_old_key(url: str) -> None:
    arun(fill(url, cipher("k1")))

    async def rotate() -> int:
        async with open_store(url, cipher=cipher("k2")) as store:
            return await store.rotate()

    assert arun(rotate()) > 0
    assert arun(rotate()) == 0  # nothing left under k1
    arun(read_back(url, Cipher(keys={"k2": K2}, current="k2")))


def test_rotate_migrates_a_plain_store(tmp_path: Path, url: str) -> None:
    arun(fill(url, None))
    with pytest.raises(StoreIntegrityError, match=r"rotate\(\)"):
        arun(read_back(url, cipher()))

    async def migrate() -> int:
        async with open_store(url, cipher=cipher()) as store:
            return await store.rotate()

    assert arun(migrate()) > 0
    arun(read_back(url, cipher()))
    if url.startswith("sqlite:"):
        sql(tmp_path / "db.sqlite", "VACUUM")
    assert CANARY.encode() not in raw_files(tmp_path)


def test_forget_namespace_destroys_its_key(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    url = f"sqlite:///{path}"
    arun(fill(url, cipher()))
    before = sql(
        path,
        "SELECT r.id, r.namespace, r.revision, v.body FROM fa_bank_records r "
        "JOIN fa_bank_revisions v ON v.id = r.id",
    )
    u1 = [row for row in before if row[1] == '["u1"]']
    assert len(sql(path, "SELECT * FROM fa_bank_keys")) == 2

    async def forget() -> None:
        async with open_store(url, cipher=cipher()) as store:
            assert await store.bank().forget_namespace(("u1",)) == 1

    arun(forget())
    assert [r[0] for r in sql(path, "SELECT namespace FROM fa_bank_keys")] == ['["u2"]']

    async def other_namespace() -> None:
        async with open_store(url, cipher=cipher()) as store:
            hits = await store.bank().search("u2", namespace=("u2",))
            assert len(hits) == 1

    arun(other_namespace())
    # the rows as an unvacuumed page or a restored dump holds them: unreadable now
    for record_id, namespace, revision, body in u1:
        sql(
            path,
            "INSERT INTO fa_bank_records (id, namespace, key, revision, valid_from) "
            "VALUES (?, ?, NULL, ?, 0)",
            record_id,
            namespace,
            revision,
        )
        sql(
            path,
            "INSERT INTO fa_bank_revisions (id, revision, body) VALUES (?, ?, ?)",
            record_id,
            revision,
            body,
        )

    async def read_forgotten() -> None:
        async with open_store(url, cipher=cipher()) as store:
            backend = store.bank_backend()
            with pytest.raises(StoreIntegrityError, match="no longer exists"):
                await backend.latest([u1[0][0]])

    arun(read_forgotten())


def test_session_forget_destroys_its_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    arun(fill(url, cipher()))
    path = tmp_path / "db.sqlite"
    key = "session/s1/scopes/agent/default/snapshots/snapshot_latest.json"
    value = sql(path, "SELECT data FROM fa_kv WHERE key = ?", key)[0][0]

    async def forget() -> None:
        async with open_store(url, cipher=cipher()) as store:
            await SessionManager("s1", store.storage).forget()
            assert await store.storage.list("session/") == []

    arun(forget())
    sql(path, "INSERT INTO fa_kv (key, data, updated_at) VALUES (?, ?, 0)", key, value)

    async def read_forgotten() -> None:
        async with open_store(url, cipher=cipher()) as store:
            with pytest.raises(StoreIntegrityError, match="no longer exists"):
                await SessionManager("s1", store.storage).load_latest()

    arun(read_forgotten())


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="Cipher"):
        open_store(f"sqlite:///{tmp_path / 'db.sqlite'}", cipher=b"k" * 32)  # type: ignore[arg-type]

    async def plain_rotate() -> None:
        async with open_store(f"sqlite:///{tmp_path / 'db.sqlite'}") as store:
            await store.rotate()

    with pytest.raises(InvalidArgumentError, match="cipher="):
        arun(plain_rotate())


def test_directory_forget_namespace_and_session(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    arun(fill(url, cipher()))
    bank = tmp_path / "store" / "bank"
    before = {p.name: p.read_bytes() for p in (bank / "records").iterdir()}
    session = tmp_path / "store" / "storage" / "session" / "s1"
    values = {p: p.read_bytes() for p in session.rglob("*") if p.is_file()}
    assert len(list((bank / "datakeys").iterdir())) == 2

    async def forget() -> None:
        async with open_store(url, cipher=cipher()) as store:
            assert await store.bank().forget_namespace(("u1",)) == 1
            await SessionManager("s1", store.storage).forget()

    arun(forget())
    assert len(list((bank / "datakeys").iterdir())) == 1
    gone = sorted(set(before) - {p.name for p in (bank / "records").iterdir()})
    assert len(gone) == 1
    # a copy of the record file and of the session's files, put back: unreadable now
    (bank / "records" / gone[0]).write_bytes(before[gone[0]])
    for path, data in values.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    async def read_forgotten() -> None:
        async with open_store(url, cipher=cipher()) as store:
            with pytest.raises(StoreIntegrityError, match="no longer exists"):
                await store.bank_backend().latest([gone[0].removesuffix(".json")])
            with pytest.raises(StoreIntegrityError, match="no longer exists"):
                await SessionManager("s1", store.storage).load_latest()

    arun(read_forgotten())


def test_a_store_part_that_cannot_encrypt_is_refused_not_left_plain() -> None:
    with pytest.raises(InvalidArgumentError, match="cannot encrypt at rest"):
        open_store("memory:", cipher=cipher())


def test_bank_record_copied_from_another_or_planted_plain_refused(tmp_path: Path, url: str) -> None:
    async def two() -> list[str]:
        async with open_store(url, cipher=cipher()) as store:
            bank = store.bank()
            one = await bank.remember(f"{CANARY} one", namespace=("u1",))
            two = await bank.remember(f"{CANARY} two", namespace=("u1",))
            return [one.id, two.id]

    first, second = arun(two())
    if url.startswith("sqlite:"):
        path = tmp_path / "db.sqlite"
        sql(
            path,
            "UPDATE fa_bank_revisions SET body = (SELECT body FROM fa_bank_revisions "
            "WHERE id = ?) WHERE id = ?",
            first,
            second,
        )
    else:
        records = tmp_path / "store" / "bank" / "records"
        (records / f"{second}.json").write_bytes((records / f"{first}.json").read_bytes())

    async def read(ids: list[str]) -> None:
        async with open_store(url, cipher=cipher()) as store:
            await store.bank_backend().latest(ids)

    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(read([second]))
    arun(read([first]))
    if url.startswith("sqlite:"):
        sql(
            tmp_path / "db.sqlite",
            "UPDATE fa_bank_revisions SET body = ? WHERE id = ?",
            b'{"id":"planted"}',
            first,
        )
    else:
        (tmp_path / "store" / "bank" / "records" / f"{first}.json").write_bytes(b'{"revisions":[]}')
    with pytest.raises(StoreIntegrityError, match="plain"):
        arun(read([first]))
