"""LocalFileStorage: an OSError is STORAGE_IO naming the key and the root; nothing is torn."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from framework_agents import LocalFileStorage, StorageIOError


def _fail(code: int) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize("syscall", ["write", "fsync", "replace"])
@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
def test_a_failed_put_is_storage_io_and_keeps_the_old_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syscall: str, code: int
) -> None:
    storage = LocalFileStorage(tmp_path)
    asyncio.run(storage.put("a/b.json", b"old"))
    with monkeypatch.context() as patch:
        patch.setattr(os, syscall, _fail(code))
        with pytest.raises(StorageIOError) as info:
            asyncio.run(storage.put("a/b.json", b"new"))
    err = info.value
    assert err.code == "STORAGE_IO" and err.errno == code
    assert "a/b.json" in str(err) and str(tmp_path) in str(err)
    assert isinstance(err.__cause__, OSError)
    value = asyncio.run(storage.get("a/b.json"))
    assert value == (b"new" if err.may_have_landed else b"old")
    assert [n for n in os.listdir(tmp_path / "a") if n.endswith(".tmp")] == []


def test_an_error_after_the_rename_says_the_put_may_have_landed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = LocalFileStorage(tmp_path)
    asyncio.run(storage.put("k.json", b"old"))
    real = os.fsync
    calls = [0]

    def second_fails(fd: int) -> None:  # the file's fsync passes, the directory's fails
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", second_fails)
        with pytest.raises(StorageIOError) as info:
            asyncio.run(storage.put("k.json", b"new"))
    assert info.value.may_have_landed
    assert asyncio.run(storage.get("k.json")) == b"new"
