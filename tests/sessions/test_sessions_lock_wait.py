"""LocalFileStorage's lock waits: a cancel ends them, ``lock_timeout`` bounds them.

Another process holds a key's sidecar lock (``<dir>/.<name>.lock``) here
(``processes.flock_held``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path

import pytest

from async_helper import arun
from framework_agents import LocalFileStorage
from framework_agents.errors import InvalidArgumentError, LockTimeoutError
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
