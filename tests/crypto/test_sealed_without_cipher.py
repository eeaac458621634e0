"""A sealed thread or session read without the cipher says so; a plain thread that merely holds the
envelope's prefix in its text is still plain."""

from __future__ import annotations

from pathlib import Path

import pytest

from async_helper import arun
from framework_agents import Cipher, Message, ThreadCheckpoint, open_store
from framework_agents.errors import StoreIntegrityError
from framework_agents.sessions import SessionManager, Snapshot, SnapshotData

pytest.importorskip("cryptography", reason="needs the crypto extra (cryptography)")

LOOKALIKE = 'fae1.AAAA" {"sealed": "fae1.'


def _cipher() -> Cipher:
    return Cipher(keys={"k1": bytes(range(32))}, current="k1")


def _thread() -> ThreadCheckpoint:
    return ThreadCheckpoint(
        thread_id="t",
        messages=[Message("user", LOOKALIKE, id="u1"), Message("assistant", "ok", id="a1")],
        state={"sealed": LOOKALIKE},
    )


@pytest.fixture(params=["directory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "store") if request.param == "directory" else f"sqlite:///{tmp_path}/s.db"


def test_a_sealed_thread_opened_without_the_cipher_is_store_integrity(url: str) -> None:
    async def run() -> None:
        async with open_store(url, cipher=_cipher()) as sealed:
            await sealed.checkpointer.save(_thread())
        async with open_store(url) as plain:
            with pytest.raises(StoreIntegrityError, match="opened without cipher="):
                await plain.checkpointer.load("t")
        async with open_store(url, cipher=_cipher()) as sealed:
            loaded = await sealed.checkpointer.load("t")
            assert loaded is not None and loaded.state == {"sealed": LOOKALIKE}

    arun(run())


def test_a_plain_thread_holding_the_prefix_stays_plain(url: str) -> None:
    async def run() -> None:
        async with open_store(url) as plain:
            await plain.checkpointer.save(_thread())
        async with open_store(url) as plain:
            loaded = await plain.checkpointer.load("t")
            assert loaded is not None
            assert loaded.messages[0].text == LOOKALIKE
            assert loaded.state == {"sealed": LOOKALIKE}

    arun(run())


def test_a_sealed_session_opened_without_the_cipher_is_store_integrity(url: str) -> None:
    first = [Message("user", "hello", id="u1")]
    snapshot = Snapshot(SnapshotData(messages=first))

    async def run() -> None:
        async with open_store(url, cipher=_cipher()) as sealed:
            manager = SessionManager("s1", sealed.storage)
            await manager.save_latest(snapshot)
            grown = [*first, Message("assistant", "hi", id="a1")]
            await manager.save_latest(Snapshot(SnapshotData(messages=grown)))  # a log record
        async with open_store(url) as plain:
            with pytest.raises(StoreIntegrityError, match="opened without cipher="):
                await SessionManager("s1", plain.storage).load_latest()
        async with open_store(url, cipher=_cipher()) as sealed:
            loaded = await SessionManager("s1", sealed.storage).load_latest()
            assert loaded is not None and loaded.data.messages == grown

    arun(run())


def test_a_sealed_memory_opened_without_the_cipher_is_store_integrity(url: str) -> None:
    turn = [Message("user", "hello", id="u1"), Message("assistant", "hi", id="a1")]
    grown = [*turn, Message("user", "again", id="u2")]

    async def run() -> None:
        async with open_store(url, cipher=_cipher()) as sealed:
            await sealed.memory("m").save(turn)
            await sealed.memory("m").save(grown)  # appended (a journal record on disk)
        async with open_store(url) as plain:
            with pytest.raises(StoreIntegrityError, match="opened without cipher="):
                await plain.memory("m").load()
        async with open_store(url, cipher=_cipher()) as sealed:
            assert await sealed.memory("m").load() == grown

    arun(run())
