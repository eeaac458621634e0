"""An MCP server's progress notifications are ``tool_progress`` events of ``agent.stream()``.

Against the Python SDK server of tests/mcp/server.py (its ``count`` tool reports each
step), over stdio, on both protocol eras (the stateless 2026-07-28 one, and the legacy
initialize handshake).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from async_helper import arun

pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")

from framework_agents import Agent, Message, ScriptedModel, ToolCall
from framework_agents.agent.events import (
    RunFinishedEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
)
from framework_agents.mcp import MCPClient

SERVER = str(Path(__file__).with_name("server.py"))


@pytest.mark.parametrize("flags", [(), ("--legacy",)], ids=["stateless", "legacy"])
def test_progress_notifications_are_stream_events_between_call_and_result(
    flags: tuple[str, ...],
) -> None:
    async def main() -> list[object]:
        async with MCPClient.stdio(sys.executable, [SERVER, *flags]) as server:
            tools = await server.tools(include=["count"], prefix="srv_")
            turn = Message("assistant", "", tool_calls=[ToolCall("c1", "srv_count", {"to": 3})])
            agent = Agent(ScriptedModel([turn, "done"]), tools=tools)
            return [e async for e in agent.stream("count")]

    events = arun(main(), timeout=60)
    kinds = [type(e) for e in events]
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert [(e.call_id, e.tool, e.progress, e.total, e.message) for e in progress] == [
        ("c1", "srv_count", 1.0, 3.0, "step 1 of 3"),
        ("c1", "srv_count", 2.0, 3.0, "step 2 of 3"),
        ("c1", "srv_count", 3.0, 3.0, "step 3 of 3"),
    ]
    assert kinds.index(ToolCallEvent) < kinds.index(ToolProgressEvent)
    assert kinds.index(ToolResultEvent) > max(
        i for i, k in enumerate(kinds) if k is ToolProgressEvent
    )
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent)
    (result,) = [m for m in finished.result.messages if m.role == "tool"]
    assert result.text == "counted to 3" and result.kind is None
