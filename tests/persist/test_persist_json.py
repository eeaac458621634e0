"""The one plain-JSON rule refuses what no reader could read back (``_persist.json_problem``)."""

from __future__ import annotations

import asyncio
import sys
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
from framework_agents._persist import json_problem
from framework_agents.errors import AgentError

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
