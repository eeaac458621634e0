"""The client the MCP conformance suite drives: our MCPClient, through an agent.

``@modelcontextprotocol/conformance client --command "python conformance_client.py"``
starts this once per scenario with the scenario's server URL as the last argument and the
scenario's name in ``MCP_CONFORMANCE_SCENARIO``. Every scenario connects with
``MCPClient.http`` and lists the tools; a scenario whose server offers a tool has an agent
with a scripted model call it (``tools_call``: ``add_numbers``; the elicitation scenario:
the server's question is the run's interrupt, answered on ``resume`` with an empty form,
which takes the schema's defaults; ``sse-retry``: a call whose answer comes on a stream
the client must reconnect to). It exits 0 when the run completed, else 1 with the error.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from framework_agents import Agent, HitlInterrupt, Message, ScriptedModel, ToolCall
from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.mcp import MCPClient

#: The arguments of each tool a scenario's server offers.
ARGS: dict[str, dict[str, Any]] = {"add_numbers": {"a": 2, "b": 3}}


async def main(url: str, scenario: str) -> None:
    async with MCPClient.http(url, start_timeout=20) as client:
        tools = await client.tools(call_timeout=20)
        print(f"{scenario}: tools {[t.name for t in tools]}")
        if not tools:
            return
        calls = [ToolCall(f"c{i}", t.name, ARGS.get(t.name, {})) for i, t in enumerate(tools)]
        model = ScriptedModel([Message("assistant", "", tool_calls=calls), "done"])
        agent = Agent(model, tools=tools)
        checkpointer = InMemoryCheckpointer()
        try:
            result = await agent.run("go", checkpointer=checkpointer, thread_id="t")
        except HitlInterrupt as asked:
            print(f"{scenario}: asked {asked.message!r} {asked.schema}")
            answer: dict[str, Any] = {asked.interrupt_id: {"answer": {}}}
            result = await agent.resume("t", answer, checkpointer=checkpointer)
        for message in result.messages:
            if message.role == "tool":
                print(f"{scenario}: {message.name} -> {message.text!r} ({message.kind})")
                if message.kind is not None:
                    raise SystemExit(f"{message.name} failed: {message.text}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
