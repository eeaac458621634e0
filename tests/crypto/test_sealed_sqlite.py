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
        # p: its head and 6 rows migrated one by one; q: its head and one group (3 messages
        # saved together are one envelope)
        assert await new.rotate() == (1 + 6) + (1 + 1)
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


# -- message groups: the messages one save appends are one envelope ------------------------


def rows_of(path: Path, thread_id: str) -> list[tuple[int, bytes]]:
    return sql(
        path, "SELECT seq, body FROM fa_thread_messages WHERE thread_id = ? ORDER BY seq", thread_id
    )


def same_history(thread_id: str, turns: int) -> ThreadCheckpoint:
    """A checkpoint whose messages (ids too) are the same whatever ``thread_id`` is."""
    return ThreadCheckpoint(thread_id=thread_id, messages=history(turns, "same"))


async def _two_groups(path: Path) -> None:
    """Threads "a" and "b" with the same 9 messages: a group of 6 at 0, one of 3 at 6."""
    store = SqliteCheckpointer(path, cipher=cipher())
    for thread_id in ("a", "b"):
        await store.save(same_history(thread_id, 2))
        await store.save(same_history(thread_id, 3))  # 3 new: too few to take the 6 in
    await store.close()


def _replace_rows(path: Path, thread_id: str, rows: list[tuple[int, bytes]]) -> None:
    sql(path, "DELETE FROM fa_thread_messages WHERE thread_id = ?", thread_id)
    for seq, body in rows:
        sql(
            path,
            "INSERT INTO fa_thread_messages (thread_id, seq, body) VALUES (?, ?, ?)",
            thread_id,
            seq,
            body,
        )


def test_a_save_seals_its_messages_as_one_group(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    arun(_two_groups(path))
    rows = [body for _seq, body in rows_of(path, "a")]
    assert len(rows) == 9  # one row per message, each naming its id in the clear
    assert rows[0].startswith(b'{"id":"usame0","count":6,"sealed":"fae1.')
    assert rows[1:6] == [b'{"id":"%s","group":0}' % i.encode() for i in ("asame0", "tsame0")] + [
        b'{"id":"%s","group":0}' % i.encode() for i in ("usame1", "asame1", "tsame1")
    ]
    assert rows[6].startswith(b'{"id":"usame2","count":3,"sealed":"fae1.')
    assert rows[7:] == [b'{"id":"asame2","group":6}', b'{"id":"tsame2","group":6}']
    loaded = arun(_load(path, "a"))
    assert loaded is not None and loaded.messages == same_history("a", 3).messages


def _attack(path: Path, attack: str) -> None:
    a, b = rows_of(path, "a"), rows_of(path, "b")
    if attack == "row dropped from a group":
        # the count stays right: the last row of another group fills the gap
        _replace_rows(path, "b", [*b[:2], *b[3:], (99, b[1][1])])
    elif attack == "row dropped and the head's length lowered":
        sql(path, "DELETE FROM fa_thread_messages WHERE thread_id = 'b' AND seq = ?", b[2][0])
        sql(path, "UPDATE fa_threads SET length = 8 WHERE thread_id = 'b'")
    elif attack == "row added to a group":
        _replace_rows(path, "b", [*b[:6], (98, b[5][1]), *b[6:8]])
    elif attack == "group moved to another thread":
        _replace_rows(path, "b", a)  # the same ids and bodies, another thread
    elif attack == "group moved to another position":
        # the second group's rows at 0, its members renamed to match
        moved = [b[6][1], *(r[1].replace(b'"group":6', b'"group":0') for r in b[7:])]
        rest = [r[1] for r in (*b[3:6], b[0], *b[1:3])]
        _replace_rows(path, "b", list(enumerate([*moved, *rest])))
    elif attack == "member id changed":
        changed = b[3][1].replace(b"usame1", b"usame9")
        sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='b' AND seq=3", changed)
    elif attack == "member made plain":
        plain = Message(role="user", content="planted", id="usame1").model_dump_json().encode()
        sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='b' AND seq=3", plain)
    elif attack == "count changed":
        lead = b[0][1].replace(b'"count":6', b'"count":5')
        sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='b' AND seq=0", lead)
    elif attack == "group replaced by its per-message form":
        # today's form of row 0 at its place, sealed right, in a group's place
        from framework_agents.stores._sealed import CHECKPOINT_MESSAGE, seal_body

        body = same_history("b", 1).messages[0].model_dump_json().encode()
        single = seal_body(cipher(), CHECKPOINT_MESSAGE, "b", "usame0", body, 0)
        sql(path, "UPDATE fa_thread_messages SET body = ? WHERE thread_id='b' AND seq=0", single)
    else:  # pragma: no cover
        raise AssertionError(attack)


GROUP_ATTACKS = [
    "row dropped from a group",
    "row dropped and the head's length lowered",
    "row added to a group",
    "group moved to another thread",
    "group moved to another position",
    "member id changed",
    "member made plain",
    "count changed",
    "group replaced by its per-message form",
]


@pytest.mark.parametrize("attack", GROUP_ATTACKS)
def test_group_attacks_refused_and_left(tmp_path: Path, attack: str) -> None:
    path = tmp_path / "db.sqlite"
    arun(_two_groups(path))
    _attack(path, attack)
    head_of_b = "SELECT * FROM fa_threads WHERE thread_id = 'b'"
    stored = rows_of(path, "b"), sql(path, head_of_b)
    with pytest.raises(StoreIntegrityError):
        arun(_load(path, "b"))

    async def rotate() -> None:
        store = SqliteCheckpointer(path, cipher=cipher("k2"))
        try:
            await store.rotate()
        finally:
            await store.close()

    with pytest.raises(StoreIntegrityError):
        arun(rotate())  # rotation authenticates too, and writes nothing of "b"
    assert (rows_of(path, "b"), sql(path, head_of_b)) == stored
    assert arun(_load(path, "a")) is not None


def test_rows_in_the_per_message_form_are_still_read(tmp_path: Path) -> None:
    """A thread a previous release wrote (a sealed row per message) loads, grows, rotates."""
    from framework_agents.stores._sealed import CHECKPOINT_MESSAGE, seal_body

    path = tmp_path / "db.sqlite"
    arun(_two_groups(path))
    messages = same_history("a", 3).messages
    old = [
        seal_body(cipher(), CHECKPOINT_MESSAGE, "a", m.id, m.model_dump_json().encode(), i)
        for i, m in enumerate(messages)
    ]
    _replace_rows(path, "a", list(enumerate(old)))

    async def body() -> None:
        store = SqliteCheckpointer(path, cipher=cipher())
        loaded = await store.load("a")
        assert loaded is not None and loaded.messages == messages
        grown = same_history("a", 4)
        await store.save(grown)  # appends a group after the per-message rows
        assert await store.rotate() == 0
        await store.close()
        rotating = SqliteCheckpointer(path, cipher=cipher("k2"))
        assert await rotating.rotate() > 0
        await rotating.close()
        only = Cipher(keys={"k2": K2}, current="k2")
        again = await _load(path, "a", only)
        assert again is not None and again.messages == grown.messages

    arun(body())
    bodies = [b for _s, b in rows_of(path, "a")]
    assert b'"group"' in b"".join(bodies) and bodies[0] != old[0]


def test_group_changes_keep_every_history(tmp_path: Path, monkeypatch: Any) -> None:
    """Appends, edits inside a group, cuts and saves by fresh instances, small groups."""
    import random

    from framework_agents.stores import _checkpointer

    monkeypatch.setattr(_checkpointer, "GROUP_MAX", 7)
    path = tmp_path / "db.sqlite"
    rng = random.Random(36)

    async def body() -> None:
        store = SqliteCheckpointer(path, cipher=cipher())
        messages: list[Message] = []
        serial = 0
        for step in range(80):
            choice = rng.random()
            if choice < 0.55 or not messages:
                for _ in range(rng.randint(1, 9)):
                    serial += 1
                    text, name = f"m{serial}", f"m{serial}"
                    messages.append(
                        Message(role="user", content=text, id=name)
                        if serial % 2
                        else Message(role="assistant", content=text, id=name)
                    )
            elif choice < 0.8:
                at = rng.randrange(len(messages))
                old = messages[at]
                messages[at] = old.model_copy(update={"content": f"{old.content} edited {step}"})
            else:
                del messages[rng.randint(0, len(messages) - 1) :]
            if rng.random() < 0.2:
                await store.close()
                store = SqliteCheckpointer(path, cipher=cipher())
                await store.load("t")  # a fresh instance learns the groups from the rows
            await store.save(ThreadCheckpoint(thread_id="t", messages=list(messages)))
            loaded = await _load(path, "t")
            assert loaded is not None and loaded.messages == messages, step
        await store.close()

    arun(body())
    bodies = [b for _s, b in rows_of(path, "t")]
    assert any(b'"count":' in b for b in bodies)
    assert all(b.count(b'"count":') <= 1 for b in bodies)
