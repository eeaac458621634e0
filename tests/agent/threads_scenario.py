"""A publishing agent for the thread and crash tests (imported by tests and by the child).

The model asks to ``publish`` (an approval tool) when the last message is the user's,
and each time regenerates the call id and the argument text's key order, as real models
do; after a tool result it answers with that result. The side effect of ``publish`` is a
line appended (and fsynced) to ``effects``. ``crash_at`` names the point at which the
process SIGKILLs itself:

* ``model``: the first model call of the process
* ``before_in_flight``: a checkpoint write that records an in-flight call, before it
* ``before_tool``: the tool starts (its in-flight record is saved)
* ``after_effect``: the tool wrote its side effect and has not returned
* ``after_tool``: the tool returned; its result is not saved yet
* ``after_result``: the checkpoint write that holds the tool's result is done
* ``after_final``: the run's final checkpoint is saved
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framework_agents import Agent, FileCheckpointer, FunctionModel, Message, ToolCall, tool
from framework_agents.agent import ToolCallContext
from framework_agents.checkpoint import ThreadCheckpoint
from framework_agents.models._base import ToolSpec

CRASH_POINTS = (
    "model",
    "before_in_flight",
    "before_tool",
    "after_effect",
    "after_tool",
    "after_result",
    "after_final",
)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def effects(path: Path) -> list[str]:
    """The side effects recorded so far."""
    return path.read_text().splitlines() if path.exists() else []


class CrashingCheckpointer(FileCheckpointer):
    """A FileCheckpointer that dies around the writes named by ``crash_at``."""

    def __init__(self, root: Path, crash_at: str | None = None) -> None:
        super().__init__(root)
        self.crash_at = crash_at
        self.full_saves = 0
        self.delta_saves = 0

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        self.full_saves += 1
        await self._guarded(checkpoint, super().save)

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        self.delta_saves += 1
        await self._guarded(checkpoint, super().save_progress)

    async def _guarded(self, checkpoint: ThreadCheckpoint, write: Any) -> None:
        if self.crash_at == "before_in_flight" and checkpoint.in_flight:
            die()
        await write(checkpoint)
        if self.crash_at == "after_result" and checkpoint.results and not checkpoint.in_flight:
            die()
        final = checkpoint.turn is None and checkpoint.pending is None
        if self.crash_at == "after_final" and final and checkpoint.messages:
            die()


class CrashAfterTool:
    """Middleware that dies once a tool has returned (before its result is saved)."""

    def __init__(self, crash_at: str | None) -> None:
        self.crash_at = crash_at

    def after_tool(self, ctx: ToolCallContext) -> None:
        if self.crash_at == "after_tool" and ctx.result is not None:
            die()


def publishing_agent(
    effects_path: Path, crash_at: str | None = None, *, text: str = "hello", **kwargs: Any
) -> Agent:
    """The agent of the scenario (see the module docstring)."""
    counter = itertools.count()
    model_calls = itertools.count()

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish ``text`` to the world (a side effect)."""
        if crash_at == "before_tool":
            die()
        with open(effects_path, "a") as fh:
            fh.write(text + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if crash_at == "after_effect":
            die()
        return f"published {text}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if crash_at == "model" and next(model_calls) == 0:
            die()
        last = messages[-1]
        if last.role == "user":
            # A fresh call id each time: a resumed model re-issues the call, it never
            # repeats the interrupted message.
            call = ToolCall(f"call-{os.getpid()}-{next(counter)}", "publish", {"text": text})
            return Message("assistant", "", tool_calls=[call])
        if last.role == "tool":
            return f"finished: {last.text}"
        return "nothing more to do"

    return Agent(
        FunctionModel(model),
        tools=[publish],
        middleware=[CrashAfterTool(crash_at)],
        **kwargs,
    )
