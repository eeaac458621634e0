"""FileMemory's lock waits: a cancel ends them, ``lock_timeout`` bounds them, and
``clear()`` waits for readers (it writes, so it takes the lock exclusively).

Another process holds ``memory.json.lock`` here (``processes.flock_held``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path

import pytest

from async_helper import arun
from framework_agents import FileMemory, Message
from framework_agents.errors import InvalidArgumentError, LockTimeoutError
from lock_waits import cancel_while_waiting, wait_began
from processes import flock_held

FIRST = [Message("user", "one", id="u1"), Message("assistant", "two", id="a1")]
NEW = [Message("user", "three", id="u2")]


def _stored(directory: Path) -> list[str | None]:
    return [m.id for m in arun(FileMemory(directory).load())]


def _writes(memory: FileMemory) -> dict[str, Callable[[], Coroutine[object, object, object]]]:
    async def keep(history: list[Message]) -> list[Message]:
        return history

    return {
        "save": lambda: memory.save(NEW),
        "replace": lambda: memory.replace([*FIRST, *NEW]),
        "commit": lambda: memory.commit(NEW, base=["u1", "a1"]),
        "save_if": lambda: memory.save_if(NEW, revision=memory.revision),
        "clear": memory.clear,
        "transact": lambda: memory.transact(keep),
    }


@pytest.mark.parametrize("name", ["save", "replace", "commit", "save_if", "clear", "transact"])
def test_a_cancel_ends_a_wait_for_another_process_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    memory = FileMemory(tmp_path)
    arun(memory.save(FIRST))
    assert arun(memory.load()) == FIRST  # save_if's revision: as this instance loaded it
    began = wait_began(monkeypatch)
    with flock_held(memory.lock_path):
        arun(cancel_while_waiting(_writes(memory)[name], began))
    assert _stored(tmp_path) == ["u1", "a1"]
    arun(memory.save(NEW))  # the instance goes on as before
    assert _stored(tmp_path) == ["u1", "a1", "u2"]


def test_lock_timeout_bounds_every_write_and_a_load_behind_a_writer(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, lock_timeout=0.05)
    assert memory.lock_timeout == 0.05
    arun(memory.save(FIRST))
    arun(memory.load())
    with flock_held(memory.lock_path):
        for name, write in _writes(memory).items():
            with pytest.raises(LockTimeoutError) as info:
                arun(write())
            assert info.value.code == "LOCK_TIMEOUT", name
            assert str(memory.lock_path) in str(info.value)
        with pytest.raises(LockTimeoutError):
            arun(memory.load())  # a writer holds it: the pair of files may be changing
    assert _stored(tmp_path) == ["u1", "a1"]


def test_clear_waits_for_a_reader_in_another_process(tmp_path: Path) -> None:
    # clear() publishes an empty document and removes the journal: under a shared lock
    # it could do so while a load had read the document and not yet the journal, which
    # would then load a state older than the last acknowledged one.
    memory = FileMemory(tmp_path, lock_timeout=0.05)
    arun(memory.save(FIRST))
    arun(memory.save(NEW))  # a journal record after the document
    with flock_held(memory.lock_path, shared=True):
        assert [m.id for m in arun(memory.load())] == ["u1", "a1", "u2"]  # readers share
        with pytest.raises(LockTimeoutError):
            arun(memory.clear())
    assert _stored(tmp_path) == ["u1", "a1", "u2"]
    arun(memory.clear())
    assert _stored(tmp_path) == []


def test_lock_timeout_bounds_the_wait_for_a_task_of_the_same_loop(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, lock_timeout=0.05)
    arun(memory.save(FIRST))
    inside = asyncio.Event()
    go_on = asyncio.Event()

    async def slow_summary(history: list[Message]) -> list[Message]:
        inside.set()
        await go_on.wait()
        return history[-1:]

    async def main() -> None:
        holder = asyncio.create_task(memory.transact(slow_summary))
        await inside.wait()
        with pytest.raises(LockTimeoutError):
            await memory.save(NEW)
        go_on.set()
        await holder

    arun(main())
    assert _stored(tmp_path) == ["a1"]


def test_no_lock_timeout_waits_for_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = FileMemory(tmp_path)
    assert memory.lock_timeout is None
    arun(memory.save(FIRST))
    paused = wait_began(monkeypatch)
    done = threading.Event()

    def save_now() -> None:
        arun(memory.save(NEW))
        done.set()

    with flock_held(memory.lock_path):
        saver = threading.Thread(target=save_now)
        saver.start()
        assert paused.wait(10)
        assert not done.is_set()
    saver.join(10)
    assert done.is_set()
    assert _stored(tmp_path) == ["u1", "a1", "u2"]


@pytest.mark.parametrize("bad", [-1, float("nan"), True, "1"])
def test_lock_timeout_is_checked(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="lock_timeout"):
        FileMemory(tmp_path, lock_timeout=bad)  # type: ignore[arg-type]
