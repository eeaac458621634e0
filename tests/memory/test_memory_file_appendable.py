"""FileMemory as an AppendableMemory: ``revision``, ``unchanged`` and ``save_if``.

``save_if`` appends only while the files are as this instance last loaded or wrote them;
any other writer (another instance, another process) makes it refuse, writing nothing.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import (
    Agent,
    FileMemory,
    FunctionModel,
    Message,
    NullConversationManager,
    ToolCall,
)
from framework_agents.memory import AppendableMemory
from framework_agents.memory import file as file_module


def _turn(i: int) -> list[Message]:
    return [Message("user", f"q{i}", id=f"q{i}"), Message("assistant", f"a{i}", id=f"a{i}")]


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_it_is_an_appendable_memory(tmp_path: Path) -> None:
    assert isinstance(FileMemory(tmp_path), AppendableMemory)


def test_save_if_appends_while_nobody_else_wrote(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, max_messages=100)
        assert await memory.load() == []
        revision = memory.revision
        assert await memory.unchanged(revision)
        done = await memory.save_if(_turn(0), revision=revision)
        assert done is not None and done.dropped == 0 and done.revision != revision
        assert await memory.unchanged(done.revision) and not await memory.unchanged(revision)
        again = await memory.save_if(_turn(1), revision=done.revision)
        assert again is not None
        assert _ids(await FileMemory(tmp_path, max_messages=100).load()) == [
            "q0", "a0", "q1", "a1"
        ]  # fmt: skip

    asyncio.run(main())


def test_a_write_by_another_instance_makes_save_if_refuse_and_write_nothing(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        memory, other = FileMemory(tmp_path, 100), FileMemory(tmp_path, 100)
        await memory.save(_turn(0))
        revision = memory.revision
        assert await memory.unchanged(revision)
        await other.save([Message("user", "elsewhere", id="x")])
        assert not await memory.unchanged(revision)
        assert await memory.save_if(_turn(1), revision=revision) is None
        assert _ids(await other.load()) == ["q0", "a0", "x"]  # nothing written
        await memory.load()  # sees the other write: a new revision to append under
        assert await memory.save_if(_turn(1), revision=revision) is None  # still stale
        assert await memory.save_if(_turn(1), revision=memory.revision) is not None
        assert _ids(await other.load()) == ["q0", "a0", "x", "q1", "a1"]

    asyncio.run(main())


def test_a_write_by_another_process_is_seen(tmp_path: Path) -> None:
    memory = FileMemory(tmp_path, 100)
    asyncio.run(memory.save(_turn(0)))
    revision = memory.revision
    script = textwrap.dedent(
        f"""
        import asyncio
        from framework_agents import FileMemory, Message
        asyncio.run(FileMemory({str(tmp_path)!r}, 100).save([Message("user", "p", id="p")]))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)

    async def main() -> None:
        assert not await memory.unchanged(revision)
        assert await memory.save_if(_turn(1), revision=revision) is None

    asyncio.run(main())


def test_an_id_stored_already_is_refused_not_appended_twice(tmp_path: Path) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, 100)
        await memory.save(_turn(0))
        assert await memory.save_if(_turn(0), revision=memory.revision) is None
        twice = [*_turn(1), _turn(1)[0]]  # one id twice: not the history as given
        assert await memory.save_if(twice, revision=memory.revision) is None
        assert _ids(await memory.load()) == ["q0", "a0"]

    asyncio.run(main())


def test_no_revision_holds_before_the_first_look(tmp_path: Path) -> None:
    async def main() -> None:
        await FileMemory(tmp_path, 100).save(_turn(0))
        fresh = FileMemory(tmp_path, 100)
        assert not await fresh.unchanged(fresh.revision)
        assert await fresh.save_if(_turn(1), revision=fresh.revision) is None

    asyncio.run(main())


@pytest.mark.parametrize("fold_often", [False, True], ids=["journal", "folds"])
def test_dropped_is_what_a_load_no_longer_returns(fold_often: bool) -> None:
    # The view the caller holds, grown by what it appended and cut by ``dropped``, is
    # always exactly what a load returns: windows that cut between tool groups included,
    # and saves that fold (publish a windowed document) instead of appending a record.
    with mock.patch.object(file_module, "FOLD_MIN_BYTES", 0 if fold_often else 64 << 10):
        _check_dropped()


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 8),
    st.lists(st.tuples(st.integers(1, 3), st.booleans()), min_size=1, max_size=12),
)
def _check_dropped(window: int, saves: list[tuple[int, bool]]) -> None:
    async def main(directory: Path) -> None:
        memory = FileMemory(directory, window)
        view = await memory.load()
        revision = memory.revision
        for n, (count, with_call) in enumerate(saves):
            new: list[Message] = []
            for k in range(count):
                if with_call and k == 0:
                    call = ToolCall(f"c{n}", "f", {})
                    new += [
                        Message("assistant", "", tool_calls=[call], id=f"c{n}"),
                        Message("tool", "r", tool_call_id=f"c{n}", name="f", id=f"r{n}"),
                    ]
                new.append(Message("user", f"{n}.{k}", id=f"m{n}.{k}"))
            done = await memory.save_if(new, revision=revision)
            assert done is not None
            view = [*view, *new][done.dropped :]
            revision = done.revision
            assert _ids(view) == _ids(await FileMemory(directory, window).load())
        if file_module.FOLD_MIN_BYTES == 0 and len(saves) > 2:
            assert not (directory / "memory.json.journal").exists() or memory._folds > 1

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(main(Path(directory)))


@pytest.mark.parametrize("window", [3, 1000])
def test_an_agent_commits_a_turn_by_appending_it(tmp_path: Path, window: int) -> None:
    async def main() -> None:
        memory = FileMemory(tmp_path, window)
        agent = Agent(
            FunctionModel(lambda messages, tools: f"answer {len(messages)}"),
            memory=memory,
            conversation_manager=NullConversationManager(),
        )
        await agent.run("first")
        journal = tmp_path / "memory.json.journal"
        for i in range(4):
            before = journal.stat().st_size if journal.exists() else 0
            await agent.run(f"prompt {i}")
            grew = journal.stat().st_size - before if journal.exists() else -1
            # One record of the two new messages (a fold, when the window asks, rewrites).
            assert 0 < grew < 1000 or window == 3, grew
        stored = _ids(await FileMemory(tmp_path, window).load())
        assert stored and stored == _ids(list(agent.messages))[-len(stored) :]

    asyncio.run(main())


def test_a_commit_keeps_only_what_a_load_can_see(tmp_path: Path) -> None:
    # Entries the window cut stay in the file until a fold; a commit whose base is the
    # loaded view must not take them for another writer's appends and bring them back.
    async def body() -> None:
        memory = FileMemory(tmp_path, 2)
        for i in range(6):
            await memory.save([Message("user", f"m{i}", id=f"m{i}")])
        view = await FileMemory(tmp_path, 2).load()
        assert [m.id for m in view] == ["m4", "m5"]
        other = FileMemory(tmp_path, 2)
        await other.save([Message("user", "foreign", id="f")])  # appended by someone else
        await memory.commit([*view, Message("user", "mine", id="x")], base={m.id for m in view})
        assert [m.id for m in await FileMemory(tmp_path, 2).load()] == ["x", "f"]

    asyncio.run(body())
