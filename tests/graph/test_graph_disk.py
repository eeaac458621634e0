"""The on-disk GraphStore refuses unusable paths and files with a clear AgentError code."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents.errors import (
    GraphStoreCorruptError,
    GraphStoreIOError,
    InvalidArgumentError,
)
from framework_agents.graph import GraphStore

ROOT = os.geteuid() == 0


async def _made(path: Path) -> None:
    store = GraphStore(path)
    await store.add("ex:a", "ex:p", "ex:b")
    await store.close()


@pytest.mark.parametrize("how", ["open", "add", "sync-read", "import"])
@pytest.mark.parametrize("where", ["path-is-a-file", "parent-is-a-file", "database-is-a-dir"])
def test_a_path_that_cannot_hold_a_store_is_invalid_argument(
    tmp_path: Path, where: str, how: str
) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("not a store")
    path = {
        "path-is-a-file": blocker,
        "parent-is-a-file": blocker / "graph",
        "database-is-a-dir": tmp_path / "g",
    }[where]
    if where == "database-is-a-dir":
        (path / "graph.sqlite3").mkdir(parents=True)
    store = GraphStore(path)
    actions: dict[str, Callable[[], object]] = {
        "open": lambda: arun(store.open()),
        "add": lambda: arun(store.add("ex:a", "ex:p", "ex:b")),
        "sync-read": lambda: store.quads(),
        "import": lambda: arun(store.import_state(GraphStore().export_state())),
    }
    with pytest.raises(InvalidArgumentError) as info:
        actions[how]()
    assert info.value.code == "INVALID_ARGUMENT"
    assert str(path) in info.value.message
    assert blocker.read_text() == "not a store"


def _unwritable(tmp_path: Path) -> Path:
    if not ROOT:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        return locked / "graph"
    if Path("/sys").is_dir():  # even root may not create directories in sysfs
        return Path("/sys/framework-agents-graph-test")
    pytest.skip("no unwritable location for root")


def test_an_unwritable_location_is_graph_store_io(tmp_path: Path) -> None:
    path = _unwritable(tmp_path)
    try:
        with pytest.raises(GraphStoreIOError) as info:
            arun(GraphStore(path).open())
        assert info.value.code == "GRAPH_STORE_IO"
        assert str(path) in info.value.message
    finally:
        if (tmp_path / "locked").exists():
            (tmp_path / "locked").chmod(0o700)


@pytest.mark.skipif(ROOT, reason="root writes read-only files")
def test_a_read_only_database_is_graph_store_io_and_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        await _made(tmp_path / "g")
        (tmp_path / "g" / "graph.sqlite3").chmod(0o400)
        (tmp_path / "g").chmod(0o500)
        try:
            store = GraphStore(tmp_path / "g")
            try:
                await store.open()
            except GraphStoreIOError:
                return  # refused at open: fine too
            before = store.quads()
            with pytest.raises(GraphStoreIOError):
                await store.add("ex:c", "ex:p", "ex:d")
            assert store.quads() == before
        finally:
            (tmp_path / "g").chmod(0o700)

    arun(main())


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("g", "has space"),
        ("g", "urn:x-framework-agents:entailed"),
        ("g", b"\x00\x01"),
        ("o", b"\x00"),
        ("s", b"ex:s"),
        ("o", 5),
    ],
    ids=[
        "graph-with-space",
        "entailed-graph",
        "blob-graph",
        "blob-object",
        "blob-subject",
        "number-object",
    ],
)
def test_malformed_rows_are_graph_store_corrupt(tmp_path: Path, column: str, value: Any) -> None:
    arun(_made(tmp_path / "g"))
    row = {"s": "ex:s", "p": "ex:p", "o": '"x"', "g": "", column: value}
    with sqlite3.connect(tmp_path / "g" / "graph.sqlite3") as conn:
        conn.execute(
            "INSERT INTO quads VALUES (?, ?, ?, ?)", (row["s"], row["p"], row["o"], row["g"])
        )
    with pytest.raises(GraphStoreCorruptError) as info:
        arun(GraphStore(tmp_path / "g").open())
    assert info.value.code == "GRAPH_STORE_CORRUPT"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"path": 123},
        {"path": b"/tmp/graph"},
        {"path": ""},
        {"prefixes": "ex"},
        {"prefixes": {"ex": 5}},
        {"prefixes": {"": "http://example.org/"}},
        {"prefixes": {"e x": "http://example.org/"}},
        {"prefixes": {"ex": ""}},
    ],
    ids=[
        "int-path",
        "bytes-path",
        "empty-path",
        "str-prefixes",
        "int-namespace",
        "empty-prefix",
        "spaced-prefix",
        "empty-namespace",
    ],
)
def test_bad_constructor_arguments_are_invalid_argument(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        GraphStore(**kwargs)
    assert info.value.code == "INVALID_ARGUMENT"


def test_text_utf8_cannot_encode_is_refused_before_the_disk(tmp_path: Path) -> None:
    """A lone surrogate was a raw UnicodeEncodeError from SQLite (and stored in memory)."""
    from framework_agents.errors import GraphStateError, GraphTermError

    async def main() -> None:
        store = GraphStore(tmp_path / "g")
        await store.add("ex:a", "ex:p", "fine")
        with pytest.raises(GraphTermError):
            await store.add("ex:a", "ex:p", "bad \ud800 text")
        state = {
            "format": "framework-agents.graph",
            "version": 1,
            "quads": [["ex:\udc00", "ex:p", "ex:o", None]],
        }
        with pytest.raises(GraphStateError):
            await store.import_state(state)
        assert [q.object.key for q in store.quads()] == ['"fine"']
        await store.close()
        assert [q.object.key for q in GraphStore(tmp_path / "g").quads()] == ['"fine"']

    arun(main())


def test_a_foreign_sqlite_database_is_refused_and_left_byte_identical(tmp_path: Path) -> None:
    """It was switched to WAL mode (rewritten, -wal/-shm files added) before the refusal."""
    (tmp_path / "g").mkdir()
    file = tmp_path / "g" / "graph.sqlite3"
    with sqlite3.connect(file) as conn:
        conn.execute("CREATE TABLE notes (x)")
        conn.execute("INSERT INTO notes VALUES (1)")
    conn.close()
    before = file.read_bytes()
    with pytest.raises(GraphStoreCorruptError, match="not a framework-agents graph store"):
        arun(GraphStore(tmp_path / "g").open())
    assert file.read_bytes() == before
    # Only the lock file joins it: no -wal or -shm, nothing written into the database.
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["graph.lock", "graph.sqlite3"]
