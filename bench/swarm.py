"""Benchmark: what a swarm costs over the same member runs done by plain agents (by hand).

Zero-latency ``FunctionModel``s, so everything measured is framework work. Each scenario
is measured with its baseline in the same process, interleaved, on fresh threads of a
checkpointer (``memory``: InMemoryCheckpointer; ``file``: FileCheckpointer in ``--dir``):

* ``one member``: a one-member swarm answering a prompt, against ``Agent.run`` of the same
  agent on a thread (the swarm's view of the checkpointer, its record and the pump task).
* ``handoff``: a two-member swarm where the active member hands the prompt off and the
  other answers, against two ``Agent.run`` calls on one thread (a tool turn, then an
  answer to a second user message): the same model calls, tool runs and commits.
  The baseline's tool is async like the handoff tool (no worker-thread hop on either side).
* ``long thread``: the ``handoff`` scenario repeated on one thread that grows to the
  sliding window (40 messages), against the two agent runs on a thread that grows alike
  (the members take turns: each run starts at the member that answered last).

Prints, per scenario, the median wall and CPU (``process_time``) milliseconds and the ratio
of medians (swarm / baseline); on a machine shared with other jobs, trust the CPU ratio.
Usage: ``.venv/bin/python bench/swarm.py [--repeat 200] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    InMemoryCheckpointer,
    Message,
    Swarm,
    ToolCall,
    tool,
)
from framework_agents.swarm import HANDOFF_MESSAGE_KIND, HANDOFF_TOOL


@tool
async def note(text: str) -> str:
    """Note something down."""
    return f"noted {text}"


def _member(me: str, other: str) -> FunctionModel:
    """Hands a customer's prompt to ``other``; answers a handoff (so every run hands off once).

    Without the handoff tool (the baseline agent) it calls ``note`` instead.
    """

    def answer(messages: list[Message], tools: Any) -> Message | str:
        last = messages[-1]
        if last.role == "user" and last.metadata.get("kind") != HANDOFF_MESSAGE_KIND:
            names = {t.name for t in tools}
            call = (
                ToolCall(f"h{len(messages)}", HANDOFF_TOOL, {"agent_name": other, "message": "go"})
                if HANDOFF_TOOL in names
                else ToolCall(f"n{len(messages)}", "note", {"text": "go"})
            )
            return Message("assistant", "", tool_calls=[call])
        return f"{me} answers"

    return FunctionModel(answer)


def _answer(messages: list[Message], tools: Any) -> str:
    return "answer"


async def _time(fn: Callable[[int], Awaitable[Any]], i: int) -> tuple[float, float]:
    """Wall and CPU milliseconds of one call (CPU time: the figure other jobs disturb least)."""
    wall, cpu = time.perf_counter(), time.process_time()
    await fn(i)
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def _report(name: str, swarm: list[tuple[float, float]], base: list[tuple[float, float]]) -> None:
    def med(xs: list[tuple[float, float]], i: int) -> float:
        return statistics.median(x[i] for x in xs)

    sw, bw, sc, bc = med(swarm, 0), med(base, 0), med(swarm, 1), med(base, 1)
    print(
        f"{name:<22} wall: swarm {sw:7.3f} ms, baseline {bw:7.3f} ms, ratio {sw / bw:5.2f}   "
        f"cpu: swarm {sc:7.3f} ms, baseline {bc:7.3f} ms, ratio {sc / bc:5.2f}"
    )


async def _scenarios(make_cp: Callable[[], Any], label: str, repeat: int) -> None:
    cp = make_cp()
    solo_agent = Agent(FunctionModel(_answer), agent_id="a")
    solo_swarm = Swarm([Agent(FunctionModel(_answer), agent_id="a")])
    pair = Swarm([Agent(_member("a", "b"), agent_id="a"), Agent(_member("b", "a"), agent_id="b")])
    plain_first = Agent(_member("a", "b"), agent_id="a", tools=[note])
    plain_second = Agent(_member("b", "a"), agent_id="b")

    async def swarm_one(i: int) -> None:
        await solo_swarm.run("hi", checkpointer=cp, thread_id=f"s1-{i}")

    async def agent_one(i: int) -> None:
        await solo_agent.run("hi", checkpointer=cp, thread_id=f"a1-{i}")

    async def swarm_pair(i: int, thread: str | None = None) -> None:
        await pair.run("hi", checkpointer=cp, thread_id=thread or f"s2-{i}")

    async def agent_pair(i: int, thread: str | None = None) -> None:
        tid = thread or f"a2-{i}"
        await plain_first.run("hi", checkpointer=cp, thread_id=tid)
        await plain_second.run(
            Message("user", "next", metadata={"kind": HANDOFF_MESSAGE_KIND}),
            checkpointer=cp,
            thread_id=tid,
        )

    async def swarm_long(i: int) -> None:
        await swarm_pair(i, "s-long")

    async def agent_long(i: int) -> None:
        await agent_pair(i, "a-long")

    for name, swarm_fn, base_fn in (
        ("one member", swarm_one, agent_one),
        ("handoff", swarm_pair, agent_pair),
        ("long thread", swarm_long, agent_long),
    ):
        for i in range(5):  # warm up
            await swarm_fn(-1 - i)
            await base_fn(-1 - i)
        swarm_ms: list[tuple[float, float]] = []
        base_ms: list[tuple[float, float]] = []
        for i in range(repeat):
            swarm_ms.append(await _time(swarm_fn, i))
            base_ms.append(await _time(base_fn, i))
        _report(f"{label}: {name}", swarm_ms, base_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(_scenarios(InMemoryCheckpointer, "memory", args.repeat))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        asyncio.run(_scenarios(lambda: FileCheckpointer(Path(tmp)), "file", args.repeat // 4))


if __name__ == "__main__":
    main()
