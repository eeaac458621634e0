"""What the layout-v3 release wrote (``tests/fixtures/persisted/v3``) loads, forever.

Layout v3 changed the file stores only (``docs/persistence.md``, "Layout v3"), so the
corpus is the directory store of ``open_store``: two memories, two threads and two
sessions, each a document and a journal (``make_v3.py`` lists them). Every later release
must read each exactly (messages, state, pending approval, ids), refuse a flipped bit in
any of its files with the store's ``*_CORRUPT`` code leaving every file as it was, and
take new writes over it.

``tests/fixtures/persisted/make_v3.py`` wrote it (deterministic: fixed ids, timestamps
and tokens). Never regenerate it with a later release. Each test reads a copy in a
temporary directory: the corpus itself is never opened by a store.
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import (
    Agent,
    AgentError,
    FileCheckpointer,
    FileMemory,
    FunctionModel,
    LocalFileStorage,
    Message,
    SessionManager,
    tool,
)
from framework_agents.models._base import ToolSpec
from framework_agents.stores import Store, open_store

CORPUS = Path(__file__).parents[1] / "fixtures" / "persisted" / "v3" / "files"
_S1 = "storage/session/s1/scopes/agent/default/snapshots"
_S2 = "storage/session/s2/scopes/agent/default/snapshots"
#: Seeded bits flipped in each file, on top of the first and last byte's.
FLIPS = 24


def _make_v3() -> ModuleType:
    path = CORPUS.parents[1] / "make_v3.py"
    spec = importlib.util.spec_from_file_location("make_v3", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


V3 = _make_v3()
V2: dict[str, Any] = V3.V2

#: Every file of the corpus, and the store code a damaged copy of it must raise.
FILES = {
    "memory/golden/memory.json": "MEMORY_CORRUPT",
    "memory/golden/memory.json.journal": "MEMORY_CORRUPT",
    "memory/rewound/memory.json": "MEMORY_CORRUPT",
    "memory/rewound/memory.json.journal": "MEMORY_CORRUPT",
    f"{_S1}/.snapshot_latest.json.log": "SNAPSHOT_CORRUPT",
    f"{_S1}/{V2['SNAPSHOT_ID']}.json": "SNAPSHOT_CORRUPT",
    f"{_S1}/snapshot_latest.json": "SNAPSHOT_CORRUPT",
    f"{_S2}/.snapshot_latest.json.log": "SNAPSHOT_CORRUPT",
    f"{_S2}/snapshot_latest.json": "SNAPSHOT_CORRUPT",
    "threads/approval/checkpoint.journal": "CHECKPOINT_CORRUPT",
    "threads/approval/checkpoint.json": "CHECKPOINT_CORRUPT",
    "threads/rewound/checkpoint.journal": "CHECKPOINT_CORRUPT",
    "threads/rewound/checkpoint.json": "CHECKPOINT_CORRUPT",
}


def _corpus_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but the lock sidecars a store may create, by path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of the corpus: what a store opens."""
    shutil.copytree(CORPUS, tmp_path / "files")
    return tmp_path / "files"


def test_the_corpus_is_layout_v3_as_the_v3_stores_wrote_it() -> None:
    files = _corpus_files(CORPUS)
    assert sorted(files) == sorted(FILES)
    for name, data in files.items():
        if name.endswith((".journal", ".log")):  # framing 2: its header record says so
            assert b'{"journal":2,"token":"' in data[:80], name
        elif name.startswith("storage/"):
            assert data.startswith(b"\x00fa-value-3 "), name
        else:
            document = json.loads(data)
            assert document["version"] == 3, name
            assert set(document) >= {"journal", "folded", "check"}, name
    # The rewound stores' documents name the journal they folded; the others none.
    for name in ("memory/rewound/memory.json", "threads/rewound/checkpoint.json"):
        assert json.loads(files[name])["folded"] != ""
    for name in ("memory/golden/memory.json", "threads/approval/checkpoint.json"):
        assert json.loads(files[name])["folded"] == ""
    assert files[f"{_S2}/snapshot_latest.json"].split(b"\n", 1)[0].split(b" ")[2] != b"-" * 32
    assert files[f"{_S1}/snapshot_latest.json"].split(b"\n", 1)[0].split(b" ")[2] == b"-" * 32


def test_v3_memories_load(root: Path) -> None:
    async def body() -> tuple[list[Message], list[Message], list[Message]]:
        async with open_store(str(root)) as store:
            golden = await store.memory(V3.MEMORY_KEY, 100).load()
            rewound = await store.memory(V3.REWOUND, 100).load()
        direct = await FileMemory(root / "memory" / V3.MEMORY_KEY, max_messages=100).load()
        return golden, rewound, direct

    golden, rewound, direct = arun(body())
    assert golden == [*V3.history(), *V3.follow_up()]  # the document and its journal record
    assert [m.id for m in golden] == [m.id for m in [*V3.history(), *V3.follow_up()]]
    assert direct == golden
    assert rewound == V3.rewound_memory()  # the fold, then the journal after it
    assert _corpus_files(root) == _corpus_files(CORPUS)  # a load writes nothing


def test_v3_threads_load(root: Path) -> None:
    async def body() -> tuple[Any, Any, list[str]]:
        async with open_store(str(root)) as store:
            cp = store.checkpointer
            return await cp.load(V3.THREAD), await cp.load(V3.REWOUND), await cp.list_threads()

    paused, rewound, threads = arun(body())
    _, expected = V2["checkpoints"](V3.history())
    assert sorted(threads) == sorted([V3.THREAD, V3.REWOUND])
    assert paused == expected  # every field: messages, state, pending approval, app data
    assert paused.pending.name == "publish" and paused.pending.args == {"doc": "d1", "to": "blog"}
    assert paused.pending.id == "call-p" and paused.interrupt_id == V2["INTERRUPT_ID"]
    assert paused.pending_turn == V2["ask"]()[1]
    assert paused.finished is False and paused.decisions == {}
    assert rewound == V3.rewound_checkpoint()
    assert _corpus_files(root) == _corpus_files(CORPUS)


def test_v3_sessions_load(root: Path) -> None:
    async def body() -> tuple[Any, list[str], Any, Any]:
        async with open_store(str(root)) as store:
            session = SessionManager(V3.SESSION, store.storage)
            latest = await session.load_latest()
            ids = await session.list_snapshot_ids()
            kept = await session.restore_snapshot(V2["SNAPSHOT_ID"])
            other = await SessionManager(V3.SESSION_REWOUND, store.storage).load_latest()
            return latest, ids, kept, other

    latest, ids, kept, other = arun(body())
    _, second, expected_kept = V2["snapshots"](V3.history())
    assert latest is not None
    assert latest.snapshot_id == V2["LATEST_ID"] and latest.created_at == second.created_at
    assert latest.data == second.data  # messages, state, system prompt: the log applied
    assert latest.app_data == second.app_data
    assert ids == [V2["SNAPSHOT_ID"]]
    assert kept.data == expected_kept.data and kept.created_at == V2["WHEN"]
    expected_other = V3.rewound_snapshot()
    assert other is not None
    assert other.snapshot_id == expected_other.snapshot_id
    assert other.created_at == expected_other.created_at
    assert other.data == expected_other.data and other.app_data == expected_other.app_data
    assert _corpus_files(root) == _corpus_files(CORPUS)


def _loader(root: Path, name: str) -> Callable[[], Coroutine[Any, Any, Any]]:
    """The load that reads the file ``name`` of the corpus copy at ``root``."""
    parts = name.split("/")
    if parts[0] == "memory":
        return lambda: FileMemory(root / "memory" / parts[1], max_messages=100).load()
    if parts[0] == "threads":
        return lambda: FileCheckpointer(root).load(parts[1])
    session = SessionManager(parts[2], LocalFileStorage(root / "storage"))
    if parts[-1].startswith(V2["SNAPSHOT_ID"]):
        return lambda: session.restore_snapshot(V2["SNAPSHOT_ID"])
    return lambda: SessionManager(parts[2], LocalFileStorage(root / "storage")).load_latest()


def _bits(name: str, size: int) -> list[int]:
    rng = random.Random(name)
    picked = {0, 7, size * 8 - 8, size * 8 - 1}  # the first and the last byte
    picked.update(rng.randrange(size * 8) for _ in range(FLIPS))
    return sorted(picked)


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_flipped_bit_in_each_file_is_corrupt_and_leaves_every_file(root: Path, name: str) -> None:
    target = root / name
    original = target.read_bytes()
    load = _loader(root, name)
    arun(load())  # the intact copy loads (and creates its lock files before the flips)
    for bit in _bits(name, len(original)):
        flipped = bytearray(original)
        flipped[bit // 8] ^= 1 << (bit % 8)
        target.write_bytes(flipped)
        before = _corpus_files(root)
        with pytest.raises(AgentError) as info:
            arun(load())
        assert info.value.code == FILES[name], f"bit {bit} of {name}: {info.value}"
        assert _corpus_files(root) == before, f"bit {bit} of {name}: a file changed"
    target.write_bytes(original)
    assert _corpus_files(root) == _corpus_files(CORPUS)


def _publishing_agent(ran: list[dict[str, Any]]) -> Agent:
    @tool(requires_approval=True)
    def publish(doc: str, to: str) -> str:
        """Publish ``doc`` to ``to``."""
        ran.append({"doc": doc, "to": to})
        return f"published {doc} to {to}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        return f"done: {messages[-1].text}"

    return Agent(FunctionModel(model), tools=[publish])


def test_v3_stores_take_new_writes_over_the_corpus(root: Path) -> None:
    """The pending approval resumes as shown; memory and session saves extend the corpus."""
    ran: list[dict[str, Any]] = []
    extra = Message("user", "after the upgrade", id="v3-new")

    async def write(store: Store) -> str:
        approved = {V2["INTERRUPT_ID"]: "approve"}
        result = await _publishing_agent(ran).resume(
            V3.THREAD, approved, checkpointer=store.checkpointer, reissue=False
        )
        for key in (V3.MEMORY_KEY, V3.REWOUND):
            memory = store.memory(key, 100)
            await memory.save([*await memory.load(), extra])
        for sid in (V3.SESSION, V3.SESSION_REWOUND):
            session = SessionManager(sid, store.storage)
            latest = some(await session.load_latest())
            messages = [*(latest.data.messages or []), extra]
            data = latest.data.model_copy(update={"messages": messages})
            await session.save_latest(latest.model_copy(update={"data": data}))
        return result.text

    async def read(store: Store) -> list[Any]:
        return [
            await store.checkpointer.load(V3.THREAD),
            await store.memory(V3.MEMORY_KEY, 100).load(),
            await store.memory(V3.REWOUND, 100).load(),
            await SessionManager(V3.SESSION, store.storage).load_latest(),
            await SessionManager(V3.SESSION_REWOUND, store.storage).load_latest(),
        ]

    async def body() -> tuple[str, list[Any]]:
        async with open_store(str(root)) as store:
            text = await write(store)
        async with open_store(str(root)) as store:
            return text, await read(store)

    text, (thread, golden, rewound, s1, s2) = arun(body())
    assert ran == [{"doc": "d1", "to": "blog"}]  # exactly the call that was shown
    assert text == "done: published d1 to blog"
    assert thread.pending is None and thread.finished is True
    assert thread.messages[: len(V3.history()) + 1] == [*V3.history(), V2["ask"]()[0]]
    assert golden == [*V3.history(), *V3.follow_up(), extra]
    assert rewound == [*V3.rewound_memory(), extra]
    assert s1.data.messages == [*V3.history(), *V3.follow_up(), extra]
    assert s2.data.messages == [*V3.rewound_memory(), extra]
