"""A process of the restart test: ``python elicit_child.py ask|answer ROOT [--legacy] [ID]``.

``ask`` runs an agent whose MCP tool ``book`` asks a question (the server is
``server.py`` over stdio, a child of this process), prints the interrupt as one JSON line
once the checkpoint under ROOT holds it, then waits to be killed. ``answer`` is a new
process: it resumes the thread with the answer to interrupt ID and prints the run's tool
results as one JSON line. ``MCP_TEST_RECORD`` names the file the server records bookings in.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from framework_agents import (
    Agent,
    FileCheckpointer,
    HitlInterrupt,
    Message,
    ScriptedModel,
    ToolCall,
)
from framework_agents.mcp import MCPClient

SERVER = str(Path(__file__).with_name("server.py"))


async def main(step: str, root: str, legacy: bool, interrupt_id: str | None) -> None:
    flags = ["--legacy"] if legacy else []
    checkpointer = FileCheckpointer(root)
    async with MCPClient.stdio(sys.executable, [SERVER, *flags]) as server:
        tools = await server.tools(include=["book"])
        if step == "ask":
            call = ToolCall("c1", "book", {"city": "Oslo"})
            agent = Agent(ScriptedModel([Message("assistant", "", tool_calls=[call])]), tools=tools)
            try:
                await agent.run("book a room", checkpointer=checkpointer, thread_id="t")
            except HitlInterrupt as interrupt:
                print(json.dumps(interrupt.to_dict()), flush=True)
                await asyncio.Event().wait()  # the parent kills this process now
            raise AssertionError("the call did not ask")
        agent = Agent(ScriptedModel(["done"]), tools=tools)
        assert interrupt_id is not None
        answer = {interrupt_id: {"answer": {"nights": 3, "breakfast": True}}}
        result = await agent.resume("t", answer, checkpointer=checkpointer)
        texts = [m.text for m in result.messages if m.role == "tool"]
        print(json.dumps({"tools": texts, "text": result.text}), flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--legacy"]
    asyncio.run(main(args[0], args[1], "--legacy" in sys.argv, args[2] if len(args) > 2 else None))
