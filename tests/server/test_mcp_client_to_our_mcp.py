"""Our MCPClient against our own ``/mcp``: one framework agent using another over MCP.

A calling agent (scripted model) gets the served agent's tools through
``MCPClient.http``: ``ask`` runs the served agent on a thread; an approval the served
agent meets comes back as an elicitation, which is the calling agent's
``HitlInterrupt(kind="elicitation")``; the caller's ``resume`` with an answer approves
(or, declined, rejects) the served agent's call; a cancelled form leaves the approval
open, and ``decide`` answers it; with a bank, the memory tools. The resume runs in a
fresh agent with a fresh client (the stateless protocol keeps nothing between calls).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import PUBLISHED, Served, make_agent, start_server

pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")

from framework_agents import (
    Agent,
    BackendUnavailableError,
    FileCheckpointer,
    HitlInterrupt,
    Message,
    ScriptedModel,
    ToolCall,
)
from framework_agents.bank import MemoryBank
from framework_agents.errors import HitlDecisionError
from framework_agents.mcp import MCPClient
from framework_agents.server import create_app

TOKEN = "mcp-e2e-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The server tests' agent (``publish`` needs approval) with ``/mcp``, behind a token."""
    PUBLISHED.clear()
    app = create_app(
        make_agent, store=str(tmp_path / "store"), token=TOKEN, console=False, mcp=True
    )
    running = start_server(app)
    yield running
    running.stop()


def client_of(served: Served) -> MCPClient:
    return MCPClient.http(f"{served.url}/mcp", headers=AUTH)


def calling(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    """A model that makes ``calls`` (one turn each), then says "over"."""
    turns: list[Any] = [
        Message("assistant", "", tool_calls=[ToolCall(f"m{i}", name, args)])
        for i, (name, args) in enumerate(calls)
    ]
    return ScriptedModel([*turns, "over"])


def tool_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.role == "tool"]


def test_ask_runs_the_served_agent_and_a_thread_remembers_across_calls(served: Served) -> None:
    async def main() -> list[str]:
        async with client_of(served) as client:
            tools = await client.tools(prefix="peer_")
            assert sorted(t.name for t in tools) == ["peer_ask", "peer_decide"]
            (ask,) = [t for t in tools if t.name == "peer_ask"]
            assert ask.parameters["required"] == ["thread_id", "text"]
            model = calling(
                ("peer_ask", {"thread_id": "e2e-1", "text": "shout hello"}),
                ("peer_ask", {"thread_id": "e2e-1", "text": "and again"}),
            )
            result = await Agent(model, tools=tools).run("use the peer")
            return tool_texts(result.messages)

    assert asyncio.run(main()) == ["done: HELLO", "echo: and again"]


def test_without_the_token_the_client_is_backend_unavailable(served: Served) -> None:
    async def main() -> None:
        async with MCPClient.http(f"{served.url}/mcp", start_timeout=10) as client:
            await client.tools()

    with pytest.raises(BackendUnavailableError, match="/mcp"):
        asyncio.run(main())


def _interrupted(served: Served, checkpointer: FileCheckpointer, thread: str) -> HitlInterrupt:
    """The calling agent asks the peer to publish; the peer's approval is our interrupt."""

    async def main() -> HitlInterrupt:
        async with client_of(served) as client:
            tools = await client.tools(prefix="peer_")
            model = calling(("peer_ask", {"thread_id": thread, "text": "publish Dune"}))
            try:
                await Agent(model, tools=tools).run(
                    "publish", checkpointer=checkpointer, thread_id="caller"
                )
            except HitlInterrupt as interrupt:
                return interrupt
        raise AssertionError("the peer's approval did not reach the caller")

    return asyncio.run(main())


def _resume(served: Served, checkpointer: FileCheckpointer, decision: Any) -> list[str]:
    """A fresh calling agent with a fresh client resumes the caller's thread."""

    async def main() -> list[str]:
        async with client_of(served) as client:
            tools = await client.tools(prefix="peer_")
            agent = Agent(ScriptedModel(["over"]), tools=tools)
            result = await agent.resume("caller", decision, checkpointer=checkpointer)
            return tool_texts(result.messages)

    return asyncio.run(main())


def test_an_approval_round_trip_the_peers_approval_is_our_elicitation(
    served: Served, tmp_path: Path
) -> None:
    checkpointer = FileCheckpointer(tmp_path / "caller")
    interrupt = _interrupted(served, checkpointer, "e2e-approve")
    assert interrupt.kind == "elicitation" and interrupt.tool == "peer_ask"
    assert interrupt.message is not None
    assert "publish" in interrupt.message and "Dune" in interrupt.message
    assert interrupt.schema is not None
    assert interrupt.schema["properties"]["decision"]["enum"] == ["approve", "edit", "reject"]
    assert PUBLISHED == []  # nothing ran before the answer

    texts = _resume(
        served, checkpointer, {interrupt.interrupt_id: {"answer": {"decision": "approve"}}}
    )
    assert texts == ["done: published 'Dune' x3"]
    assert PUBLISHED == [{"title": "Dune", "copies": 3}]
    # The same answer again settles nothing: the caller's thread has no open interrupt.
    with pytest.raises(HitlDecisionError):
        _resume(served, checkpointer, {interrupt.interrupt_id: {"answer": {"decision": "approve"}}})
    assert PUBLISHED == [{"title": "Dune", "copies": 3}]


def test_an_edit_in_the_form_runs_the_peers_call_with_the_edited_arguments(
    served: Served, tmp_path: Path
) -> None:
    checkpointer = FileCheckpointer(tmp_path / "caller")
    interrupt = _interrupted(served, checkpointer, "e2e-edit")
    answer = {"decision": "edit", "args.title": "Dune Messiah", "args.copies": 1}
    texts = _resume(served, checkpointer, {interrupt.interrupt_id: {"answer": answer}})
    assert texts == ["done: published 'Dune Messiah' x1"]
    assert PUBLISHED == [{"title": "Dune Messiah", "copies": 1}]


def test_a_declined_form_rejects_the_peers_call(served: Served, tmp_path: Path) -> None:
    checkpointer = FileCheckpointer(tmp_path / "caller")
    interrupt = _interrupted(served, checkpointer, "e2e-decline")
    (text,) = _resume(served, checkpointer, {interrupt.interrupt_id: {"decline": True}})
    assert text.startswith("done: Rejected:") and "declined" in text
    assert PUBLISHED == []


def test_a_cancelled_form_leaves_the_approval_open_and_decide_answers_it(
    served: Served, tmp_path: Path
) -> None:
    checkpointer = FileCheckpointer(tmp_path / "caller")
    interrupt = _interrupted(served, checkpointer, "e2e-decide")
    (waiting,) = _resume(served, checkpointer, {interrupt.interrupt_id: {"cancel": True}})
    assert waiting.startswith("Waiting for approval") and "decide" in waiting
    pending_id = waiting.split("interrupt id ")[1].split(")")[0]
    assert PUBLISHED == []

    async def decide() -> list[str]:
        async with client_of(served) as client:
            tools = await client.tools(prefix="peer_", include=["decide"])
            args = {"thread_id": "e2e-decide", "interrupt_id": pending_id, "decision": "approve"}
            result = await Agent(calling(("peer_decide", args)), tools=tools).run("decide")
            return tool_texts(result.messages)

    assert asyncio.run(decide()) == ["done: published 'Dune' x3"]
    assert PUBLISHED == [{"title": "Dune", "copies": 3}]


def test_the_memory_tools_through_our_client(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path / "bank")
    app = create_app(make_agent, store="memory:", token=TOKEN, console=False, bank=bank, mcp=True)
    running = start_server(app)
    try:

        async def main() -> list[str]:
            async with client_of(running) as client:
                tools = await client.tools(include=["memory_remember", "memory_search"])
                model = calling(
                    ("memory_remember", {"text": "Ada drinks green tea", "key": "drink"}),
                    ("memory_search", {"query": "tea"}),
                )
                result = await Agent(model, tools=tools).run("remember")
                return tool_texts(result.messages)

        remembered, found = asyncio.run(main())
        record_id = remembered.removeprefix("Remembered as ").rstrip(".")
        assert found.startswith(f"{record_id}: Ada drinks green tea"), found
        assert asyncio.run(bank.get(record_id)) is not None
    finally:
        running.stop()
        asyncio.run(bank.close())
