"""Checkpoints and memories sealed in SQLite: the LangGraph attacks, damage, a canary scan."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import Cipher, Message, ThreadCheckpoint, ToolCall
from framework_agents.errors import StoreIntegrityError
from framework_agents.stores import SqliteCheckpointer, SqliteMemory

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
CANARY = "canary-51c0"


def cipher(current: str = "k1") -> Cipher:
    return Cipher(keys={"k1": K1, "k2": K2}, current=current)


def history(n: int, tag: str = "") -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(Message(role="user", content=f"{CANARY}{tag} user {i}", id=f"u{tag}{i}"))
        call = ToolCall(id=f"c{tag}{i}", name="lookup", args={"q": f"{CANARY}-arg {i}"})
        out.append(Message(role="assistant", tool_calls=[call], id=f"a{tag}{i}"))
        out.append(
            Message(
                role="tool",
                content=f"{CANARY}-result",
                tool_call_id=call.id,
                name="lookup",
                id=f"t{tag}{i}",
            )
        )
    return out


def checkpoint(thread_id: str, n: int) -> ThreadCheckpoint:
    return ThreadCheckpoint(
        thread_id=thread_id, messages=history(n, thread_id), state={"secret": f"{CANARY}-state"}
    )


def sql(path: Path, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(statement, params).fetchall()


async def _save_threads(path: Path) -> None:
    store = SqliteCheckpointer(path, cipher=cipher())
    await store.save(checkpoint("a", 2))
    await store.save(checkpoint("b", 2))
    await store.close()


async def _load(path: Path, thread_id: str, c: Cipher | None = None) -> ThreadCheckpoint | None:
    store = SqliteCheckpointer(path, cipher=c or cipher())
    try:
        return await store.load(thread_id)
    finally:
        await store.close()


def test_round_trip_and_canary_scan(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"

    async def body() -> None:
        threads = SqliteCheckpointer(path, cipher=cipher())
        await threads.save(checkpoint("a", 1))
        await threads.save(checkpoint("a", 3))  # appends past the stored prefix
        memory = SqliteMemory(path, "user/1", 100, cipher=cipher())
        await memory.save(history(2, "m"))
        await memory.save(history(3, "m")[6:])
        await memory.replace(history(3, "m"))  # a merge that reads the stored ids
        loaded = await threads.load("a")
        assert loaded is not None and loaded.messages == checkpoint("a", 3).messages
        assert loaded.state == {"secret": f"{CANARY}-state"}
        again = SqliteMemory(path, "user/1", 100, cipher=cipher())
        assert await again.load() == history(3, "m")
        for store in (threads, memory, again):
            await store.close()

    arun(body())
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert CANARY.encode() not in raw
    assert b"lookup" not in raw  # tool names too


def test_planted_plaintext_refused_and_left(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    arun(_save_threads(path))
    plain = Message(role="user", content="planted").model_dump_json().encode()
    sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id = 'a' AND seq = 0", plain)
    with pytest.raises(StoreIntegrityError, match=r"plain.*rotate\(\)"):
        arun(_load(path, "a"))
    assert sql(path, "SELECT body FROM fa_thread_messages WHERE thread_id='a' AND seq=0") == [
        (plain,)
    ]
    sql(path, "UPDATE fa_threads SET head = ? WHERE thread_id = 'b'", b'{"version":1}')
    with pytest.raises(StoreIntegrityError, match="plain"):
        arun(_load(path, "b"))


@pytest.mark.parametrize("column", ["head", "body"])
def test_ciphertext_copied_from_another_thread_refused(tmp_path: Path, column: str) -> None:
    path = tmp_path / "db.sqlite"
    arun(_save_threads(path))
    if column == "head":
        sql(
            path,
            "UPDATE fa_threads SET head = (SELECT head FROM fa_threads WHERE "
            "thread_id = 'a') WHERE thread_id = 'b'",
        )
    else:
        sql(
            path,
            "UPDATE fa_thread_messages SET body = (SELECT body FROM fa_thread_messages "
            "WHERE thread_id = 'a' AND seq = 1) WHERE thread_id = 'b' AND seq = 1",
        )
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(_load(path, "b"))
    assert arun(_load(path, "a")) is not None


def test_ciphertext_replayed_from_an_older_version_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"

    async def grow() -> None:
        store = SqliteCheckpointer(path, cipher=cipher())
        await store.save(checkpoint("a", 1))
        old = sql(path, "SELECT head FROM fa_threads WHERE thread_id = 'a'")[0][0]
        await store.save(checkpoint("a", 2))
        await store.close()
        sql(path, "UPDATE fa_threads SET head = ? WHERE thread_id = 'a'", old)

    arun(grow())
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(_load(path, "a"))


def test_body_moved_to_another_position_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    arun(_save_threads(path))
    rows = sql(path, "SELECT seq, body FROM fa_thread_messages WHERE thread_id='a' ORDER BY seq")
    sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='a' AND seq = 0", rows[1][1])
    sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='a' AND seq = 1", rows[0][1])
    with pytest.raises(StoreIntegrityError):
        arun(_load(path, "a"))


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_body_refused(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "db.sqlite"
    arun(_save_threads(path))
    body = bytearray(sql(path, "SELECT body FROM fa_thread_messages WHERE thread_id='a'")[0][0])
    if damage == "flip":
        body[-10] ^= 0x01  # inside the base64 text: another byte of the envelope
    else:
        body = body[:-30] + b'"}'
    sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='a' AND seq=0", bytes(body))
    with pytest.raises(StoreIntegrityError):
        arun(_load(path, "a"))


def test_another_store_key_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    arun(_save_threads(path))
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(_load(path, "a", Cipher(keys={"k1": K2}, current="k1")))
    with pytest.raises(StoreIntegrityError, match="does not hold"):
        arun(_load(path, "a", Cipher(keys={"k9": K1}, current="k9")))


def test_memory_message_moved_to_another_key_refused(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"

    async def body() -> None:
        for key in ("user/a", "user/b"):
            memory = SqliteMemory(path, key, cipher=cipher())
            await memory.save(history(1, key[-1]))
            await memory.close()
        sql(
            path,
            "UPDATE fa_memory_messages SET body = (SELECT body FROM fa_memory_messages "
            "WHERE key = 'user/a' ORDER BY seq LIMIT 1) WHERE key = 'user/b'",
        )
        memory = SqliteMemory(path, "user/b", cipher=cipher())
        with pytest.raises(StoreIntegrityError):
            await memory.load()
        await memory.close()

    arun(body())


def test_plain_store_read_with_cipher_points_at_rotate(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"

    async def body() -> None:
        plain = SqliteMemory(path, "user/a")
        await plain.save(history(1))
        await plain.close()
        sealed = SqliteMemory(path, "user/a", cipher=cipher())
        with pytest.raises(StoreIntegrityError, match=r"rotate\(\)"):
            await sealed.load()
        await sealed.close()

    arun(body())


def test_rotate_reseals_under_current_and_migrates_plain(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"

    async def body() -> None:
        plain_threads = SqliteCheckpointer(path)
        await plain_threads.save(checkpoint("p", 2))
        await plain_threads.close()
        plain_memory = SqliteMemory(path, "user/p", 100)
        await plain_memory.save(history(2, "p"))
        await plain_memory.close()
        old = SqliteCheckpointer(path, cipher=cipher("k1"))
        with pytest.raises(StoreIntegrityError, match="plain"):
            await old.load("p")
        # migrate: plain -> k1
        assert await old.rotate(migrate=True) == 1 + 6
        assert await SqliteMemory.rotate_all(old._db, cipher("k1"), migrate=True) == 6
        await old.save(checkpoint("q", 1))
        await old.close()
        assert CANARY.encode() not in path.read_bytes()
        # rotate: k1 -> k2, then only k2 is needed
        new = SqliteCheckpointer(path, cipher=cipher("k2"))
        assert await new.rotate() == (1 + 6) + (1 + 3)
        assert await new.rotate() == 0  # resumable: what is current is skipped
        assert await SqliteMemory.rotate_all(new._db, cipher("k2")) == 6
        await new.close()
        only = Cipher(keys={"k2": K2}, current="k2")
        assert await _load(path, "p", only) == checkpoint("p", 2).model_copy(
            update={"saved_at": (await _load(path, "p", only) or checkpoint("p", 0)).saved_at}
        )
        memory = SqliteMemory(path, "user/p", 100, cipher=only)
        assert await memory.load() == history(2, "p")
        await memory.close()
        # once sealed, a plain row planted later is refused, never migrated
        sql(
            path,
            "UPDATE fa_memory_messages SET body = ? WHERE key = 'user/p' AND seq = 0",
            Message(role="user", content="planted", id="up0").model_dump_json().encode(),
        )
        again = SqliteCheckpointer(path, cipher=only)
        with pytest.raises(StoreIntegrityError):
            await SqliteMemory.rotate_all(again._db, only)
        await again.close()

    arun(body())
