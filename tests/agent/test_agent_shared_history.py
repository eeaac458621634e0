"""The agent and an AppendableMemory share the history: a turn costs the turn.

While nothing was written since the revision the agent's last commit left, a run starts
from the agent's own messages (no load) and commits only its new ones (``save_if``).
Whatever the path, the model must see exactly what the memory holds, plus the prompt.
Both memories that can: ``InMemoryMemory`` and ``FileMemory`` (whose other writers are
other instances on the same directory, as another process would be).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import (
    Agent,
    FileCheckpointer,
    FileMemory,
    FunctionModel,
    InMemoryMemory,
    Message,
    NullConversationManager,
    ToolSpec,
)
from framework_agents import history as history_module
from framework_agents.memory import Appended
from history_checks import count_well_formed_checks


class _Counts:
    """Counts loads, appends and replaces of the memory it is mixed into."""

    loads = appends = replaces = 0

    async def load(self) -> list[Message]:
        self.loads += 1
        loaded: list[Message] = await super().load()  # type: ignore[misc]
        return loaded

    async def save_if(self, messages: Sequence[Message], *, revision: int) -> Appended | None:
        self.appends += 1
        done: Appended | None = await super().save_if(messages, revision=revision)  # type: ignore[misc]
        return done

    async def replace(self, messages: Sequence[Message]) -> None:
        self.replaces += 1
        await super().replace(messages)  # type: ignore[misc]


class CountingMemory(_Counts, InMemoryMemory):
    """An InMemoryMemory that counts."""


class CountingFileMemory(_Counts, FileMemory):
    """A FileMemory that counts."""


Counting = CountingMemory | CountingFileMemory
#: (max_messages, directory) -> the agent's memory and another writer of the same history.
Pair = Callable[[int, Path], tuple[Counting, Any]]


def _in_memory(window: int, directory: Path) -> tuple[Counting, Any]:
    memory = CountingMemory(window)
    return memory, memory


def _files(window: int, directory: Path) -> tuple[Counting, Any]:
    return CountingFileMemory(directory, window), FileMemory(directory, window)


PAIRS = pytest.mark.parametrize("pair", [_in_memory, _files], ids=["in_memory", "files"])


def _echo_model(seen: list[list[str]]) -> FunctionModel:
    async def answer(messages: list[Message], tools: list[ToolSpec]) -> Message:
        seen.append([m.text for m in messages])
        return Message("assistant", f"answer {len(seen)}")

    return FunctionModel(answer)


@PAIRS
def test_runs_after_the_first_neither_load_nor_rewrite_the_history(
    pair: Pair, tmp_path: Path
) -> None:
    async def scenario() -> None:
        memory, _ = pair(1000, tmp_path)
        seen: list[list[str]] = []
        agent = Agent(_echo_model(seen), memory=memory)
        for i in range(5):
            await agent.run(f"q{i}")
        assert memory.loads == 1 and memory.appends == 5 and memory.replaces == 0
        assert seen[-1] == ["q0", "answer 1", "q1", "answer 2", "q2", "answer 3", "q3",
                            "answer 4", "q4"]  # fmt: skip
        assert [m.text for m in await memory.load()] == [m.text for m in agent.messages]

    asyncio.run(scenario())


@PAIRS
def test_a_write_by_someone_else_is_seen_by_the_next_run(pair: Pair, tmp_path: Path) -> None:
    async def scenario() -> None:
        memory, other = pair(1000, tmp_path)
        seen: list[list[str]] = []
        agent = Agent(_echo_model(seen), memory=memory)
        await agent.run("q0")
        await other.save([Message("user", "from elsewhere")])
        await agent.run("q1")
        assert seen[-1] == ["q0", "answer 1", "from elsewhere", "q1"]
        await agent.run("q2")  # back on the fast path after one full commit
        assert seen[-1] == ["q0", "answer 1", "from elsewhere", "q1", "answer 2", "q2"]
        await other.clear()
        await agent.run("q3")
        assert seen[-1] == ["q3"]
        assert [m.text for m in await other.load()] == ["q3", "answer 4"]

    asyncio.run(scenario())


def test_an_edit_is_what_the_next_run_sends() -> None:
    async def scenario() -> None:
        memory = CountingMemory(max_messages=1000)
        seen: list[list[str]] = []
        agent = Agent(_echo_model(seen), memory=memory)
        await agent.run("q0")
        await agent.edit_message(0, "q0 edited")
        await agent.run("q1")
        assert seen[-1] == ["q0 edited", "answer 1", "q1"]

    asyncio.run(scenario())


@PAIRS
def test_a_window_keeps_agent_memory_and_model_in_step(pair: Pair, tmp_path: Path) -> None:
    async def scenario() -> None:
        memory, _ = pair(4, tmp_path)
        seen: list[list[str]] = []
        agent = Agent(_echo_model(seen), memory=memory)
        for i in range(6):
            result = await agent.run(f"q{i}")
            assert [m.text for m in result.new_messages] == [f"q{i}", f"answer {i + 1}"]
        # The model saw the memory's window and the prompt, every time.
        assert seen[-1] == ["q3", "answer 4", "q4", "answer 5", "q5"]
        stored = [m.text for m in await memory.load()]
        assert stored == ["q4", "answer 5", "q5", "answer 6"]
        assert memory.replaces == 0

    asyncio.run(scenario())


_steps = st.lists(
    st.tuples(
        st.sampled_from(["run", "run", "clear", "save", "replace", "edit"]), st.integers(0, 3)
    ),
    min_size=1,
    max_size=14,
)


@pytest.mark.parametrize(
    ("pair", "examples"), [(_in_memory, 120), (_files, 60)], ids=["in_memory", "files"]
)
def test_the_model_always_sees_what_the_memory_holds(pair: Pair, examples: int) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(_steps, st.integers(2, 9))
    def check(steps: list[tuple[str, int]], window: int) -> None:
        with tempfile.TemporaryDirectory() as directory:
            _model_sees_what_memory_holds(pair, Path(directory), steps, window)

    check()


def _model_sees_what_memory_holds(
    pair: Pair, directory: Path, steps: list[tuple[str, int]], window: int
) -> None:
    # Agent runs interleaved with other writers: before each run, what the memory would
    # load plus the prompt is exactly what the model is sent, fast path or not, and the
    # memory then holds the window of that plus the answer.
    async def scenario() -> None:
        agents_memory, memory = pair(window, directory)
        seen: list[list[str]] = []
        agent = Agent(
            _echo_model(seen),
            memory=agents_memory,
            conversation_manager=NullConversationManager(),
        )
        for n, (op, k) in enumerate(steps):
            if op == "run":
                expected = [m.text for m in await memory.load()] + [f"prompt {n}"]
                await agent.run(f"prompt {n}")
                assert seen[-1] == expected
                stored = [m.text for m in await memory.load()]
                assert stored == [*expected, f"answer {len(seen)}"][-window:]
            elif op == "clear":
                await memory.clear()
            elif op == "save":
                await memory.save([Message("user", f"saved {n}.{i}") for i in range(k + 1)])
            elif op == "replace":
                await memory.replace([Message("user", f"replaced {n}.{i}") for i in range(k)])
            elif op == "edit" and agent.messages:
                await agent.edit_message(-1, f"edited {n}")

    asyncio.run(scenario())


# -- under a thread: the checkpoint gives the start, memory keeps a window of it ------


def test_a_threads_runs_check_and_store_only_what_each_turn_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = count_well_formed_checks(monkeypatch, history_module)

    async def scenario() -> None:
        memory = CountingMemory(max_messages=4)  # a window: the checkpoint keeps it all
        seen: list[list[str]] = []
        agent = Agent(_echo_model(seen), memory=memory)
        cp = FileCheckpointer(tmp_path)
        for i in range(3):
            await agent.run(f"q{i}", checkpointer=cp, thread_id="t")
        checked.clear()
        memory.loads = memory.appends = memory.replaces = 0
        for i in range(3, 8):
            await agent.run(f"q{i}", checkpointer=cp, thread_id="t")
        # Each run checks the prompt and the answer, never the 6..14 stored messages.
        assert checked and max(checked) <= 2, checked
        assert (memory.appends, memory.replaces, memory.loads) == (5, 0, 0)
        assert seen[-1] == [t for i in range(7) for t in (f"q{i}", f"answer {i + 1}")] + ["q7"]
        stored = await cp.load("t")
        assert stored is not None and len(stored.messages) == 16
        assert [m.text for m in await memory.load()] == ["q6", "answer 7", "q7", "answer 8"]
        assert [m.text for m in agent.messages] == [m.text for m in stored.messages]

    asyncio.run(scenario())


def test_a_thread_written_by_another_agent_is_checked_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        cp = FileCheckpointer(tmp_path)
        seen: list[list[str]] = []
        first = Agent(_echo_model(seen))
        await first.run("a", checkpointer=cp, thread_id="t")
        other = Agent(_echo_model([]))
        await other.run("from the other", checkpointer=cp, thread_id="t")
        await first.run("b", checkpointer=cp, thread_id="t")  # not what `first` committed
        assert seen[-1] == ["a", "answer 1", "from the other", "answer 1", "b"]
        assert [m.text for m in first.messages][-1] == "answer 2"

    asyncio.run(scenario())
