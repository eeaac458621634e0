"""Benchmark: resume latency of a checkpointed thread with 10, 1k and 10k messages (by hand).

Each measurement is one ``agent.resume()`` by a fresh ``Agent`` and a fresh
``FileCheckpointer`` (nothing cached: what a new process pays), with a zero-latency
``FunctionModel``, so everything measured is framework and file work. Scenarios:

* ``approve``: the thread was interrupted on an approval tool; the resume approves it, the
  model re-issues the call, the call runs under the at-most-once protocol (in-flight
  record before it, result after it, the turn at its end) and the model answers.
* ``approve-no-delta``: the same with every protocol write a full save (what the
  ``progress.json`` delta saves).
* ``pause``: the thread was paused; the resume continues with one model answer.

The history is kept whole (``NullConversationManager``, a memory window larger than the
history), so the final checkpoint holds every message: the worst case. Messages are
~100-character user/assistant pairs. Repetitions of the scenarios are interleaved. For each
size: median and p90 of the resume in ms, and the medians of the time spent per resume in
the checkpoint load, in all full saves and in all delta saves (progress.json), with their
counts. Usage: ``.venv/bin/python bench/resume.py [--sizes 10,1000,10000]
[--repeat 15] [--dir PATH] [--json]`` (``--dir``'s file system matters: fsync on tmpfs
is free).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    InMemoryMemory,
    Message,
    NullConversationManager,
    ToolCall,
    ToolSpec,
    tool,
)
from framework_agents.checkpoint import ThreadCheckpoint


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish ``text``."""
    return f"published {text}"


def _model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
    last = messages[-1]
    if last.role == "user" and last.text == "publish it":
        return Message("assistant", "", tool_calls=[ToolCall("c", "publish", {"text": "x"})])
    return "done"


def _history(size: int) -> list[Message]:
    return [
        Message("user", f"question {i}: " + "q" * 90)
        if i % 2 == 0
        else Message("assistant", f"answer {i}: " + "a" * 90)
        for i in range(size)
    ]


class TimedCheckpointer(FileCheckpointer):
    """A FileCheckpointer that adds up where its time goes."""

    def __init__(self, root: Path, *, deltas: bool = True) -> None:
        super().__init__(root)
        self.deltas = deltas
        self.spent = {"load": 0.0, "save": 0.0, "delta": 0.0}
        self.count = {"load": 0, "save": 0, "delta": 0}

    async def _timed(self, name: str, coro: Any) -> Any:
        started = time.perf_counter()
        try:
            return await coro
        finally:
            self.spent[name] += time.perf_counter() - started
            self.count[name] += 1

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        return await self._timed("load", super().load(thread_id))  # type: ignore[no-any-return]

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        await self._timed("save", super().save(checkpoint))

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        if not self.deltas:  # the comparison: every protocol write rewrites the history
            await self._timed("delta", super().save(checkpoint))
            return
        await self._timed("delta", super().save_progress(checkpoint))


def _agent(size: int) -> Agent:
    return Agent(
        FunctionModel(_model),
        tools=[publish],
        memory=InMemoryMemory(max_messages=size + 100),
        conversation_manager=NullConversationManager(),
    )


async def _prepare(root: Path, size: int, scenario: str) -> None:
    """A thread whose checkpoint holds ``size`` messages, interrupted or paused."""
    cp = FileCheckpointer(root)
    history = _history(size - 1)
    if scenario == "approve":
        await cp.save(ThreadCheckpoint("t", None, history, {"n": size}))
        try:
            await _agent(size).run("publish it", checkpointer=cp, thread_id="t")
        except HitlInterrupt:
            pass
        else:
            raise AssertionError("the setup run should have been interrupted")
    else:
        await cp.save(ThreadCheckpoint("t", None, [*history, Message("user", "go on")], {}))
    saved = await cp.load("t")
    assert saved is not None and len(saved.messages) == size, len(saved.messages)


async def _once(template: Path, root: Path, size: int, scenario: str) -> dict[str, float]:
    """One resume of a copy of ``template``: its time and where the time went (seconds)."""
    shutil.copytree(template, root)
    try:
        cp = TimedCheckpointer(root, deltas=scenario != "approve-no-delta")
        decisions = {"publish": "approve"} if scenario.startswith("approve") else None
        agent = _agent(size)
        started = time.perf_counter()
        result = await agent.resume("t", decisions, checkpointer=cp)
        total = time.perf_counter() - started
        assert result.text == "done", result.text
        return {
            "total": total,
            **{f"{k}_s": v for k, v in cp.spent.items()},
            **{f"{k}_n": float(v) for k, v in cp.count.items()},
        }
    finally:
        shutil.rmtree(root)


def _row(scenario: str, size: int, runs: list[dict[str, float]]) -> dict[str, Any]:
    def median_ms(key: str) -> float:
        return round(statistics.median(r[key] for r in runs) * 1000, 2)

    totals = sorted(r["total"] for r in runs)
    return {
        "scenario": scenario,
        "messages": size,
        "median_ms": median_ms("total"),
        "p90_ms": round(totals[max(int(len(totals) * 0.9) - 1, 0)] * 1000, 2),
        "load_ms": median_ms("load_s"),
        "full_saves": int(runs[0]["save_n"]),
        "full_save_ms": median_ms("save_s"),
        "delta_saves": int(runs[0]["delta_n"]),
        "delta_save_ms": median_ms("delta_s"),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--scenarios", default="approve,approve-no-delta,pause")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fa-bench-resume-", dir=args.dir))
    scenarios = args.scenarios.split(",")
    rows = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            templates = {}
            for scenario in scenarios:
                templates[scenario] = base / f"template-{scenario}-{size}"
                kind = "approve" if scenario.startswith("approve") else "pause"
                await _prepare(templates[scenario], size, kind)
            runs: dict[str, list[dict[str, float]]] = {s: [] for s in scenarios}
            for i in range(args.repeat):  # interleaved, so machine noise hits all alike
                for scenario in scenarios:
                    root = base / f"run-{scenario}-{size}-{i}"
                    runs[scenario].append(await _once(templates[scenario], root, size, scenario))
            rows.extend(_row(scenario, size, runs[scenario]) for scenario in scenarios)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    header = (
        f"{'scenario':<16} {'messages':>8} {'median ms':>10} {'p90 ms':>8} {'load ms':>8} "
        f"{'full saves (ms, all)':>21} {'delta saves (ms, all)':>22}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['scenario']:<16} {r['messages']:>8} {r['median_ms']:>10} {r['p90_ms']:>8} "
            f"{r['load_ms']:>8} {r['full_saves']:>8} {r['full_save_ms']:>12} "
            f"{r['delta_saves']:>9} {r['delta_save_ms']:>12}"
        )


if __name__ == "__main__":
    asyncio.run(main())
