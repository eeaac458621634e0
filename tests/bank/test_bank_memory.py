"""BankMemory with real agents: recall, tools fixed to a namespace, episodes, extraction."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    FileMemory,
    FunctionModel,
    InMemoryMemory,
    Message,
    ScriptedModel,
    ToolCall,
)
from framework_agents.bank import BankMemory, MemoryBank
from framework_agents.errors import InvalidArgumentError
from framework_agents.memory import GroundingMemory, is_grounding
from processes import spawned

NS = ("user-1",)


def _memory(bank: MemoryBank | None = None, **kwargs: Any) -> BankMemory:
    return BankMemory(bank or MemoryBank(), InMemoryMemory(), namespace=NS, **kwargs)


def test_the_recall_message_reaches_the_model_and_is_never_stored() -> None:
    async def main() -> None:
        bank = MemoryBank()
        await bank.remember("The user's dog is called Rex", namespace=NS)
        await bank.remember("Bob's dog is called Spot", namespace=("user-2",))
        memory = _memory(bank)
        assert isinstance(memory, GroundingMemory)
        seen: list[list[Message]] = []

        def reply(messages: list[Message], tools: Any) -> str:
            seen.append(list(messages))
            return "Rex, of course."

        agent = Agent(FunctionModel(reply), memory=memory, tools=memory.tools)
        result = await agent.run("what is my dog called?")
        assert result.text == "Rex, of course."
        recall = [m for m in seen[0] if m.metadata.get("kind") == "recall"]
        assert len(recall) == 1 and is_grounding(recall[0])
        assert "Rex" in recall[0].text and "Spot" not in recall[0].text  # other namespace
        stored = await memory.inner.load()
        assert [m.role for m in stored] == ["user", "assistant"]
        assert not any(m.metadata.get("kind") == "recall" for m in agent.messages)
        loaded = await memory.load()  # load() recalls for the latest user turn
        assert loaded[0].metadata["kind"] == "recall" and loaded[1:] == stored

    arun(main())


def test_no_recall_when_nothing_is_relevant() -> None:
    async def main() -> None:
        memory = _memory()
        assert await memory.recall("anything at all") is None
        assert await memory.load() == []

    arun(main())


def test_the_tools_take_no_namespace_and_cannot_reach_another() -> None:
    async def main() -> None:
        bank = MemoryBank()
        other = await bank.remember("secret of user 2", namespace=("user-2",))
        memory = _memory(bank)
        tools = {t.name: t for t in memory.tools}
        assert sorted(tools) == ["memory_forget", "memory_remember", "memory_search"]
        for tool in tools.values():
            schema = json.dumps(tool.parameters)
            assert "namespace" not in schema
        answer = await tools["memory_remember"].invoke({"text": "likes tea", "key": "drink"})
        assert answer.startswith("Remembered as ")
        found = await tools["memory_search"].invoke({"query": "secret tea"})
        assert "tea" in found and "secret" not in found
        refused = await tools["memory_forget"].invoke({"record_id": other.id})
        assert refused == f"No record {other.id}."
        assert await bank.get(other.id) is not None
        mine = (await bank.search("tea", namespace=NS))[0].record
        assert await tools["memory_forget"].invoke({"record_id": mine.id}) == f"Forgot {mine.id}."
        assert await bank.get(mine.id) is None

    arun(main())


def test_a_model_remembers_through_its_tool_and_a_later_agent_recalls_it() -> None:
    async def main() -> None:
        bank = MemoryBank()
        first = _memory(bank)
        model = ScriptedModel(
            [
                Message(
                    "assistant",
                    "",
                    tool_calls=[
                        ToolCall(
                            "c1",
                            "memory_remember",
                            {"text": "The user lives in Lyon", "key": "city"},
                        )
                    ],
                ),
                "Noted.",
            ]
        )
        await Agent(model, memory=first, tools=first.tools).run("I live in Lyon now")
        second = _memory(bank)
        recall = await second.recall("where do I live?")
        assert recall is not None and "Lyon" in recall.text

    arun(main())


def test_episodes_remember_each_run_once() -> None:
    async def main() -> None:
        bank = MemoryBank()
        memory = _memory(bank, episodes=True)
        agent = Agent(ScriptedModel(["Hello Ann.", "Paris is lovely."]), memory=memory)
        await agent.run("Hi, I am Ann")
        await agent.run("I am going to Paris in May")
        episodes = await bank.list(NS, kinds=["episode"])
        texts = [r.text for r in episodes]
        assert texts == [
            "Hi, I am Ann",
            "Hello Ann.",
            "I am going to Paris in May",
            "Paris is lovely.",
        ]
        assert [r.metadata["role"] for r in episodes] == ["user", "assistant"] * 2

    arun(main())


def test_extraction_runs_after_the_run_returned_and_once() -> None:
    async def main() -> None:
        bank = MemoryBank()
        gate = asyncio.Event()
        calls: list[list[str]] = []

        async def extract(messages: list[Message]) -> list[Any]:
            calls.append([m.text for m in messages])
            await gate.wait()
            return ["The user is vegetarian", {"text": "The user lives in Oslo", "key": "city"}]

        memory = _memory(bank, extract=extract)
        agent = Agent(ScriptedModel(["Noted."]), memory=memory)
        result = await agent.run("I'm vegetarian and I live in Oslo")
        assert result.text == "Noted."  # returned while extraction waits
        await asyncio.sleep(0)
        assert await bank.list(NS) == []
        gate.set()
        await memory.drain()
        records = await bank.list(NS)
        assert sorted(r.text for r in records) == [
            "The user is vegetarian",
            "The user lives in Oslo",
        ]
        assert [r.key for r in records if r.key] == ["city"]
        await memory.drain()  # nothing pending: nothing twice
        assert len(await bank.list(NS)) == 2 and len(calls) == 1
        assert await bank.pending_jobs() == []

    arun(main())


def test_extraction_with_a_model_reads_one_fact_a_line() -> None:
    async def main() -> None:
        bank = MemoryBank()
        extractor = ScriptedModel(["- The user plays chess\n- The user has a cat named Tom\n"])
        memory = _memory(bank, extract=extractor)
        await Agent(ScriptedModel(["Nice!"]), memory=memory).run("I play chess with my cat Tom")
        await memory.drain()
        assert sorted(r.text for r in await bank.list(NS)) == [
            "The user has a cat named Tom",
            "The user plays chess",
        ]
        assert "I play chess with my cat Tom" in extractor.calls[0].messages[0].text

    arun(main())


def test_a_failed_extraction_stays_pending_and_drain_retries_it() -> None:
    async def main() -> None:
        bank = MemoryBank()
        attempts: list[int] = []
        tried = asyncio.Event()

        def extract(messages: list[Message]) -> list[str]:
            attempts.append(1)
            if len(attempts) == 1:
                tried.set()
                raise InvalidArgumentError("model down")
            return ["a fact"]

        memory = _memory(bank, extract=extract)
        await Agent(ScriptedModel(["ok"]), memory=memory).run("tell me")
        await tried.wait()
        assert len(await bank.pending_jobs()) == 1
        await memory.drain()
        assert [r.text for r in await bank.list(NS)] == ["a fact"] and len(attempts) == 2

    arun(main())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"namespace": "user"},
        {"namespace": ()},
        {"namespace": NS, "k": 0},
        {"namespace": NS, "episodes": 1},
        {"namespace": NS, "extract": 42},
    ],
)
def test_bad_arguments_are_invalid_argument(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        BankMemory(MemoryBank(), InMemoryMemory(), **kwargs)
    with pytest.raises(InvalidArgumentError):
        BankMemory("bank", InMemoryMemory(), namespace=NS)  # type: ignore[arg-type]


# -- a crash between a run's return and the end of its extraction ------------------------

_CHILD = """
import asyncio, sys
from framework_agents import Agent, FileMemory, ScriptedModel
from framework_agents.bank import BankMemory, MemoryBank

async def extract(messages):
    print("extracting", flush=True)
    await asyncio.Event().wait()  # killed here, after the run returned

async def main():
    bank = MemoryBank(sys.argv[1])
    memory = BankMemory(bank, FileMemory(sys.argv[2]), namespace=("user-1",), extract=extract)
    result = await Agent(ScriptedModel(["Noted."]), memory=memory).run("I live in Oslo")
    print("returned", result.text, flush=True)
    await memory.drain()

asyncio.run(main())
"""


def _run_child_until_extracting(bank_dir: str, history: str) -> None:
    args = [sys.executable, "-c", _CHILD, bank_dir, history]
    with spawned(args, stdout=subprocess.PIPE, text=True, env=_child_env()) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "returned Noted."
        assert proc.stdout.readline().strip() == "extracting"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL


def _child_env() -> dict[str, str]:
    src = str(Path(__file__).parents[2] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("finisher", ["drain", "next run"])
def test_extraction_cut_by_sigkill_is_finished_once_by_drain_or_the_next_run(
    tmp_path: Path, finisher: str
) -> None:
    bank_dir, history = str(tmp_path / "store"), str(tmp_path / "history")
    _run_child_until_extracting(bank_dir, history)

    calls: list[list[str]] = []

    def extract(messages: list[Message]) -> list[str]:
        calls.append([m.text for m in messages])
        return ["The user lives in Oslo"]

    async def main() -> None:
        async with MemoryBank(bank_dir) as bank:
            assert len(await bank.pending_jobs()) == 1  # durable before the run returned
            memory = BankMemory(bank, FileMemory(history), namespace=NS, extract=extract)
            if finisher == "next run":
                await Agent(ScriptedModel(["Sure."]), memory=memory).run("thanks")
            await memory.drain()
            await memory.drain()
            texts = sorted(r.text for r in await bank.list(NS))
            # The killed run's job once; the next run's own job once more (same fact).
            expected = 1 if finisher == "drain" else 2
            assert texts == ["The user lives in Oslo"] * expected
            assert calls.count(["I live in Oslo", "Noted."]) == 1
            assert len(calls) == expected and await bank.pending_jobs() == []

    arun(main())
