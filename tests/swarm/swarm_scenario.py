"""Scripted members shared by the swarm tests and their child processes.

The models are pure functions of the conversation, so a child process (or a new Swarm
instance after a crash) rebuilds exactly the same swarm.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from framework_agents import Agent, FunctionModel, Message, Swarm, ToolCall, tool
from framework_agents.swarm import HANDOFF_MESSAGE_KIND


def handoff(to: str, message: str = "over to you", context: Any = None, cid: str = "") -> Message:
    """An assistant turn that hands off to ``to``."""
    args: dict[str, Any] = {"agent_name": to, "message": message}
    if context is not None:
        args["context"] = context
    call = ToolCall(cid or f"h-{to}", "handoff_to_agent", args)
    return Message("assistant", "", tool_calls=[call])


def since_my_turn(messages: list[Message]) -> list[Message]:
    """The messages after the latest user turn (a prompt or a handoff message)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i + 1 :]
    return list(messages)


def last_user(messages: list[Message]) -> Message | None:
    return next((m for m in reversed(messages) if m.role == "user"), None)


def triage_model() -> FunctionModel:
    """Hands every user prompt to billing with the order number; never answers itself."""

    def answer(messages: list[Message], tools: Any) -> Message | str:
        user = last_user(messages)
        if user is not None and user.metadata.get("kind") != HANDOFF_MESSAGE_KIND:
            return handoff("billing", f"Customer says: {user.text}", {"order": 42})
        return "triage has nothing to add"

    return FunctionModel(answer)


def billing_model(crash_on_call: bool = False) -> FunctionModel:
    """Calls refund(order=42) once per turn, then confirms. May SIGKILL its process."""

    def answer(messages: list[Message], tools: Any) -> Message | str:
        if crash_on_call:
            os.kill(os.getpid(), signal.SIGKILL)
        recent = since_my_turn(messages)
        results = [m for m in recent if m.role == "tool" and m.name == "refund"]
        if not results:
            return Message("assistant", "", tool_calls=[ToolCall("r1", "refund", {"order": 42})])
        return f"Refund handled: {results[-1].text}"

    return FunctionModel(answer)


def refund_tool(effects: Path, block: bool = False) -> Any:
    """An approval tool whose side effect is one line in ``effects``.

    With ``block``, it prints "ran" after the effect and then waits forever (the parent
    SIGKILLs the process between the effect and the saved result).
    """

    @tool(requires_approval=True)
    async def refund(order: int) -> str:
        """Refund an order."""
        with effects.open("a") as f:
            f.write(f"refund {order}\n")
        if block:
            print("ran", flush=True)
            await asyncio.Event().wait()
        return f"refunded order {order}"

    return refund


def refund_swarm(effects: Path, *, block: bool = False, crash_billing: bool = False) -> Swarm:
    """triage -> billing (refund needs approval)."""
    triage = Agent(triage_model(), agent_id="triage", system_prompt="You route requests.")
    billing = Agent(
        billing_model(crash_billing),
        agent_id="billing",
        system_prompt="You handle refunds.",
        tools=[refund_tool(effects, block)],
    )
    return Swarm([triage, billing])


def effect_count(effects: Path) -> int:
    return len(effects.read_text().splitlines()) if effects.exists() else 0
