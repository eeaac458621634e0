"""MCPClient against the protocol's reference server, @modelcontextprotocol/server-everything.

Node 20 and the package of tests/js (``npm ci --prefix tests/js``, as ``.ci/run`` does);
skipped with a message naming what is missing. Over stdio and over streamable HTTP: every
tool the server offers is called through an agent with a scripted model (its form
elicitation answered through an interrupt and ``resume``, its URL elicitation refused as a
tool error, its long-running operation's progress seen as ``tool_progress`` stream events),
its resources read and its prompts fetched.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from processes import spawned

pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")

from framework_agents import Agent, HitlInterrupt, Message, ScriptedModel, ToolCall
from framework_agents.agent.events import RunFinishedEvent, ToolProgressEvent
from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.mcp import MCPClient

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "tests/js/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(NODE is None, reason="needs Node.js 20 (node is not on PATH)"),
    pytest.mark.skipif(
        not ENTRY.is_file(),
        reason="needs @modelcontextprotocol/server-everything: npm ci --prefix tests/js",
    ),
]

#: Arguments for every tool the server offers (a new tool fails the test until added here).
ARGS: dict[str, dict[str, Any]] = {
    "echo": {"message": "hello"},
    "get-annotated-message": {"messageType": "success", "includeImage": True},
    "get-env": {},
    "get-resource-links": {"count": 2},
    "get-resource-reference": {"resourceType": "text", "resourceId": 1},
    "get-structured-content": {"location": "New York"},
    "get-sum": {"a": 2, "b": 3},
    "get-tiny-image": {},
    "gzip-file-as-resource": {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8="},
    "toggle-simulated-logging": {},
    "toggle-subscriber-updates": {},
    "trigger-long-running-operation": {"duration": 1, "steps": 2},
    "simulate-research-query": {"topic": "tides"},
    "trigger-url-elicitation": {"url": "https://example.com/consent"},
}
#: The tool that asks a form question (answered through an interrupt, on a thread).
ASKS = "trigger-elicitation-request"
ANSWER = {
    "name": "Ada Lovelace",
    "check": True,
    "email": "ada@example.com",
    "birthdate": "1815-12-10",
    "integer": 7,
    "untitledMultipleSelectEnum": ["Piano"],
    "titledSingleSelectEnum": "hero-2",
}


async def answer_the_question(tools: list[Any]) -> None:
    """The server's form question is an interrupt; the answer completes the call."""
    checkpointer = InMemoryCheckpointer()
    turn = Message("assistant", "", tool_calls=[ToolCall("q", ASKS, {})])
    agent = Agent(ScriptedModel([turn, "done"]), tools=tools)
    try:
        await agent.run("ask me", checkpointer=checkpointer, thread_id="t")
    except HitlInterrupt as interrupt:
        asked = interrupt
    else:
        raise AssertionError("the server did not ask")
    assert asked.kind == "elicitation" and asked.schema is not None
    assert asked.schema["required"] == ["name"]
    decision = {asked.interrupt_id: {"answer": ANSWER}}
    result = await agent.resume("t", decision, checkpointer=checkpointer)
    (answered,) = [m for m in result.messages if m.role == "tool"]
    assert "Name: Ada Lovelace" in answered.text and "Favorite Integer: 7" in answered.text


async def exercise(client: MCPClient) -> None:
    async with client:
        tools = await client.tools(call_timeout=20)
        assert sorted(t.name for t in tools) == sorted([*ARGS, ASKS])
        await answer_the_question(tools)
        calls = [ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(ARGS.items())]
        model = ScriptedModel([Message("assistant", "", tool_calls=calls), "done"])
        events = [e async for e in Agent(model, tools=tools).stream("call everything")]
        assert isinstance(events[-1], RunFinishedEvent)
        answers = {m.name: m for m in events[-1].result.messages if m.role == "tool"}
        assert set(answers) == set(ARGS)  # every call answered
        # The long-running operation's progress notifications are stream events of its call.
        progress = [e for e in events if isinstance(e, ToolProgressEvent)]
        assert {e.tool for e in progress} == {"trigger-long-running-operation"}
        assert [(e.progress, e.total) for e in progress] == [(1.0, 2.0), (2.0, 2.0)]
        assert answers["echo"].text == "Echo: hello"
        assert "5" in answers["get-sum"].text
        assert answers["get-structured-content"].metadata["structured_content"].keys() >= {
            "temperature",
            "conditions",
            "humidity",
        }
        image = answers["get-tiny-image"]
        assert "[image: image/png" in image.text
        assert image.metadata["attachments"][0]["mime_type"] == "image/png"
        assert answers["get-resource-links"].text.count("[resource link:") == 2
        assert "MCP_EVERYTHING_TEST" in answers["get-env"].text
        for name in ("echo", "get-sum", "get-tiny-image", "get-structured-content"):
            assert answers[name].kind is None, answers[name]
        refused = answers["trigger-url-elicitation"]  # this client answers forms only
        assert refused.kind == "tool_error" and "URL" in refused.text, refused

        resources = await client.resources()
        assert resources
        for resource in resources:
            contents = await client.read(resource.uri)
            assert contents and all(c.text is not None or c.blob for c in contents)

        prompts = {p.name: p for p in await client.prompts()}
        assert {"simple-prompt", "args-prompt"} <= set(prompts)
        (simple,) = await client.prompt("simple-prompt")
        assert simple.role == "user" and "simple prompt" in simple.text
        (args,) = await client.prompt("args-prompt", {"city": "Oslo"})
        assert "Oslo" in args.text


@pytest.mark.slow
def test_every_tool_resource_and_prompt_over_stdio() -> None:
    client = MCPClient.stdio(str(NODE), [str(ENTRY), "stdio"], env={"MCP_EVERYTHING_TEST": "1"})
    arun(exercise(client), timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.slow
def test_every_tool_resource_and_prompt_over_streamable_http() -> None:
    port = _free_port()
    env = {"PORT": str(port), "MCP_EVERYTHING_TEST": "1", "PATH": "/usr/bin:/bin"}
    with spawned(
        [str(NODE), str(ENTRY), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stderr is not None
        for line in server.stderr:  # the server says when it listens
            if "listening on port" in line:
                break
        arun(exercise(MCPClient.http(f"http://127.0.0.1:{port}/mcp")), timeout=120)
