"""Driver of the random-kill test: many trials, each worker a fork that SIGKILLs itself.

    kills_driver.py ROOT KILLS SEED

Each trial is one thread: a run interrupts on ``publish`` (an approval tool), then a human
retries the SAME request ``{"publish": "approve"}`` until the thread is finished. A call
of unknown outcome is answered, once its interrupt is seen, by a rejection keyed by that
interrupt (a careful human: it may have run); half the time that reply is "lost" and the
same old approval is replayed first. Every step runs in a forked worker armed to SIGKILL
itself at a random hazard point (checkpoint writes, the side effect, the tool's return,
model calls), so kills are real SIGKILLs of the process doing the side effect. The driver
forks the next worker after each death, and starts a new trial once a thread finishes,
until ``KILLS`` workers died. It prints one JSON line: trials, kills, side effects per
thread and any thread left unfinished.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    FileCheckpointer,
    FunctionModel,
    HitlInterrupt,
    Message,
    ToolCall,
    tool,
)
from framework_agents.checkpoint import ThreadCheckpoint
from framework_agents.errors import HitlDecisionError
from framework_agents.models._base import ToolSpec

_HAZARD = {"left": -1}


def hazard() -> None:
    """Count one hazard point; SIGKILL this process when the armed count runs out."""
    _HAZARD["left"] -= 1
    if _HAZARD["left"] == 0:
        os.kill(os.getpid(), signal.SIGKILL)


class KillingCheckpointer(FileCheckpointer):
    """A FileCheckpointer with a hazard before and after every write."""

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        hazard()
        await super().save(checkpoint)
        hazard()

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        hazard()
        await super().save_progress(checkpoint)
        hazard()


def make_agent(effects: Path) -> Agent:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish ``text`` (the side effect: a line fsynced to the effects file)."""
        hazard()
        with open(effects, "a") as fh:
            fh.write(text + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        hazard()
        return f"published {text}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        hazard()
        last = messages[-1]
        if last.role == "user":  # re-issued with a fresh call id each time, as models do
            call = ToolCall(f"call-{os.getpid()}-{random.random()}", "publish", {"text": "x"})
            return Message("assistant", tool_calls=[call])
        return f"finished: {last.text}"

    return Agent(FunctionModel(model), tools=[publish])


async def step(root: Path, thread: str, lose_reply: bool) -> str:
    """One worker's go at a thread; returns "done" once it is finished."""
    cp = KillingCheckpointer(root / "cp")
    agent = make_agent(root / "effects" / thread)
    saved = await cp.load(thread)
    if saved is None:
        with contextlib.suppress(HitlInterrupt):
            await agent.run("publish it", checkpointer=cp, thread_id=thread)
    request: dict[str, Any] = {"publish": "approve"}
    for _ in range(20):
        try:
            await make_agent(root / "effects" / thread).resume(thread, request, checkpointer=cp)
            return "done"
        except HitlDecisionError:
            return "done"  # nothing pending: an earlier worker finished it
        except HitlInterrupt as interrupt:
            if not interrupt.outcome_unknown:
                continue  # not reached by this model: it only calls publish once
            if lose_reply:
                lose_reply = False  # the reply is lost: the old approval is replayed
                continue
            request = {interrupt.key: {"reject": "it may have run already"}}
    return "stuck"


def finished(root: Path, thread: str) -> bool:
    saved = asyncio.run(FileCheckpointer(root / "cp").load(thread))
    return (
        saved is not None
        and saved.pending is None
        and not saved.in_flight
        and saved.turn is None
        and bool(saved.messages)
        and saved.messages[-1].role == "assistant"
        and not saved.messages[-1].tool_calls
    )


def main(root: Path, kills_wanted: int, seed: int) -> None:
    rng = random.Random(seed)
    (root / "effects").mkdir(parents=True, exist_ok=True)
    kills = trials = 0
    while kills < kills_wanted:
        thread = f"t{trials}"
        trials += 1
        armed = True
        for _attempt in range(50):
            hazards = rng.randint(1, 14) if armed else -1
            lose = rng.random() < 0.5
            pid = os.fork()
            if pid == 0:  # the worker
                _HAZARD["left"] = hazards
                try:
                    outcome = asyncio.run(step(root, thread, lose))
                except BaseException:
                    os._exit(3)
                os._exit(0 if outcome == "done" else 4)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                kills += 1
                armed = rng.random() < 0.5  # killed again, or not, on the next try
                continue
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                print(json.dumps({"error": f"worker exit {code} in {thread}"}), flush=True)
                return
            break
    counts = {}
    for i in range(trials):
        path = root / "effects" / f"t{i}"
        counts[f"t{i}"] = len(path.read_text().splitlines()) if path.exists() else 0
    unfinished = [f"t{i}" for i in range(trials) if not finished(root, f"t{i}")]
    summary = {"trials": trials, "kills": kills, "effects": counts, "unfinished": unfinished}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
