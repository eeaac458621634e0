"""The one plain-JSON rule refuses what no reader could read back (``_persist.json_problem``)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework_agents import (
    FileCheckpointer,
    FileMemory,
    LocalFileStorage,
    Message,
    SessionManager,
    Snapshot,
    SnapshotData,
    ThreadCheckpoint,
)
from framework_agents._persist import PARSER_INT_DIGITS, int_digit_limit, json_problem
from framework_agents.errors import AgentError
from framework_agents.messages import MessageList
from framework_agents.stores.sqlite import SqliteMemory

_LIMIT = sys.get_int_max_str_digits()
TOO_LONG = 10**_LIMIT  # one digit more than the interpreter converts
LONG_BUT_FINE = 10 ** (_LIMIT - 1)


def test_an_integer_longer_than_the_digit_limit_is_not_plain_json() -> None:
    problem = json_problem({"n": [TOO_LONG]}, "state")
    assert problem is not None and "state['n'][0]" in problem and "digits" in problem
    assert json_problem({"n": [LONG_BUT_FINE, -LONG_BUT_FINE, True, 2**64]}, "state") is None


def test_every_store_refuses_it_on_save_and_stays_readable(tmp_path: Path) -> None:
    # It used to be written, and then every load of the session or thread was corrupt.
    async def main() -> None:
        session = SessionManager("s", LocalFileStorage(tmp_path / "sessions"))
        await session.save_latest(Snapshot(SnapshotData(state={"n": LONG_BUT_FINE})))
        with pytest.raises(AgentError) as err:
            await session.save_latest(Snapshot(SnapshotData(state={"n": TOO_LONG})))
        assert err.value.code == "STATE_NOT_JSON"
        latest = await SessionManager("s", LocalFileStorage(tmp_path / "sessions")).load_latest()
        assert latest is not None and latest.data.state == {"n": LONG_BUT_FINE}

        cp = FileCheckpointer(tmp_path / "checkpoints")
        await cp.save(ThreadCheckpoint("t1", None, [], {"n": LONG_BUT_FINE}))
        with pytest.raises(AgentError) as err:
            await cp.save(ThreadCheckpoint("t1", None, [], {"n": TOO_LONG}))
        assert err.value.code == "STATE_NOT_JSON"
        loaded = await FileCheckpointer(tmp_path / "checkpoints").load("t1")
        assert loaded is not None and loaded.state == {"n": LONG_BUT_FINE}

        memory = FileMemory(tmp_path / "memory")
        await memory.save([Message("user", "x", id="a", metadata={"n": LONG_BUT_FINE})])
        with pytest.raises(AgentError) as err:
            await memory.save([Message("user", "y", id="b", metadata={"n": TOO_LONG})])
        assert err.value.code == "INVALID_ARGUMENT"
        assert [m.id for m in await FileMemory(tmp_path / "memory").load()] == ["a"]

    asyncio.run(main())


@contextlib.contextmanager
def digit_limit(limit: int) -> Iterator[None]:
    """The interpreter's integer digit limit set to ``limit`` for the block."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(before)


def test_the_parser_behind_one_pass_reads_refuses_longer_integers_than_the_rule() -> None:
    # Canary: every one-pass read parses with pydantic, whose bound is PARSER_INT_DIGITS
    # whatever the interpreter's limit; the save rule must never allow more.
    with digit_limit(0):
        for value in (10**PARSER_INT_DIGITS - 1, -(10**PARSER_INT_DIGITS - 1)):
            fits = f'[{{"role":"user","metadata":{{"n":{value}}}}}]'
            assert MessageList.validate_json(fits)[0].metadata["n"] == value
            with pytest.raises(ValueError, match="number out of range"):
                MessageList.validate_json(fits.replace("9", "99", 1))


def test_with_no_interpreter_limit_the_parsers_bound_still_applies(tmp_path: Path) -> None:
    # It used to be saved (the rule followed the interpreter alone), and FileMemory's
    # next load was MEMORY_CORRUPT: "checksummed messages do not validate".
    async def main() -> None:
        memory = FileMemory(tmp_path / "memory")
        await memory.save([Message("user", "x", id="a", metadata={"n": -(10**4299)})])
        with pytest.raises(AgentError) as err:
            await memory.save([Message("user", "y", id="b", metadata={"n": 10**4300})])
        assert err.value.code == "INVALID_ARGUMENT" and "4300 digits" in str(err.value)
        loaded = await FileMemory(tmp_path / "memory").load()
        assert [m.metadata["n"] for m in loaded] == [-(10**4299)]

    with digit_limit(0):
        assert int_digit_limit() == PARSER_INT_DIGITS
        assert json_problem(10**PARSER_INT_DIGITS, "v") is not None
        assert json_problem(-(10**PARSER_INT_DIGITS - 1), "v") is None
        asyncio.run(main())


def _written_with_a_long_integer(root: Path) -> None:
    """A session, a thread (document and journal) and a memory (document and journal),
    each holding a 1,000-digit integer, written at the default digit limit."""
    long = 10**999

    async def main() -> None:
        session = SessionManager("s", LocalFileStorage(root / "sessions"))
        await session.save_latest(Snapshot(SnapshotData(), app_data={"n": long}))
        cp = FileCheckpointer(root / "checkpoints")
        await cp.save(ThreadCheckpoint("doc", None, [], {"n": long}))
        await cp.save(ThreadCheckpoint("jr", None, [Message("user", "x", id="a")], {}))
        await cp.save(ThreadCheckpoint("jr", None, [Message("user", "x", id="a")], {"n": long}))
        await FileMemory(root / "doc").save([Message("user", "x", id="a", metadata={"n": long})])
        journaled = FileMemory(root / "journal")
        await journaled.save([Message("user", "x", id="a")])
        await journaled.save([Message("user", "y", id="b", metadata={"n": long})])
        db = SqliteMemory(root / "db.sqlite", "k")
        await db.save([Message("user", "x", id="a", metadata={"n": long})])
        await db.close()

    asyncio.run(main())
    assert (root / "checkpoints").rglob("*.journal") and (root / "journal").rglob("*journal*")


def test_a_lowered_digit_limit_makes_every_reader_refuse_what_it_would_not_save(
    tmp_path: Path,
) -> None:
    # The strict readers always refused an integer past the interpreter's limit, but the
    # one-pass readers (pydantic's parser: 4,300 digits whatever the limit) accepted it:
    # a loaded session, thread or history that could not be saved again.
    _written_with_a_long_integer(tmp_path)

    async def main() -> None:
        loads = {
            "SNAPSHOT_CORRUPT": SessionManager(
                "s", LocalFileStorage(tmp_path / "sessions")
            ).load_latest(),
            "CHECKPOINT_CORRUPT": FileCheckpointer(tmp_path / "checkpoints").load("doc"),
            "MEMORY_CORRUPT": FileMemory(tmp_path / "doc").load(),
        }
        for code, load in loads.items():
            with pytest.raises(AgentError) as err:
                await load
            assert err.value.code == code, err.value
            assert "digit" in str(err.value) or "Exceeds the limit" in str(err.value)
        for load in (
            FileCheckpointer(tmp_path / "checkpoints").load("jr"),
            FileMemory(tmp_path / "journal").load(),
        ):
            with pytest.raises(AgentError) as err:
                await load
            assert err.value.code in {"CHECKPOINT_CORRUPT", "MEMORY_CORRUPT"}, err.value
        db = SqliteMemory(tmp_path / "db.sqlite", "k")
        with pytest.raises(AgentError) as err:
            await db.load()
        assert err.value.code == "MEMORY_CORRUPT"
        await db.close()

    with digit_limit(640):
        asyncio.run(main())
    # Back at the default limit, each loads as it was written (nothing was touched).
    latest = asyncio.run(SessionManager("s", LocalFileStorage(tmp_path / "sessions")).load_latest())
    assert latest is not None and latest.app_data == {"n": 10**999}


def test_a_lowered_digit_limit_still_reads_long_digit_runs_in_strings(tmp_path: Path) -> None:
    # Only integers count: a run of digits in a string (an id, a number quoted by a
    # tool) loads in every reader, the one-pass ones included.
    digits = "1" * 1000

    async def write() -> None:
        session = SessionManager("s", LocalFileStorage(tmp_path / "sessions"))
        await session.save_latest(Snapshot(SnapshotData(state={"n": digits}), app_data=digits))
        cp = FileCheckpointer(tmp_path / "checkpoints")
        await cp.save(ThreadCheckpoint("t", None, [Message("user", "x", id="a")], {}))
        await cp.save(ThreadCheckpoint("t", None, [Message("user", "x", id="a"), msg], {}))
        memory = FileMemory(tmp_path / "memory")
        await memory.replace([msg])  # the document
        await memory.save([Message("user", digits, id="c")])  # its journal
        db = SqliteMemory(tmp_path / "db.sqlite", "k")
        await db.save([msg])
        await db.close()

    async def read() -> None:
        latest = await SessionManager("s", LocalFileStorage(tmp_path / "sessions")).load_latest()
        assert latest is not None and latest.app_data == digits
        loaded = await FileCheckpointer(tmp_path / "checkpoints").load("t")
        assert loaded is not None and loaded.messages[-1] == msg
        assert [m.id for m in await FileMemory(tmp_path / "memory").load()] == ["b", "c"]
        db = SqliteMemory(tmp_path / "db.sqlite", "k")
        assert await db.load() == [msg]
        await db.close()

    msg = Message("user", f"pi: {digits}", id="b", metadata={"n": digits})
    asyncio.run(write())
    with digit_limit(640):
        asyncio.run(read())
