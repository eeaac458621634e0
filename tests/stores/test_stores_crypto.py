"""Encryption at rest on PostgreSQL and Redis: the LangGraph attacks and a canary scan.

The same threads and memories as ``tests/crypto`` (directory and SQLite), written with
``cipher=`` into a fresh schema or key prefix, then attacked in the database itself: a
planted plain row, a body or head copied from another thread, a head replayed from an
older version, a memory message copied from another key, a flipped bit, another store
key, and the attacks on a thread's message group (a row dropped or added, a member's id
changed, the group moved to another thread). Every row (PostgreSQL) and every key
(Redis) is scanned for the canary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from stores_backends import PG_URL, REDIS_URL

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
from framework_agents.errors import StoreIntegrityError
from framework_agents.sessions.sealed import SealedStorage
from framework_agents.stores import (
    PostgresCheckpointer,
    PostgresMemory,
    RedisCheckpointer,
    RedisMemory,
    RedisStorage,
)

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
CANARY = "canary-pgr"


def cipher(current: str = "k1") -> Cipher:
    return Cipher(keys={"k1": K1, "k2": K2}, current=current)


def history(n: int, tag: str) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        call = ToolCall(id=f"c{tag}{i}", name="lookup_notes", args={"q": f"{CANARY}-arg"})
        out += [
            Message(role="user", content=f"{CANARY}-user {i}", id=f"u{tag}{i}"),
            Message(role="assistant", tool_calls=[call], id=f"a{tag}{i}"),
            Message(role="tool", content=f"{CANARY}-out", tool_call_id=call.id, id=f"t{tag}{i}"),
        ]
    return out


def checkpoint(thread_id: str, n: int) -> ThreadCheckpoint:
    return ThreadCheckpoint(
        thread_id=thread_id, messages=history(n, thread_id), state={"s": f"{CANARY}-state"}
    )


# -- PostgreSQL ---------------------------------------------------------------------------


def pg(schema: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        cur = conn.execute(statement.replace("{s}", f'"{schema}"'), params)
        return cur.fetchall() if cur.description else []


def pg_scan(schema: str) -> bytes:
    """Every value of every row of every table of ``schema``, as bytes."""
    out = []
    tables = pg(
        schema, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", schema
    )
    for (table,) in tables:
        for row in pg(schema, f'SELECT * FROM {{s}}."{table}"'):
            for value in row:
                out.append(
                    bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
                )
    return b"\n".join(out)


async def pg_fill(schema: str, c: Cipher | None = None) -> None:
    url = f"{PG_URL}?schema={schema}"
    async with open_store(url, cipher=c or cipher()) as store:
        await store.checkpointer.save(checkpoint("a", 1))
        await store.checkpointer.save(checkpoint("a", 2))
        await store.checkpointer.save(checkpoint("b", 2))
        await store.memory("user/a").save(history(2, "ma"))
        await store.memory("user/b").save(history(1, "mb"))
        manager = SessionManager("s1", store.storage)
        await manager.save_latest(Snapshot(SnapshotData(messages=history(1, "s"))))
        await manager.save_latest(Snapshot(SnapshotData(messages=history(2, "s"))))
        await store.bank().remember(f"{CANARY}-memory", namespace=("u1",))


async def pg_load(schema: str, thread_id: str, c: Cipher | None = None) -> Any:
    store = PostgresCheckpointer(PG_URL, schema=schema, cipher=c or cipher())
    try:
        return await store.load(thread_id)
    finally:
        await store.close()


def test_postgres_round_trip_and_canary_scan(pg_schema: str) -> None:
    arun(pg_fill(pg_schema))

    async def read() -> None:
        async with open_store(f"{PG_URL}?schema={pg_schema}", cipher=cipher()) as store:
            loaded = await store.checkpointer.load("a")
            assert loaded is not None and loaded.messages == history(2, "a")
            assert await store.memory("user/a").load() == history(2, "ma")
            snapshot = await SessionManager("s1", store.storage).load_latest()
            assert snapshot is not None and snapshot.data.messages == history(2, "s")
            hits = await store.bank().search("memory", namespace=("u1",))
            assert [h.record.text for h in hits] == [f"{CANARY}-memory"]

    arun(read())
    raw = pg_scan(pg_schema)
    assert b"fae1." in raw and CANARY.encode() not in raw and b"lookup_notes" not in raw


ATTACKS: dict[str, str] = {
    "planted plain body": "UPDATE {s}.fa_thread_messages SET body = "
    'convert_to(\'{"role":"user","content":"planted","id":"x"}\', \'UTF8\') '
    "WHERE thread_id = 'b' AND seq = 0",
    "planted plain head": "UPDATE {s}.fa_threads SET head = convert_to('{\"version\":1}', "
    "'UTF8') WHERE thread_id = 'b'",
    "body copied from another thread": "UPDATE {s}.fa_thread_messages SET body = (SELECT body "
    "FROM {s}.fa_thread_messages WHERE thread_id = 'a' AND seq = 1) "
    "WHERE thread_id = 'b' AND seq = 1",
    "head copied from another thread": "UPDATE {s}.fa_threads SET head = (SELECT head "
    "FROM {s}.fa_threads WHERE thread_id = 'a') WHERE thread_id = 'b'",
    "flipped bit": "UPDATE {s}.fa_thread_messages SET body = set_byte(body, 40, "
    "get_byte(body, 40) # 1) WHERE thread_id = 'b' AND seq = 0",
    "truncated": "UPDATE {s}.fa_thread_messages SET body = substring(body from 1 for 60) "
    "WHERE thread_id = 'b' AND seq = 0",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_postgres_attacks_refused(pg_schema: str, attack: str) -> None:
    arun(pg_fill(pg_schema))
    pg(pg_schema, ATTACKS[attack])
    with pytest.raises(StoreIntegrityError):
        arun(pg_load(pg_schema, "b"))
    assert arun(pg_load(pg_schema, "a")) is not None


#: Attacks on a thread's message group (thread "b": the 6 messages of one save, one
#: envelope in its first row, each other row naming the group): each leaves "b" unreadable.
GROUP_ATTACKS: dict[str, list[str]] = {
    "row dropped from a group": [
        "DELETE FROM {s}.fa_thread_messages WHERE thread_id = 'b' AND seq = 2",
        "INSERT INTO {s}.fa_thread_messages (thread_id, seq, body) SELECT thread_id, 99, body "
        "FROM {s}.fa_thread_messages WHERE thread_id = 'b' AND seq = 1",  # the count kept
    ],
    "row added to a group": [
        "INSERT INTO {s}.fa_thread_messages (thread_id, seq, body) SELECT thread_id, 99, body "
        "FROM {s}.fa_thread_messages WHERE thread_id = 'b' AND seq = 5",
    ],
    "group moved to another thread": [
        "UPDATE {s}.fa_thread_messages m SET body = (SELECT x.body FROM "
        "{s}.fa_thread_messages x WHERE x.thread_id = 'a' AND x.seq = m.seq) "
        "WHERE m.thread_id = 'b'",
    ],
    "member id changed": [
        'UPDATE {s}.fa_thread_messages SET body = convert_to(\'{"id":"ua0","group":0}\','
        " 'UTF8') WHERE thread_id = 'b' AND seq = 2",
    ],
}


@pytest.mark.parametrize("attack", sorted(GROUP_ATTACKS))
def test_postgres_group_attacks_refused_and_left(pg_schema: str, attack: str) -> None:
    arun(pg_fill(pg_schema))
    rows = "SELECT seq, body FROM {s}.fa_thread_messages WHERE thread_id = 'b' ORDER BY seq"
    assert pg(pg_schema, rows)[1][1] == b'{"id":"ab0","group":0}'  # a group of 6 at 0
    for statement in GROUP_ATTACKS[attack]:
        pg(pg_schema, statement)
    stored = pg(pg_schema, rows)
    with pytest.raises(StoreIntegrityError):
        arun(pg_load(pg_schema, "b"))
    assert pg(pg_schema, rows) == stored
    loaded = arun(pg_load(pg_schema, "a"))
    assert loaded is not None and loaded.messages == history(2, "a")


def test_postgres_older_head_and_other_key_refused(pg_schema: str) -> None:
    async def grow() -> None:
        store = PostgresCheckpointer(PG_URL, schema=pg_schema, cipher=cipher())
        await store.save(checkpoint("a", 1))
        old = pg(pg_schema, "SELECT head FROM {s}.fa_threads WHERE thread_id = 'a'")[0][0]
        await store.save(checkpoint("a", 2))
        await store.close()
        pg(pg_schema, "UPDATE {s}.fa_threads SET head = %s WHERE thread_id = 'a'", old)

    arun(grow())
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(pg_load(pg_schema, "a"))
    with pytest.raises(StoreIntegrityError):
        arun(pg_load(pg_schema, "a", Cipher(keys={"k1": K2}, current="k1")))


def test_postgres_memory_copied_to_another_key_refused(pg_schema: str) -> None:
    arun(pg_fill(pg_schema))
    pg(
        pg_schema,
        "UPDATE {s}.fa_memory_messages SET body = (SELECT body FROM "
        "{s}.fa_memory_messages WHERE key = 'user/a' ORDER BY seq LIMIT 1) WHERE key = 'user/b'",
    )

    async def load() -> None:
        memory = PostgresMemory(PG_URL, "user/b", schema=pg_schema, cipher=cipher())
        try:
            await memory.load()
        finally:
            await memory.close()

    with pytest.raises(StoreIntegrityError):
        arun(load())


def test_postgres_rotate_and_migrate(pg_schema: str) -> None:
    url = f"{PG_URL}?schema={pg_schema}"
    arun(pg_fill(pg_schema, cipher("k1")))

    async def rotate(c: Cipher) -> int:
        async with open_store(url, cipher=c) as store:
            return await store.rotate()

    assert arun(rotate(cipher("k2"))) > 0
    assert arun(rotate(Cipher(keys={"k2": K2}, current="k2"))) == 0
    loaded = arun(pg_load(pg_schema, "a", Cipher(keys={"k2": K2}, current="k2")))
    assert loaded is not None and loaded.messages == history(2, "a")


def test_postgres_plain_store_migrated(pg_schema: str) -> None:
    url = f"{PG_URL}?schema={pg_schema}"

    async def plain() -> None:
        async with open_store(url) as store:
            await store.checkpointer.save(checkpoint("p", 2))
            await store.memory("user/p").save(history(1, "p"))

    async def migrate() -> int:
        async with open_store(url, cipher=cipher()) as store:
            with pytest.raises(StoreIntegrityError, match=r"rotate\(\)"):
                await store.checkpointer.load("p")
            return await store.rotate()

    arun(plain())
    assert arun(migrate()) == (1 + 6) + 3
    loaded = arun(pg_load(pg_schema, "p"))
    assert loaded is not None and loaded.messages == history(2, "p")
    assert CANARY.encode() not in pg_scan(pg_schema)


# -- Redis --------------------------------------------------------------------------------


def redis_client() -> Any:
    import redis

    return redis.Redis.from_url(REDIS_URL)


def redis_scan(prefix: str) -> bytes:
    client = redis_client()
    out = []
    try:
        for key in client.scan_iter(match=prefix + "*", count=1000):
            kind = client.type(key)
            if kind == b"string":
                out.append(client.get(key))
            elif kind == b"hash":
                out += [k + b"=" + v for k, v in client.hgetall(key).items()]
            elif kind == b"list":
                out += client.lrange(key, 0, -1)
            elif kind == b"set":
                out += list(client.smembers(key))
            elif kind == b"zset":
                out += client.zrange(key, 0, -1)
    finally:
        client.close()
    return b"\n".join(out)


async def redis_fill(prefix: str) -> None:
    threads = RedisCheckpointer(REDIS_URL, prefix=prefix, cipher=cipher())
    await threads.save(checkpoint("a", 1))
    await threads.save(checkpoint("a", 2))
    await threads.save(checkpoint("b", 2))
    await threads.close()
    for key, tag in (("user/a", "ma"), ("user/b", "mb")):
        memory = RedisMemory(REDIS_URL, key, prefix=prefix, cipher=cipher())
        await memory.save(history(2, tag))
        await memory.close()
    storage = SealedStorage(RedisStorage(REDIS_URL, prefix=prefix), cipher())
    manager = SessionManager("s1", storage)
    await manager.save_latest(Snapshot(SnapshotData(messages=history(1, "s"))))
    await manager.save_latest(Snapshot(SnapshotData(messages=history(2, "s"))))
    await storage.inner.close()  # type: ignore[attr-defined]


async def redis_load(prefix: str, thread_id: str, c: Cipher | None = None) -> Any:
    store = RedisCheckpointer(REDIS_URL, prefix=prefix, cipher=c or cipher())
    try:
        return await store.load(thread_id)
    finally:
        await store.close()


def test_redis_round_trip_and_canary_scan(redis_prefix: str) -> None:
    arun(redis_fill(redis_prefix))
    loaded = arun(redis_load(redis_prefix, "a"))
    assert loaded is not None and loaded.messages == history(2, "a")

    async def read() -> None:
        memory = RedisMemory(REDIS_URL, "user/a", prefix=redis_prefix, cipher=cipher())
        assert await memory.load() == history(2, "ma")
        await memory.close()
        storage = SealedStorage(RedisStorage(REDIS_URL, prefix=redis_prefix), cipher())
        snapshot = await SessionManager("s1", storage).load_latest()
        assert snapshot is not None and snapshot.data.messages == history(2, "s")
        await storage.inner.close()  # type: ignore[attr-defined]

    arun(read())
    raw = redis_scan(redis_prefix)
    assert b"fae1." in raw and CANARY.encode() not in raw and b"lookup_notes" not in raw


def _redis_attacks(prefix: str) -> dict[str, Callable[[Any], object]]:
    ma, mb, ta, tb = (f"{prefix}m:a", f"{prefix}m:b", f"{prefix}t:a", f"{prefix}t:b")
    plain = Message(role="user", content="planted", id="x").model_dump_json().encode()
    return {
        "planted plain body": lambda c: c.lset(mb, 0, plain),
        "planted plain head": lambda c: c.hset(tb, "head", b'{"version":1}'),
        "body copied from another thread": lambda c: c.lset(mb, 1, c.lindex(ma, 1)),
        "head copied from another thread": lambda c: c.hset(tb, "head", c.hget(ta, "head")),
        "flipped bit": lambda c: c.lset(mb, 0, _flip(c.lindex(mb, 0))),
        "truncated": lambda c: c.lset(mb, 0, c.lindex(mb, 0)[:60]),
    }


def _flip(data: bytes) -> bytes:
    changed = bytearray(data)
    changed[len(changed) - 12] ^= 0x01
    return bytes(changed)


@pytest.mark.parametrize(
    "attack",
    sorted(
        [
            "planted plain body",
            "planted plain head",
            "body copied from another thread",
            "head copied from another thread",
            "flipped bit",
            "truncated",
        ]
    ),
)
def test_redis_attacks_refused(redis_prefix: str, attack: str) -> None:
    arun(redis_fill(redis_prefix))
    client = redis_client()
    try:
        _redis_attacks(redis_prefix)[attack](client)
    finally:
        client.close()
    with pytest.raises(StoreIntegrityError):
        arun(redis_load(redis_prefix, "b"))
    assert arun(redis_load(redis_prefix, "a")) is not None


def _redis_group_attacks(prefix: str) -> dict[str, Callable[[Any], object]]:
    """Attacks on thread "b"'s message group (its 6 messages: one envelope, 5 member rows)."""
    ma, mb = f"{prefix}m:a", f"{prefix}m:b"

    def drop(c: Any) -> None:  # a member gone, the count kept by another member's copy
        c.lset(mb, 2, b"gone")
        c.lrem(mb, 1, b"gone")
        c.rpush(mb, c.lindex(mb, 1))

    def moved(c: Any) -> None:
        for i, body in enumerate(c.lrange(ma, 0, -1)):
            c.lset(mb, i, body)

    return {
        "row dropped from a group": drop,
        "row added to a group": lambda c: c.rpush(mb, c.lindex(mb, 5)),
        "group moved to another thread": moved,
        "member id changed": lambda c: c.lset(mb, 2, b'{"id":"ua0","group":0}'),
    }


@pytest.mark.parametrize(
    "attack",
    [
        "row dropped from a group",
        "row added to a group",
        "group moved to another thread",
        "member id changed",
    ],
)
def test_redis_group_attacks_refused_and_left(redis_prefix: str, attack: str) -> None:
    arun(redis_fill(redis_prefix))
    client = redis_client()
    try:
        assert client.lindex(f"{redis_prefix}m:b", 1) == b'{"id":"ab0","group":0}'
        _redis_group_attacks(redis_prefix)[attack](client)
        stored = client.lrange(f"{redis_prefix}m:b", 0, -1)
        with pytest.raises(StoreIntegrityError):
            arun(redis_load(redis_prefix, "b"))
        assert client.lrange(f"{redis_prefix}m:b", 0, -1) == stored
    finally:
        client.close()
    loaded = arun(redis_load(redis_prefix, "a"))
    assert loaded is not None and loaded.messages == history(2, "a")


def test_redis_memory_copied_and_other_key_refused(redis_prefix: str) -> None:
    arun(redis_fill(redis_prefix))
    with pytest.raises(StoreIntegrityError):
        arun(redis_load(redis_prefix, "a", Cipher(keys={"k1": K2}, current="k1")))
    client = redis_client()
    try:
        client.lset(f"{redis_prefix}mem:user/b", 0, client.lindex(f"{redis_prefix}mem:user/a", 0))
    finally:
        client.close()

    async def load() -> None:
        memory = RedisMemory(REDIS_URL, "user/b", prefix=redis_prefix, cipher=cipher())
        try:
            await memory.load()
        finally:
            await memory.close()

    with pytest.raises(StoreIntegrityError):
        arun(load())


def test_redis_open_store_seals_every_part_rotates_and_forgets(redis_prefix: str) -> None:
    url = f"{REDIS_URL}?prefix={redis_prefix}"

    async def fill() -> None:
        async with open_store(url, cipher=cipher("k1")) as store:
            await store.checkpointer.save(checkpoint("a", 2))
            await store.memory("user/a").save(history(1, "ma"))
            await SessionManager("s1", store.storage).save_latest(
                Snapshot(SnapshotData(messages=history(1, "s")))
            )
            bank = store.bank()
            await bank.remember(f"{CANARY}-memory one", namespace=("u1",), key="k")
            await bank.remember(f"{CANARY}-memory two", namespace=("u2",))

    async def rotate_and_read() -> None:
        async with open_store(url, cipher=cipher("k2")) as store:
            assert await store.rotate() > 0
        only_k2 = Cipher(keys={"k2": K2}, current="k2")
        async with open_store(url, cipher=only_k2) as store:
            assert await store.rotate() == 0
            loaded = await store.checkpointer.load("a")
            assert loaded is not None and loaded.messages == history(2, "a")
            assert await store.memory("user/a").load() == history(1, "ma")
            hits = await store.bank().search("memory", namespace=("u1",))
            assert [h.record.text for h in hits] == [f"{CANARY}-memory one"]
            ids = [h.record.id for h in hits]
            assert await store.bank().forget_namespace(("u1",)) == 1
            assert len(await store.bank().search("memory", namespace=("u2",))) == 1
            assert await store.bank_backend().latest(ids) == []

    arun(fill())
    raw = redis_scan(redis_prefix)
    assert b"fae1." in raw and CANARY.encode() not in raw and b"lookup_notes" not in raw
    arun(rotate_and_read())


def test_redis_rotate_and_migrate(redis_prefix: str) -> None:
    arun(redis_fill(redis_prefix))  # under k1
    only_k2 = Cipher(keys={"k2": K2}, current="k2")

    async def rotate(c: Cipher, migrate: bool = False) -> int:
        threads = RedisCheckpointer(REDIS_URL, prefix=redis_prefix, cipher=c)
        storage = SealedStorage(RedisStorage(REDIS_URL, prefix=redis_prefix), c)
        try:
            written = await threads.rotate(migrate=migrate)
            written += await RedisMemory.rotate_all(threads._db, c, migrate)
            return written + await storage.rotate(migrate=migrate)
        finally:
            await threads.close()
            await storage.inner.close()  # type: ignore[attr-defined]

    # threads: a head and one group each (a's second save took its first group in),
    # memories: a value per message, the session's data key
    assert arun(rotate(cipher("k2"))) == 2 * (1 + 1) + 2 * 6 + 1
    assert arun(rotate(only_k2)) == 0
    loaded = arun(redis_load(redis_prefix, "b", only_k2))
    assert loaded is not None and loaded.messages == history(2, "b")

    async def plain_then_migrate() -> None:
        plain = RedisMemory(REDIS_URL, "user/p", prefix=redis_prefix)
        await plain.save(history(1, "p"))
        await plain.close()
        assert await rotate(only_k2, migrate=True) == 3
        memory = RedisMemory(REDIS_URL, "user/p", prefix=redis_prefix, cipher=only_k2)
        assert await memory.load() == history(1, "p")
        await memory.close()

    arun(plain_then_migrate())
    assert CANARY.encode() not in redis_scan(redis_prefix)


async def _refused_without_cipher(plain: Any) -> None:
    try:
        with pytest.raises(StoreIntegrityError, match="opened without cipher="):
            await plain.load("a")
    finally:
        await plain.close()


def test_postgres_sealed_thread_read_without_the_cipher_says_so(pg_schema: str) -> None:
    arun(pg_fill(pg_schema))
    arun(_refused_without_cipher(PostgresCheckpointer(PG_URL, schema=pg_schema)))
    assert arun(pg_load(pg_schema, "a")).messages == history(2, "a")  # left as it was


def test_redis_sealed_thread_read_without_the_cipher_says_so(redis_prefix: str) -> None:
    arun(redis_fill(redis_prefix))
    arun(_refused_without_cipher(RedisCheckpointer(REDIS_URL, prefix=redis_prefix)))
    assert arun(redis_load(redis_prefix, "a")).messages == history(2, "a")  # left as it was
