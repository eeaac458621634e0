"""The directory backend forgets for good: no byte of a forgotten record stays in any file.

A canary string goes everywhere a record can carry it (text, revisions, metadata, key,
the vector of an embedder, an extraction job's payload and the record it made), then it
is forgotten by ``forget``, ``forget_namespace``, ``prune`` or expiry, and every byte of
every file under the store's directory is scanned for it (and for its base64 forms and
its vector, which the files hold encoded). A scan before the forgetting finds each of
them, so the scan is known to see what it looks for. A pending job is not a record:
only ``forget_namespace`` drops it, so the other cases complete theirs first (its record
is then forgotten with the others, and no copy of its payload may remain).

The bank's clock is moved (``bank._now``, the one place it is read) instead of waiting:
records are written "days" apart, and expire, without a sleep.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from framework_agents.bank import MemoryBank
from framework_agents.bank import bank as bank_module
from framework_agents.bank._backend import Job
from framework_agents.bank._files import FileBankBackend
from framework_agents.errors import AgentError
from framework_agents.stores import open_store

CANARY = "canary-3f9d2a7c-the-owl-flies-at-midnight"
_DAY = 86_400_000_000  # microseconds
_CANARY_VECTOR = [1.0, 2.0, 3.0, 4.0]
_OTHER_VECTOR = [4.0, -3.0, 2.0, -1.0]  # orthogonal: no match by meaning


def _embed(texts: list[str]) -> list[list[float]]:
    """An embedder that gives every text holding the canary one recognisable vector."""
    return [_CANARY_VECTOR if CANARY in t else _OTHER_VECTOR for t in texts]


def _stored_vector(vector: list[float]) -> bytes:
    """The bytes the bank stores for ``vector``: the unit vector, float32 little-endian."""
    array = np.asarray([vector], dtype=np.float32)
    unit = array / np.clip(np.linalg.norm(array, axis=1, keepdims=True), 1e-12, None)
    return bytes(unit[0].astype("<f4").tobytes())


def _base64_forms(data: bytes) -> list[bytes]:
    """What ``data`` looks like inside base64 at each of the three alignments."""
    # The groups of four characters that only ``data``'s bytes decide: not the first when
    # other bytes come before it in the group, never the last (the bytes after it).
    return [base64.b64encode(b"\0" * pad + data)[4 if pad else 0 : -4] for pad in (0, 1, 2)]


def _patterns() -> dict[str, list[bytes]]:
    """Each thing the scan looks for, in each of the forms a file may hold it."""
    canary = CANARY.encode()
    return {
        "the canary": [canary],
        "the canary in base64": _base64_forms(canary),
        "the canary's vector": [base64.b64encode(_stored_vector(_CANARY_VECTOR))],
    }


def _scan(root: Path, forms: list[bytes]) -> list[str]:
    """The files under ``root`` whose bytes (or names) hold any of ``forms``."""
    hits = []
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root)).encode()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        for form in forms:
            if form in name:
                hits.append(f"{path} (its name)")
            if form in data:
                hits.append(str(path))
    return hits


class _Clock:
    """The bank's clock, ``offset`` microseconds ahead of the real one."""

    def __init__(self, real: Callable[[], int]) -> None:
        self.real = real
        self.offset = 0

    def __call__(self) -> int:
        return self.real() + self.offset


@pytest.mark.parametrize("how", ["forget", "forget_namespace", "prune", "ttl"])
def test_forgotten_canary_leaves_no_byte_in_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    root = tmp_path / "store"
    clock = _Clock(bank_module._now)
    monkeypatch.setattr(bank_module, "_now", clock)
    ns = ("user-1", "secrets")
    neighbours = {"the weather is mild today": ("user-1",), "buy more bread": ("user-2",)}

    async def main() -> None:
        async with open_store(str(root)) as store:
            bank = store.bank(embedder=_embed)
            month = 30 * 86_400
            key = f"key-{CANARY}"
            first = await bank.remember(
                f"{CANARY} version one", namespace=ns, key=key, metadata={"why": CANARY}, ttl=month
            )
            await bank.update(first.id, text=f"{CANARY} version one, corrected")
            second = await bank.remember(f"{CANARY} version two", namespace=ns, key=key, ttl=month)
            await bank.update(second.id, metadata={"note": f"{CANARY} again"})
            await bank.update(second.id, text=f"{CANARY} version two, final")
            closed = await bank.get(first.id)
            assert closed is not None and closed.valid_to == second.valid_from
            payload = json.dumps([{"role": "user", "text": f"remember {CANARY}"}]).encode()
            await bank.add_job(Job("job-done", ns, payload))
            row = bank.new_row(f"{CANARY} extracted", namespace=ns, ttl=month)
            made = await bank.complete_job("job-done", [row])
            assert made is not None
            canary_ids = [first.id, second.id, made[0].id]

            clock.offset = 2 * _DAY  # what follows is written two days later
            for text, where in neighbours.items():
                await bank.remember(text, namespace=where)
            if how == "forget_namespace":
                await bank.add_job(Job("job-pending", ns, payload))
            hits = await bank.search(CANARY, namespace=("user-1",), k=10, include_past=True)
            assert {h.record.id for h in hits} == set(canary_ids)
            for name, forms in _patterns().items():
                if name == "the canary in base64" and how != "forget_namespace":
                    continue  # only a pending job's payload holds it (base64)
                assert await asyncio.to_thread(_scan, root, forms), f"{name} not found before"

            if how == "forget":
                for record_id in canary_ids:
                    assert await bank.forget(record_id)
            elif how == "forget_namespace":
                assert await bank.forget_namespace(ns) == 3
                assert await bank.pending_jobs() == []
            elif how == "prune":
                assert await bank.prune(older_than=timedelta(days=1)) == 3
            else:
                clock.offset = 40 * _DAY  # past every canary record's ttl
                assert await bank.search("weather", namespace=("user-1",))  # sweeps
            for record_id in canary_ids:
                assert await bank.get(record_id) is None
            assert await bank.search(CANARY, namespace=ns, include_past=True) == []
            kept = {r.text for r in await bank.list(("user-1",))}
            assert kept == {"the weather is mild today"}

    asyncio.run(main())
    for name, forms in _patterns().items():
        assert _scan(root, forms) == [], f"{name} survived {how}"
    for text in neighbours:
        assert _scan(root, [text.encode()]), f"the kept record {text!r} is missing"


def test_row_whose_id_names_no_file_leaves_the_log_whole(tmp_path: Path) -> None:
    """A row the backend cannot name a file for fails before the change log grows."""

    async def main() -> None:
        backend = FileBankBackend(tmp_path)
        async with MemoryBank.over(backend) as bank:
            first = await bank.remember("before", namespace=("u",))
            good = bank.new_row("odd", namespace=("u",))
            with pytest.raises(AgentError) as info:
                await backend.insert([replace(good, id="x" * 40)])
            assert info.value.code == "STORAGE_IO"
            last = await bank.remember("after", namespace=("u",))
        async with MemoryBank(tmp_path) as fresh:
            assert [r.id for r in await fresh.list(("u",))] == [first.id, last.id]

    asyncio.run(main())
