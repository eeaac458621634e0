"""Opening an on-disk store: one opener at a time, owner-only files, the closure snapshot."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from framework_agents.errors import GraphStoreBusyError, InvalidArgumentError
from framework_agents.graph import GraphStore
from framework_agents.graph import store as store_module
from framework_agents.graph._snapshot import SNAPSHOT_NAME
from processes import close_process

HOLDER = """
import asyncio, sys
from framework_agents.graph import GraphStore

async def main():
    store = GraphStore(sys.argv[1])
    await store.add("ex:held", "ex:by", "ex:child")
    print("held", flush=True)
    if sys.argv[2] == "crash":
        await asyncio.to_thread(sys.stdin.readline)  # killed while waiting here
    elif sys.argv[2] == "exit":
        import os
        os._exit(0)  # no close(): no snapshot of this generation
    else:
        await asyncio.to_thread(sys.stdin.readline)
        await store.close()
        print("closed", flush=True)

asyncio.run(main())
"""

FACTS = [
    ("ex:Engineer", "rdfs:subClassOf", "ex:Person"),
    ("ex:worksFor", "rdfs:range", "ex:Organization"),
    ("ex:knows", "rdf:type", "owl:SymmetricProperty"),
    ("ex:alice", "rdf:type", "ex:Engineer"),
    ("ex:alice", "ex:worksFor", "ex:acme"),
    ("ex:alice", "ex:knows", "ex:bob"),
    ("ex:alice", "rdfs:label", "Alice Smith"),
    ("ex:bob", "ex:favoriteColor", "green"),
]


def _holder(path: Path, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_gets_busy_then_waits_for_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "g"
    proc = _holder(path, "hold")
    try:
        with pytest.raises(GraphStoreBusyError) as info:
            asyncio.run(GraphStore(path).open())
        assert info.value.code == "GRAPH_STORE_BUSY"
        assert "lock_timeout" in info.value.message

        opened: list[GraphStore] = []

        def wait_for_it() -> None:
            async def main() -> None:
                store = GraphStore(path, lock_timeout=120)
                await store.open()
                opened.append(store)

            asyncio.run(main())

        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("release\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "closed"
        waiter.join(timeout=120)
        assert opened, "the waiting opener never got the store"
        assert opened[0].contains("ex:held", "ex:by", "ex:child")
        asyncio.run(opened[0].close())
    finally:
        proc.kill()
        proc.wait()
        close_process(proc)


def test_a_killed_holder_leaves_the_store_openable(tmp_path: Path) -> None:
    path = tmp_path / "g"
    proc = _holder(path, "crash")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    close_process(proc)

    async def main() -> None:
        store = GraphStore(path)
        await store.open()
        assert store.contains("ex:held", "ex:by", "ex:child")
        await store.close()

    asyncio.run(main())


def test_two_stores_of_one_process_on_one_path_exclude_each_other(tmp_path: Path) -> None:
    async def main() -> None:
        first = GraphStore(tmp_path / "g")
        await first.add("ex:a", "ex:p", "ex:b")
        with pytest.raises(GraphStoreBusyError):
            await GraphStore(tmp_path / "g").open()
        await first.close()
        second = GraphStore(tmp_path / "g")
        assert second.contains("ex:a", "ex:p", "ex:b")
        await second.close()
        assert not (tmp_path / "g" / SNAPSHOT_NAME).exists()  # small: rebuilt on open

    asyncio.run(main())


@pytest.mark.parametrize("timeout", [-1, float("inf"), float("nan"), "1", True, None])
def test_a_bad_lock_timeout_is_invalid_argument(timeout: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        GraphStore("x", lock_timeout=timeout)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_files_are_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN", 1)
    path = tmp_path / "g"

    async def main() -> None:
        store = GraphStore(path)
        await store.add_many(FACTS)
        names = {p.name for p in path.iterdir()}
        assert {"graph.sqlite3", "graph.sqlite3-wal", "graph.lock"} <= names
        await store.close()

    old = os.umask(0o022)
    try:
        asyncio.run(main())
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    files = list(path.iterdir())
    assert SNAPSHOT_NAME in {p.name for p in files}
    for file in files:
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file.name


def _rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count closures computed from the quads (as opposed to read from a snapshot)."""
    calls: list[int] = []
    build = store_module._State.build.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, quads: Any) -> Any:
        calls.append(1)
        return build(cls, quads)

    monkeypatch.setattr(store_module._State, "build", classmethod(counted))
    return calls


def _picture(store: GraphStore) -> tuple[Any, ...]:
    return (
        store.quads(),
        store.closure_size,
        [f.text for f in store.relevant("who does alice smith work for", 8)],
        [f.text for f in store.relevant("favorite color", 8)],
    )


def test_a_big_store_reopens_from_its_snapshot_without_reasoning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN", 1)
    rebuilds = _rebuilds(monkeypatch)
    path = tmp_path / "g"

    async def main() -> None:
        store = GraphStore(path)
        await store.add_many(FACTS)
        expected = _picture(store)
        await store.close()
        assert rebuilds == [1]  # the first open found an empty database

        again = GraphStore(path)
        await again.open()
        assert rebuilds == [1]  # read from the snapshot
        assert _picture(again) == expected
        # It keeps reasoning incrementally, exactly as a rebuilt store would.
        await again.add("ex:carol", "rdf:type", "ex:Engineer")
        await again.remove("ex:Engineer", "rdfs:subClassOf", "ex:Person")
        await again.add("ex:carol", "ex:knows", "ex:alice")
        reference = GraphStore()
        await reference.import_state(again.export_state())
        assert _picture(again) == _picture(reference)
        await again.close()  # changed: a new snapshot

        third = GraphStore(path)
        assert _picture(third) == _picture(reference)
        assert rebuilds == [1, 1]  # only the in-memory reference was built
        await third.close()

    asyncio.run(main())


def test_a_stale_snapshot_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN", 1)
    path = tmp_path / "g"

    async def seed() -> None:
        store = GraphStore(path)
        await store.add_many(FACTS)
        await store.close()

    asyncio.run(seed())
    assert (path / SNAPSHOT_NAME).exists()
    proc = _holder(path, "exit")  # writes a fact, exits without closing
    proc.wait()
    close_process(proc)
    rebuilds = _rebuilds(monkeypatch)

    async def check() -> None:
        store = GraphStore(path)
        assert store.contains("ex:held", "ex:by", "ex:child")
        assert store.contains("ex:alice", "rdf:type", "ex:Person")
        assert rebuilds == [1]
        await store.close()

    asyncio.run(check())


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_a_damaged_snapshot_is_ignored_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN", 1)
    path = tmp_path / "g"

    async def seed() -> tuple[Any, ...]:
        store = GraphStore(path)
        await store.add_many(FACTS)
        picture = _picture(store)
        await store.close()
        return picture

    expected = asyncio.run(seed())
    file = path / SNAPSHOT_NAME
    data = bytearray(file.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[-10] ^= 0xFF
    elif damage == "garbage":
        data = bytearray(b"not a snapshot at all" * 10)
    else:
        data = bytearray()
    file.write_bytes(bytes(data))
    rebuilds = _rebuilds(monkeypatch)

    async def check() -> None:
        store = GraphStore(path)
        assert _picture(store) == expected
        assert rebuilds == [1]
        await store.close()

    asyncio.run(check())
    assert "closure snapshot" in caplog.text or "ignoring" in caplog.text


def test_a_layout_1_store_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "g"
    path.mkdir()
    conn = sqlite3.connect(path / "graph.sqlite3")
    conn.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE quads (s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, g TEXT NOT NULL,
            PRIMARY KEY (s, p, o, g)) WITHOUT ROWID;
        INSERT INTO meta VALUES ('format', 'framework-agents.graph'), ('version', '1');
        INSERT INTO quads VALUES ('ex:a', 'rdf:type', '"ex:C"', ''),
            ('ex:C', 'rdfs:subClassOf', '"ex:D"', '');
        """
    )
    conn.commit()
    conn.close()

    async def main() -> None:
        store = GraphStore(path)
        assert store.is_entailed("ex:a", "rdf:type", "ex:D")
        await store.add("ex:b", "rdf:type", "ex:C")
        await store.close()

    asyncio.run(main())
    conn = sqlite3.connect(path / "graph.sqlite3")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    conn.close()
    assert meta == {"format": "framework-agents.graph", "version": "2", "generation": "1"}


def test_a_database_without_a_valid_generation_is_corrupt_and_left_alone(tmp_path: Path) -> None:
    from framework_agents.errors import GraphStoreCorruptError

    path = tmp_path / "g"

    async def seed() -> None:
        store = GraphStore(path)
        await store.add("ex:a", "ex:p", "ex:b")
        await store.close()

    asyncio.run(seed())
    with sqlite3.connect(path / "graph.sqlite3") as conn:
        conn.execute("UPDATE meta SET value = 'x' WHERE key = 'generation'")
    conn.close()
    before = (path / "graph.sqlite3").read_bytes()
    with pytest.raises(GraphStoreCorruptError, match="generation"):
        asyncio.run(GraphStore(path).open())
    assert (path / "graph.sqlite3").read_bytes() == before
    asyncio.run(GraphStore(path).close())  # the failed open let the lock go


def test_a_store_dropped_without_close_lets_the_path_go(tmp_path: Path) -> None:
    import gc

    async def main() -> None:
        store = GraphStore(tmp_path / "g")
        await store.add("ex:a", "ex:p", "ex:b")
        del store
        gc.collect()
        again = GraphStore(tmp_path / "g")
        assert again.contains("ex:a", "ex:p", "ex:b")
        await again.close()

    asyncio.run(main())
