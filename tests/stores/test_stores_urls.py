"""The traps of ``open_store`` URLs (issue 34): a typo of a scheme, ``~``, ``file://`` in
one place and not another, an empty Redis prefix, a Redis that is down or has no such
database, SQLite files readable by others."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path
from typing import Any, cast

import pytest

from framework_agents import FileCheckpointer
from framework_agents.errors import AgentError
from framework_agents.server import resolve_store
from framework_agents.stores import RedisStorage, SqliteStorage, open_store


def _code(call: object) -> str:
    try:
        if asyncio.iscoroutine(call):
            asyncio.run(call)
        else:
            call()  # type: ignore[operator]
    except AgentError as exc:
        return exc.code
    return "no error"


@pytest.mark.parametrize(
    "url", ["memory", "sqlite", "postgresql", "postgres", "redis", "rediss", "file", "MEMORY"]
)
def test_a_bare_scheme_name_is_refused_naming_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``open_store("memory")`` (for ``memory:``) made a ``./memory`` directory store."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AgentError) as info:
        open_store(url)
    assert info.value.code == "INVALID_ARGUMENT"
    assert f"./{url}" in info.value.message  # how to mean the directory
    assert not (tmp_path / url).exists()


def test_a_path_object_or_a_dotted_name_is_still_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for where in (Path("memory"), "./memory", "memory/sub"):
        store = open_store(where)
        assert isinstance(store.checkpointer, FileCheckpointer)
        asyncio.run(store.close())


def test_a_tilde_is_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``open_store("~/agents")`` made a directory literally named ``~``."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)

    async def body(url: str | Path) -> None:
        async with open_store(url) as store:
            await store.storage.put("a", b"1")

    asyncio.run(body("~/agents"))
    asyncio.run(body(Path("~/files")))
    asyncio.run(body("sqlite:///~/agents.db"))
    assert not (cwd / "~").exists()
    assert (home / "agents" / "storage").is_dir() and (home / "files" / "storage").is_dir()
    assert (home / "agents.db").is_file()


def test_a_file_url_is_a_directory_in_open_store_and_the_server(tmp_path: Path) -> None:
    """``open_store("file://...")`` was refused while ``serve --store file://...`` took it."""

    async def body() -> None:
        async with open_store(f"file://{tmp_path}/a%20b") as store:
            assert isinstance(store.checkpointer, FileCheckpointer)
            await store.storage.put("k", b"1")
        served = resolve_store(f"file://localhost{tmp_path}/a%20b")
        try:
            assert await served.storage.get("k") == b"1"
        finally:
            await served.close()

    asyncio.run(body())
    assert (tmp_path / "a b" / "storage").is_dir()


@pytest.mark.parametrize("url", ["file://host/dir", "file:relative", "file://"])
def test_a_file_url_names_a_local_absolute_path_or_is_refused(url: str) -> None:
    assert _code(lambda: open_store(url)) == "INVALID_ARGUMENT"
    assert _code(lambda: resolve_store(url)) == "INVALID_ARGUMENT"


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0?prefix=", "redis://h/0?prefix=&x=1"])
def test_an_empty_redis_prefix_is_refused(url: str) -> None:
    """An empty prefix wrote unprefixed keys into a shared database."""
    assert _code(lambda: open_store(url)) == "INVALID_ARGUMENT"
    assert _code(lambda: RedisStorage("redis://127.0.0.1:6379/0", prefix="")) == "INVALID_ARGUMENT"


@pytest.mark.parametrize("url", ["redis://127.0.0.1/x", "redis://127.0.0.1/1/2", "redis://h/-1"])
def test_a_malformed_redis_database_is_refused_when_opened(url: str) -> None:
    """redis-py read ``/x`` as database 0 and ``/1/2`` as database 12."""
    assert _code(lambda: open_store(url)) == "INVALID_ARGUMENT"


def test_a_redis_url_option_the_driver_lacks_is_refused_when_opened() -> None:
    """redis-py handed ``?prefx=`` to its connection: a raw TypeError at the first command."""
    pytest.importorskip("redis")
    assert _code(lambda: open_store("redis://127.0.0.1:1/0?prefx=app:")) == "INVALID_ARGUMENT"
    url = "redis://127.0.0.1:1/0?prefix=app:"  # open_store's parameter, not the class's
    assert _code(lambda: RedisStorage(url)) == "INVALID_ARGUMENT"
    decoding = "redis://127.0.0.1:1/0?decode_responses=true"  # every read a TypeError
    assert _code(lambda: open_store(decoding)) == "INVALID_ARGUMENT"
    store = open_store("redis://127.0.0.1:1/0?socket_timeout=2&client_name=a&prefix=app:")
    asyncio.run(store.close())  # the driver's own options are still taken


@pytest.mark.redis
def test_a_database_the_redis_server_lacks_is_backend_unavailable(redis_prefix: str) -> None:
    from stores_backends import REDIS_URL

    base = REDIS_URL.rsplit("/", 1)[0]

    async def body() -> AgentError:
        async with open_store(f"{base}/99?prefix={redis_prefix}") as store:
            with pytest.raises(AgentError) as info:
                await store.storage.get("a")
            return info.value

    error = asyncio.run(body())
    assert error.code == "BACKEND_UNAVAILABLE"
    assert "99" in error.message and "database" in error.message


def test_a_redis_that_is_down_logs_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Taking a thread lock logged the failed clean-up with its whole traceback first."""
    pytest.importorskip("redis")

    async def body() -> str:
        async with open_store("redis://127.0.0.1:1/0") as store:
            try:
                async with cast(Any, store.checkpointer).thread_lock("t"):
                    pass
            except AgentError as exc:
                return exc.code
        return "no error"

    with caplog.at_level(logging.DEBUG):
        assert asyncio.run(body()) == "BACKEND_UNAVAILABLE"
    assert [r for r in caplog.records if r.exc_info] == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_sqlite_files_are_owner_only_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "sub" / "agents.db"

    async def body() -> None:
        storage = SqliteStorage(path)
        try:
            await storage.put("a", b"1")
            modes = {
                p.name: stat.S_IMODE(p.stat().st_mode)
                for p in path.parent.iterdir()
                if p.name.startswith("agents.db")
            }
        finally:
            await storage.close()
        assert {"agents.db", "agents.db-wal", "agents.db-shm"} <= set(modes)
        assert set(modes.values()) == {0o600}, modes

    old = os.umask(umask)
    try:
        asyncio.run(body())
    finally:
        os.umask(old)
