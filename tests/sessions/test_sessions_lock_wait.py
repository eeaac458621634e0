"""LocalFileStorage's lock waits: a cancel ends them, ``lock_timeout`` bounds them.

Another process holds a key's sidecar lock (``<dir>/.<name>.lock``) here
(``processes.flock_held``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path

import pytest

from async_helper import arun
from framework_agents import LocalFileStorage
from framework_agents.errors import AgentError, InvalidArgumentError, LockTimeoutError
from framework_agents.sessions._base import digest
from lock_waits import cancel_while_waiting, wait_began
from processes import flock_held

KEY = "session/s1/value.json"


def _sidecar(root: Path) -> Path:
    return root / "session" / "s1" / ".value.json.lock"


def _calls(storage: LocalFileStorage) -> dict[str, Callable[[], Coroutine[object, object, object]]]:
    return {
        "put": lambda: storage.put(KEY, b"new"),
        "swap": lambda: storage.swap(KEY, b"new", digest(b"old")),
        "append_logged": lambda: storage.append_logged(KEY, b"rec", digest(b"old")),
        "delete": lambda: storage.delete(KEY),
        "read_logged": lambda: storage.read_logged(KEY),
    }


@pytest.mark.parametrize("name", ["put", "swap", "append_logged", "delete", "read_logged"])
def test_a_cancel_ends_a_wait_for_another_process_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    storage = LocalFileStorage(tmp_path)
    arun(storage.put(KEY, b"old"))
    arun(storage.swap(KEY, b"old", digest(b"old")))  # the sidecar lock file exists now
    began = wait_began(monkeypatch)
    with flock_held(_sidecar(tmp_path)):
        arun(cancel_while_waiting(_calls(storage)[name], began))
    assert arun(storage.read_logged(KEY)) == (b"old", [], digest(b"old"))
    arun(storage.put(KEY, b"later"))  # the storage goes on as before
    assert arun(storage.get(KEY)) == b"later"


def test_lock_timeout_bounds_every_call_that_waits_for_a_key(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path, lock_timeout=0.05)
    assert storage.lock_timeout == 0.05
    arun(storage.put(KEY, b"old"))
    arun(storage.swap(KEY, b"old", digest(b"old")))
    with flock_held(_sidecar(tmp_path)):
        for name, call in _calls(storage).items():
            with pytest.raises(LockTimeoutError) as info:
                arun(call())
            assert info.value.code == "LOCK_TIMEOUT", name
            assert KEY in str(info.value)
        # prune keeps a key whose lock stays busy (in use, not stale) and goes on.
        arun(storage.put("other/value.json", b"stale"))
        assert arun(storage.prune(older_than=timedelta(0))) == 1
        assert arun(storage.get(KEY)) == b"old"  # a plain read takes no lock
    assert arun(storage.read_logged(KEY)) == (b"old", [], digest(b"old"))
    assert arun(storage.list("")) == [KEY]


def test_readers_share_the_key_lock(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path, lock_timeout=0.05)
    arun(storage.put(KEY, b"old"))
    arun(storage.swap(KEY, b"old", digest(b"old")))
    with flock_held(_sidecar(tmp_path), shared=True):
        assert arun(storage.read_logged(KEY))[0] == b"old"
        with pytest.raises(LockTimeoutError):
            arun(storage.put(KEY, b"new"))


@pytest.mark.parametrize("bad", [-1, float("nan"), True, "1"])
def test_lock_timeout_is_checked(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="lock_timeout"):
        LocalFileStorage(tmp_path, lock_timeout=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["put", "swap", "append_logged", "delete", "read_logged"])
def test_a_call_that_waited_while_the_holder_deleted_the_key_and_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The holder was a delete of the directory's last key: value, lock file and the
    emptied directories went while we waited. A put stores its value afresh, a delete
    finds nothing, a swap or an append is a conflict, a read finds no value; never a bare
    ``AssertionError`` or ``OSError`` (a put racing a delete failed that way ~15% of the
    time).
    """
    storage = LocalFileStorage(tmp_path)
    arun(storage.put(KEY, b"old"))
    arun(storage.swap(KEY, b"old", digest(b"old")))  # the sidecar lock file exists now
    began = wait_began(monkeypatch)

    async def body() -> object:
        with flock_held(_sidecar(tmp_path)):
            task = asyncio.create_task(_calls(storage)[name]())
            await asyncio.to_thread(began.wait, 10)
            # What a delete does while it holds the lock (LocalFileStorage._delete_sync).
            (tmp_path / "session" / "s1" / "value.json").unlink()
            _sidecar(tmp_path).unlink()
            (tmp_path / "session" / "s1").rmdir()
            (tmp_path / "session").rmdir()
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
        return outcome

    outcome = arun(body())
    if name in ("swap", "append_logged"):
        assert isinstance(outcome, AgentError) and outcome.code == "CHECKPOINT_CONFLICT", outcome
        assert arun(storage.get(KEY)) is None
    elif name == "put":
        assert outcome is None
        assert arun(storage.get(KEY)) == b"new"
    elif name == "delete":
        assert outcome is None  # nothing left to delete: no error
        assert arun(storage.get(KEY)) is None
    else:
        assert outcome == (None, [], None)
