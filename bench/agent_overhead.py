"""Benchmark: per-turn framework overhead of the agent loop (run by hand).

The model is a zero-latency ``FunctionModel``, so everything measured is framework work:
memory load and repair, conversation management, repair before each model call, events,
tool dispatch and the clear-then-save commit. Scenarios, each over ``--turns`` turns
(default 1000):

* ``runs``: a conversation of ``--turns`` runs (one user prompt, one answer each), with
  ``InMemoryMemory`` and with ``FileMemory`` (in ``--dir``, default a temp directory; its
  file system matters: fsync on tmpfs is free). Each memory is tried with its default
  window (50 messages, bounded work) and with a window larger than the conversation under
  ``NullConversationManager`` (the history grows to ``2 * turns`` messages: inherent
  per-run work is O(history), since a run loads, repairs and re-saves it).
* ``tools``: ONE run of ``--turns`` tool-calling turns with ``InMemoryMemory``: the
  per-turn cost inside a run (repair before each model call is O(history); nothing is
  serialised until the run ends).

``FunctionModel`` records every call with the history it was sent (``model.calls``), so
over a conversation it would keep every run's history alive: O(turns^2) live messages,
whose only cost is Python's cyclic GC traversing them (once 2/3 of the unbounded figure).
A real model keeps nothing, so the benchmark clears those records after each call.

* ``scaling``: the framework time of ONE scripted turn (a run: prompt, answer, commit)
  on an agent whose history holds 10 and 1,000 messages (``InMemoryMemory`` windowed at
  that size, ``NullConversationManager``), median of many steady-state turns, printed
  beside a baseline that only appends the two messages of a turn to a list (the floor).
  Target: the 1,000-message turn costs at most 1.3x the 10-message turn.

For each scenario: mean ms/turn, and ms/turn over the first and last 10% of turns (a
last/first ratio far above the history growth would mean per-turn work that should be a
delta). Usage: ``.venv/bin/python bench/agent_overhead.py [--turns 1000] [--dir PATH]
[--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    FileMemory,
    FunctionModel,
    InMemoryMemory,
    Memory,
    Message,
    NullConversationManager,
    ToolCall,
    ToolSpec,
    tool,
)


@tool
def noop(n: int) -> int:
    """Return n."""
    return n


async def _answer(messages: list[Message], tools: list[ToolSpec]) -> Message:
    return Message("assistant", "ok")


def _summary(name: str, times: list[float]) -> dict[str, Any]:
    tenth = max(len(times) // 10, 1)
    first = sum(times[:tenth]) / tenth * 1e3
    last = sum(times[-tenth:]) / tenth * 1e3
    return {
        "scenario": name,
        "turns": len(times),
        "ms_per_turn": sum(times) / len(times) * 1e3,
        "first_10pct_ms": first,
        "last_10pct_ms": last,
        "last_over_first": last / first if first else float("nan"),
    }


async def bench_runs(name: str, memory: Memory, turns: int, *, unbounded: bool) -> dict[str, Any]:
    """``turns`` runs of one prompt and one answer each; times every run."""
    manager = NullConversationManager() if unbounded else None
    model = FunctionModel(_answer)
    agent = Agent(model, memory=memory, conversation_manager=manager)
    times: list[float] = []
    for i in range(turns):
        start = time.perf_counter()
        await agent.run(f"question {i}")
        times.append(time.perf_counter() - start)
        model.calls.clear()  # see the module docstring: the test model's records, not ours
    result = _summary(name, times)
    result["final_history"] = len(agent.messages)
    return result


async def bench_tools(turns: int) -> dict[str, Any]:
    """One run of ``turns`` tool turns; times each model-to-model step via events."""

    calls = 0

    async def call_tool(messages: list[Message], tools: list[ToolSpec]) -> Message:
        nonlocal calls  # a counter, not a scan: the model itself must stay O(1)
        calls += 1
        model.calls.clear()  # its records of earlier calls, as in bench_runs
        if calls > turns:
            return Message("assistant", "finished")
        return Message("assistant", "", tool_calls=[ToolCall(f"c{calls}", "noop", {"n": calls})])

    model = FunctionModel(call_tool)
    agent = Agent(
        model,
        tools=[noop],
        memory=InMemoryMemory(max_messages=4 * turns),
        conversation_manager=NullConversationManager(),
        max_turns=turns + 1,
    )
    marks: list[float] = []
    start = time.perf_counter()
    async for event in agent.stream("go"):
        if event.type == "message_started":
            marks.append(time.perf_counter())
    end = time.perf_counter()
    steps = [b - a for a, b in itertools.pairwise(marks)]
    result = _summary("tools: one run, InMemoryMemory", steps)
    result["total_s"] = end - start
    result["final_history"] = len(agent.messages)
    return result


def _seeded(size: int) -> list[Message]:
    """A well-formed history of ``size`` messages (user/assistant pairs)."""
    return [
        Message("user" if i % 2 == 0 else "assistant", f"message {i} " + "x" * 80)
        for i in range(size)
    ]


async def _scripted_agent(size: int) -> tuple[Agent, FunctionModel, InMemoryMemory]:
    """An agent holding ``size`` messages, its memory's window at ``size`` (kept there)."""
    model = FunctionModel(_answer)
    memory = InMemoryMemory(max_messages=size)
    await memory.save(_seeded(size))
    agent = Agent(model, memory=memory, conversation_manager=NullConversationManager())
    for i in range(5):  # the first run loads and seeds: not a steady-state turn
        await agent.run(f"warm up {i}")
    model.calls.clear()
    return agent, model, memory


async def _turn_times(
    sizes: tuple[int, ...], repeat: int, rounds: int = 5
) -> dict[int, list[float]]:
    """Seconds per scripted turn of an agent holding each size of history.

    One agent per size, in steady state; the sizes take turns, ``rounds`` times
    ``repeat // rounds`` turns each, so a noisy neighbour slows them alike. A full
    garbage collection before each batch keeps the setup's garbage out of the timings.
    """
    agents = {size: await _scripted_agent(size) for size in sizes}
    times: dict[int, list[float]] = {size: [] for size in sizes}
    for r in range(rounds):
        for size in sizes:
            agent, model, _ = agents[size]
            gc.collect()
            for i in range(repeat // rounds):
                start = time.perf_counter()
                await agent.run(f"question {r}.{i}")
                times[size].append(time.perf_counter() - start)
                model.calls.clear()
    for size in sizes:
        memory = agents[size][2]
        assert len(await memory.load()) == size  # the window kept the history at its size
    return times


def _baseline(size: int, repeat: int) -> list[float]:
    """Seconds to append one turn's two messages to a list of ``size`` messages."""
    history = _seeded(size)
    times: list[float] = []
    for i in range(repeat):
        prompt, answer = Message("user", f"question {i}"), Message("assistant", "ok")
        start = time.perf_counter()
        history.append(prompt)
        history.append(answer)
        times.append(time.perf_counter() - start)
    return times


async def bench_scaling(repeat: int) -> dict[str, float]:
    """Median ms per scripted turn at 10 and 1,000 messages, and the list baseline."""
    import statistics

    out: dict[str, float] = {}
    times = await _turn_times((10, 1000), repeat)
    for size in (10, 1000):
        out[f"agent_{size}_ms"] = statistics.median(times[size]) * 1e3
        out[f"baseline_{size}_ms"] = statistics.median(_baseline(size, repeat)) * 1e3
    out["ratio_1000_over_10"] = out["agent_1000_ms"] / out["agent_10_ms"]
    return out


async def main(turns: int, directory: Path, as_json: bool, *, scaling_only: bool = False) -> None:
    scaling = await bench_scaling(max(turns // 2, 200))
    if scaling_only:
        print(json.dumps(scaling, indent=2) if as_json else _scaling_text(scaling))
        return
    results = [
        await bench_runs("runs: InMemoryMemory(50)", InMemoryMemory(), turns, unbounded=False),
        await bench_runs(
            "runs: InMemoryMemory(unbounded)",
            InMemoryMemory(max_messages=4 * turns),
            turns,
            unbounded=True,
        ),
        await bench_runs(
            "runs: FileMemory(50)", FileMemory(directory / "w50"), turns, unbounded=False
        ),
        await bench_runs(
            "runs: FileMemory(unbounded)",
            FileMemory(directory / "unbounded", max_messages=4 * turns),
            turns,
            unbounded=True,
        ),
        await bench_tools(turns),
    ]
    if as_json:
        print(json.dumps({"scaling": scaling, "scenarios": results}, indent=2))
        return
    print(_scaling_text(scaling))
    print(f"{'scenario':36} {'ms/turn':>9} {'first10%':>9} {'last10%':>9} {'ratio':>6} {'hist':>6}")
    for r in results:
        print(
            f"{r['scenario']:36} {r['ms_per_turn']:9.3f} {r['first_10pct_ms']:9.3f} "
            f"{r['last_10pct_ms']:9.3f} {r['last_over_first']:6.1f} {r['final_history']:6d}"
        )


def _scaling_text(s: dict[str, float]) -> str:
    return (
        "scaling: one scripted turn (median)\n"
        f"  agent at   10 messages: {s['agent_10_ms']:8.3f} ms   "
        f"list-append baseline: {s['baseline_10_ms'] * 1e3:8.3f} us\n"
        f"  agent at 1000 messages: {s['agent_1000_ms']:8.3f} ms   "
        f"list-append baseline: {s['baseline_1000_ms'] * 1e3:8.3f} us\n"
        f"  ratio 1000/10: {s['ratio_1000_over_10']:.2f} (target <= 1.3)\n"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scaling", action="store_true", help="only the scaling scenario")
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    # A fresh directory each run (inside --dir when given): a memory left by an earlier
    # run would be continued, not measured from empty.
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        asyncio.run(main(args.turns, Path(tmp), args.json, scaling_only=args.scaling))
