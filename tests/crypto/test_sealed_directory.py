"""A directory store with cipher=: the LangGraph attacks and damage against its files.

Checkpoints (``checkpoint.json`` and its journal) and memories (``memory.json`` and its
journal): a planted plain file, a file copied from another thread or memory, a journal
record replayed at another position, a flipped bit, a truncated file, another store key.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Cipher,
    FileCheckpointer,
    FileMemory,
    Message,
    ThreadCheckpoint,
)
from framework_agents._persist import frame, scan
from framework_agents.errors import StoreIntegrityError

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
CANARY = "canary-d1r"


def cipher() -> Cipher:
    return Cipher(keys={"k1": K1}, current="k1")


HISTORY = [Message(role="user", content=f"{CANARY} {i}", id=f"m{i}") for i in range(12)]


async def threads(root: Path, c: Cipher | None = None) -> None:
    """Threads a and b, each saved four times (a document and three journal records)."""
    store = FileCheckpointer(root, cipher=c or cipher())
    for thread_id in ("a", "b"):
        for n in (3, 6, 9, 12):
            messages = HISTORY[:n]
            await store.save(ThreadCheckpoint(thread_id=thread_id, messages=messages))


async def load(root: Path, thread_id: str, c: Cipher | None = None) -> ThreadCheckpoint | None:
    return await FileCheckpointer(root, cipher=c or cipher()).load(thread_id)


def test_checkpoints_round_trip_without_plaintext(tmp_path: Path) -> None:
    arun(threads(tmp_path))
    assert (tmp_path / "threads" / "a" / "checkpoint.journal").exists()
    loaded = arun(load(tmp_path, "a"))
    assert loaded is not None and loaded.messages == HISTORY
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert CANARY.encode() not in raw


def test_planted_plain_checkpoint_refused(tmp_path: Path) -> None:
    arun(threads(tmp_path))
    plain = tmp_path / "plain"
    arun(FileCheckpointer(plain).save(ThreadCheckpoint(thread_id="b", messages=HISTORY[:1])))
    target = tmp_path / "threads" / "b" / "checkpoint.json"
    planted = (plain / "threads" / "b" / "checkpoint.json").read_bytes()
    target.write_bytes(planted)
    with pytest.raises(StoreIntegrityError, match="plain"):
        arun(load(tmp_path, "b"))
    assert target.read_bytes() == planted  # left as it is


def test_checkpoint_copied_from_another_thread_refused(tmp_path: Path) -> None:
    arun(threads(tmp_path))
    for name in ("checkpoint.json", "checkpoint.journal"):
        shutil.copy(tmp_path / "threads" / "a" / name, tmp_path / "threads" / "b" / name)
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(load(tmp_path, "b"))


def test_journal_record_replayed_at_another_position_refused(tmp_path: Path) -> None:
    arun(threads(tmp_path))
    journal = tmp_path / "threads" / "a" / "checkpoint.journal"
    found = scan(journal.read_bytes())
    header, first, *_rest = found.payloads
    # the first delta again where the second was: an older state of the thread
    journal.write_bytes(b"".join(frame(p, found.version) for p in (header, first, first)))
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(load(tmp_path, "a"))


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_checkpoint_refused(tmp_path: Path, damage: str) -> None:
    arun(threads(tmp_path))
    path = tmp_path / "threads" / "a" / "checkpoint.json"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) - 20] ^= 0x02  # a base64 digit of the sealed checkpoint
    else:
        del data[-40:]
    path.write_bytes(bytes(data))
    with pytest.raises(StoreIntegrityError):
        arun(load(tmp_path, "a"))


def test_another_store_key_refused(tmp_path: Path) -> None:
    arun(threads(tmp_path))
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(load(tmp_path, "a", Cipher(keys={"k1": K2}, current="k1")))
    with pytest.raises(StoreIntegrityError, match="does not hold"):
        arun(load(tmp_path, "a", Cipher(keys={"k2": K2}, current="k2")))


async def memories(root: Path) -> None:
    for key in ("user-a", "user-b"):
        memory = FileMemory(root / key, 100, cipher=cipher())
        for i in range(0, 12, 3):
            await memory.save(HISTORY[i : i + 3])


def test_memory_attacks_refused(tmp_path: Path) -> None:
    arun(memories(tmp_path))
    assert (tmp_path / "user-a" / "memory.json.journal").exists()
    loaded = arun(FileMemory(tmp_path / "user-a", 100, cipher=cipher()).load())
    assert loaded == HISTORY
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert CANARY.encode() not in raw
    # copied from another memory (another name): refused
    for name in ("memory.json", "memory.json.journal"):
        shutil.copy(tmp_path / "user-a" / name, tmp_path / "user-b" / name)
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(FileMemory(tmp_path / "user-b", 100, cipher=cipher()).load())
    # a journal record replayed at another position: refused
    journal = tmp_path / "user-a" / "memory.json.journal"
    found = scan(journal.read_bytes())
    header, first, *_rest = found.payloads
    journal.write_bytes(b"".join(frame(p, found.version) for p in (header, first, first)))
    with pytest.raises(StoreIntegrityError, match="does not authenticate"):
        arun(FileMemory(tmp_path / "user-a", 100, cipher=cipher()).load())
    # plain memory.json planted
    plain = tmp_path / "plain"
    arun(FileMemory(plain, 100).save(HISTORY[:1]))
    shutil.copy(plain / "memory.json", tmp_path / "user-b" / "memory.json")
    (tmp_path / "user-b" / "memory.json.journal").unlink()
    with pytest.raises(StoreIntegrityError, match="plain"):
        arun(FileMemory(tmp_path / "user-b", 100, cipher=cipher()).load())


def test_a_sealed_document_is_decoded_from_base64_once(tmp_path: Path, monkeypatch: Any) -> None:
    """Reading a sealed document decodes its base64 text once (it was twice: the key check)."""
    import binascii

    arun(threads(tmp_path))

    async def fill_memory() -> None:
        await FileMemory(tmp_path / "mem", cipher=cipher()).replace(HISTORY)  # a document

    arun(fill_memory())
    decoded: list[int] = []
    real = binascii.a2b_base64

    def counting(data: Any, **options: Any) -> bytes:
        decoded.append(len(data))
        return real(data, **options)

    monkeypatch.setattr(binascii, "a2b_base64", counting)
    loaded = arun(load(tmp_path, "a"))
    assert loaded is not None and loaded.messages == HISTORY
    assert len(decoded) == 1

    decoded.clear()
    assert arun(FileMemory(tmp_path / "mem", cipher=cipher()).load()) == HISTORY
    assert len(decoded) == 1
