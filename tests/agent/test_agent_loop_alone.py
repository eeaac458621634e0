"""The loop driven alone: a frozen RunSetup and a LoopRun, no Agent anywhere."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from framework_agents import Message, ScriptedModel, ToolCall, tool
from framework_agents.agent import _loop, _threads
from framework_agents.agent._loop import LoopRun, RunHooks, RunSetup, run_loop
from framework_agents.errors import MaxTurnsError
from framework_agents.history import CheckedHistory
from framework_agents.hitl import HitlInterrupt


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch at ``target``."""
    return f"launched at {target}"


def drive(setup: RunSetup, run: LoopRun) -> list[Any]:
    async def main() -> list[Any]:
        return [event async for event in run_loop(setup, run)]

    return asyncio.run(main())


def test_the_loop_runs_a_tool_turn_then_answers_from_a_setup_alone() -> None:
    model = ScriptedModel(
        [Message("assistant", tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 3})]), "five"]
    )
    setup = RunSetup(model=model, tools={"add": add}, tool_specs=(add.spec,), system_prompt="Sum.")
    run = LoopRun([], Message("user", "2+3?"))
    events = drive(setup, run)
    assert run.final is not None and run.final.text == "five"
    assert [m.role for m in run.visible()] == ["user", "assistant", "tool", "assistant"]
    assert [e.type for e in events if e.type in ("tool_call", "tool_result")] == [
        "tool_call",
        "tool_result",
    ]
    assert model.calls[0].system_prompt == "Sum." and run.turns == 2


def test_the_setup_is_frozen() -> None:
    setup = RunSetup(model=ScriptedModel([]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setup.max_turns = 3  # type: ignore[misc]


def test_decisions_and_limits_come_from_the_setup() -> None:
    turn = Message("assistant", tool_calls=[ToolCall("c", "launch", {"target": "moon"})])
    setup = RunSetup(model=ScriptedModel([turn]), tools={"launch": launch})
    run = LoopRun([], Message("user", "go"))
    with pytest.raises(HitlInterrupt) as info:
        drive(setup, run)
    assert info.value.tool == "launch" and run.kept is not None
    approved = dataclasses.replace(
        setup, model=ScriptedModel([turn, "done"]), decide=lambda name, args: "approve"
    )
    run = LoopRun([], Message("user", "go"))
    drive(approved, run)
    assert run.final is not None and [c.args for c in run.ran] == [{"target": "moon"}]
    looping = RunSetup(model=ScriptedModel([turn] * 5), tools={"add": add}, max_turns=1)
    with pytest.raises(MaxTurnsError):
        drive(looping, LoopRun([], Message("user", "go")))


@pytest.mark.parametrize("module", [_loop, _threads], ids=["_loop", "_threads"])
def test_the_loop_and_thread_modules_never_reach_into_the_agent(module: Any) -> None:
    tree = ast.parse(Path(module.__file__).read_text())
    sources = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "agent" not in sources and not any(s.endswith(".agent") for s in sources)
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "Agent" not in names and "agent" not in names  # a ThreadHost instead


def test_hook_providers_compose_into_one_set_called_in_order() -> None:
    calls: list[str] = []

    def provider(name: str) -> RunHooks:
        async def on_commit(history: CheckedHistory, finished: bool) -> None:
            calls.append(f"{name}:{len(history)}:{finished}")

        async def prepare() -> list[Message]:
            return [Message("user", name)]

        return RunHooks(prepare=prepare, on_commit=on_commit)

    only = provider("solo")
    assert RunHooks.compose(only) is only
    joined = RunHooks.compose(provider("session"), RunHooks(), provider("thread"))
    assert joined.on_tool_start is None  # nobody filled it
    assert joined.on_commit is not None and joined.prepare is not None
    commit, prepare = joined.on_commit, joined.prepare

    async def drive() -> list[str]:
        await commit(CheckedHistory([Message("user", "x")]), True)
        prepared = await prepare()
        assert prepared is not None
        return [m.text for m in prepared]

    assert asyncio.run(drive()) == ["thread"]  # the last one's
    assert calls == ["session:1:True", "thread:1:True"]
