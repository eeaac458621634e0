"""``/mcp`` with the official Python MCP client against a real uvicorn server.

The client is the ``mcp`` SDK's own ``Client`` over its streamable HTTP transport, in both
protocol eras: ``auto`` (2026-07-28: an approval comes back as an ``input_required``
elicitation, answered by the client's elicitation callback) and ``legacy`` (2025-11-25,
which a stateless server cannot ask back: the approval is reported and ``decide``
answers it). One thread is continued across MCP, the JSON API, A2A and AG-UI.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_part
from a2a.types import a2a_pb2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from server_support import PUBLISHED, Served, make_agent, start_server

from framework_agents import Agent, FunctionModel, Message, ToolCall, ToolContext, errors, tool
from framework_agents.bank import MemoryBank
from framework_agents.elicitation import Elicitation, ElicitationRequired
from framework_agents.errors import InvalidArgumentError
from framework_agents.server import create_app
from mcp import Client

TOKEN = "mcp-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The test agent with /mcp, behind a token, on a directory store."""
    PUBLISHED.clear()
    app = create_app(
        make_agent, store=str(tmp_path / "store"), token=TOKEN, console=False, mcp=True
    )
    running = start_server(app)
    yield running
    running.stop()


@asynccontextmanager
async def connect(
    served: Served,
    *,
    mode: str = "auto",
    elicit: Elicit | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """The SDK's client on ``/mcp`` (with the token unless ``headers`` say otherwise)."""
    async with httpx2.AsyncClient(headers=AUTH if headers is None else headers) as http:
        transport = streamable_http_client(f"{served.url}/mcp", http_client=http)
        async with Client(transport, mode=mode, elicitation_callback=elicit) as client:  # type: ignore[arg-type]
            yield client


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result (one text block)."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def error_of(result: types.CallToolResult) -> str:
    """The code of a tool error, checking its text and structured content agree."""
    assert result.is_error
    text = text_of(result)
    assert "Traceback" not in text
    code: str = result.structured_content["error"]["code"]
    assert text.startswith(f"[{code}] ")
    return code


def answering(*answers: types.ElicitResult) -> tuple[Elicit, list[types.ElicitRequestParams]]:
    """An elicitation callback that gives ``answers`` in turn, and the questions it saw."""
    asked: list[types.ElicitRequestParams] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return answers[len(asked) - 1]

    return elicit, asked


def test_lists_ask_and_decide_with_their_schemas_in_both_eras(served: Served) -> None:
    async def main() -> None:
        for mode in ("auto", "legacy"):
            async with connect(served, mode=mode) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert sorted(tools) == ["ask", "decide"]
                ask = tools["ask"].input_schema
                assert ask["required"] == ["thread_id", "text"]
                assert ask["additionalProperties"] is False
                assert "namespace" not in str(tools)

    asyncio.run(main())


async def _a2a_turn(url: str, context_id: str, text: str) -> str:
    """One A2A turn in ``context_id``; the agent's answer."""
    client = await create_client(url, client_config=ClientConfig(streaming=False))
    try:
        message = a2a_pb2.Message(
            message_id=str(uuid.uuid4()),
            role=a2a_pb2.Role.ROLE_USER,
            parts=[new_text_part(text)],
            context_id=context_id,
        )
        answer = ""
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            if response.HasField("task") and response.task.status.HasField("message"):
                answer = response.task.status.message.parts[0].text
        return answer
    finally:
        await client.close()


def test_one_thread_goes_from_mcp_to_the_json_api_a2a_and_agui_and_back(tmp_path: Path) -> None:
    # A2A's own client reads the agent card without a token: this server has none.
    running = start_server(
        create_app(make_agent, store=str(tmp_path / "s"), console=False, mcp=True)
    )
    thread = "conversation-1"
    try:

        async def main() -> None:
            async with connect(running, headers={}) as client:
                first = await client.call_tool("ask", {"thread_id": thread, "text": "hello"})
                assert text_of(first) == "echo: hello" and not first.is_error
                async with httpx.AsyncClient(base_url=running.url, timeout=30) as http:
                    api = await http.post(
                        f"/api/threads/{thread}/runs",
                        json={"prompt": "over the api"},
                        headers={"Accept": "application/json"},
                    )
                    assert api.json()["text"] == "echo: over the api"
                    assert await _a2a_turn(running.url, thread, "over a2a") == "echo: over a2a"
                    known = (await http.get(f"/api/threads/{thread}")).json()["messages"]
                    agui = await http.post(
                        "/agui",
                        json={
                            "threadId": thread,
                            "runId": str(uuid.uuid4()),
                            "messages": [
                                *(
                                    {"id": m["id"], "role": m["role"], "content": m["content"]}
                                    for m in known
                                ),
                                {"id": str(uuid.uuid4()), "role": "user", "content": "over ag-ui"},
                            ],
                            "state": {},
                            "tools": [],
                            "context": [],
                            "forwardedProps": {},
                        },
                    )
                    assert agui.status_code == 200 and "echo: over ag-ui" in agui.text
                    last = await client.call_tool("ask", {"thread_id": thread, "text": "back"})
                    assert text_of(last) == "echo: back"
                    read = (await http.get(f"/api/threads/{thread}")).json()
                texts = [m["content"] for m in read["messages"]]
                assert texts == [
                    "hello",
                    "echo: hello",
                    "over the api",
                    "echo: over the api",
                    "over a2a",
                    "echo: over a2a",
                    "over ag-ui",
                    "echo: over ag-ui",
                    "back",
                    "echo: back",
                ]
                assert [e["kind"] for e in read["timeline"]] == ["run"] * 5

        asyncio.run(main())
    finally:
        running.stop()


APPROVE = types.ElicitResult(action="accept", content={"decision": "approve"})


@pytest.mark.parametrize(
    ("answer", "published", "reply"),
    [
        (APPROVE, [{"title": "Q3 report", "copies": 3}], "done: published 'Q3 report' x3"),
        (
            types.ElicitResult(
                action="accept",
                content={"decision": "edit", "args.title": "Q4 report", "args.copies": 1},
            ),
            [{"title": "Q4 report", "copies": 1}],
            "done: published 'Q4 report' x1",
        ),
        (
            types.ElicitResult(action="accept", content={"decision": "reject", "reason": "no"}),
            [],
            "done: Rejected: no",
        ),
        (
            types.ElicitResult(action="decline"),
            [],
            "done: Rejected: The MCP client declined the approval.",
        ),
    ],
    ids=["approve", "edit", "reject", "decline"],
)
def test_an_approval_is_an_elicitation_whose_answer_resumes_the_thread(
    served: Served, answer: types.ElicitResult, published: list[Any], reply: str
) -> None:
    elicit, asked = answering(answer)

    async def main() -> None:
        async with connect(served, elicit=elicit) as client:
            result = await client.call_tool("ask", {"thread_id": "t", "text": "publish Q3 report"})
            assert text_of(result) == reply and not result.is_error

    asyncio.run(main())
    (question,) = asked
    assert isinstance(question, types.ElicitRequestFormParams)
    assert "publish" in question.message and "Q3 report" in question.message
    schema = question.requested_schema
    assert schema["required"] == ["decision"]
    assert schema["properties"]["decision"]["enum"] == ["approve", "edit", "reject"]
    assert schema["properties"]["args.copies"] == {
        "type": "integer",
        "title": "copies",
        "default": 3,
    }
    assert published == PUBLISHED
    thread = httpx.get(f"{served.url}/api/threads/t", headers=AUTH).json()
    assert thread["pending"] is None
    assert [e["kind"] for e in thread["timeline"]] == ["run", "resume"]


def test_a_cancelled_elicitation_leaves_the_approval_open(served: Served) -> None:
    elicit, _ = answering(types.ElicitResult(action="cancel"))

    async def main() -> None:
        async with connect(served, elicit=elicit) as client:
            result = await client.call_tool("ask", {"thread_id": "t", "text": "publish Later"})
            assert not result.is_error and "Waiting for approval" in text_of(result)
            assert result.structured_content["status"] == "interrupted"

    asyncio.run(main())
    assert PUBLISHED == []
    assert httpx.get(f"{served.url}/api/threads/t", headers=AUTH).json()["pending"] is not None


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["legacy-protocol", "no-elicitation"])
def test_a_client_that_cannot_elicit_reads_the_approval_and_answers_with_decide(
    served: Served, mode: str
) -> None:
    async def main() -> None:
        async with connect(served, mode=mode) as client:  # no elicitation callback
            result = await client.call_tool("ask", {"thread_id": "t", "text": "publish Memo"})
            assert not result.is_error
            pending = result.structured_content["pending"]
            assert result.structured_content["status"] == "interrupted"
            assert pending["tool"] == "publish"
            assert pending["args"] == {"title": "Memo", "copies": 3}
            interrupt = pending["interrupt_id"]
            assert interrupt in text_of(result) and "decide(" in text_of(result)
            assert "/api/threads/t/resume" in text_of(result)
            # a new prompt before the decision is refused with our code
            again = await client.call_tool("ask", {"thread_id": "t", "text": "hello"})
            assert error_of(again) == "APPROVAL_PENDING"
            stale = await client.call_tool(
                "decide", {"thread_id": "t", "interrupt_id": "interrupt-old", "decision": "approve"}
            )
            assert error_of(stale) == "HITL_DECISION"
            done = await client.call_tool(
                "decide",
                {
                    "thread_id": "t",
                    "interrupt_id": interrupt,
                    "decision": "edit",
                    "args": {"title": "Memo", "copies": 2},
                },
            )
            assert text_of(done) == "done: published 'Memo' x2"
            twice = await client.call_tool(
                "decide", {"thread_id": "t", "interrupt_id": interrupt, "decision": "approve"}
            )
            assert error_of(twice) == "HITL_DECISION"

    asyncio.run(main())
    assert PUBLISHED == [{"title": "Memo", "copies": 2}]


async def _retry(
    client: Client, thread_id: str, state: str, answer: types.ElicitResult | None
) -> str:
    """The error code of an ``ask`` retried with ``state`` (and ``answer``, if any)."""
    result = await client.session.call_tool(
        "ask",
        {"thread_id": thread_id, "text": "publish X"},
        input_responses={"approval": answer} if answer is not None else None,
        request_state=state,
        allow_input_required=True,
    )
    assert isinstance(result, types.CallToolResult)
    return error_of(result)


def test_an_answer_is_refused_unless_it_names_the_open_approval(served: Served) -> None:
    async def main() -> None:
        async with connect(served) as client:
            first = await client.session.call_tool(
                "ask", {"thread_id": "t", "text": "publish X"}, allow_input_required=True
            )
            # this client declared no elicitation: the approval is described
            assert isinstance(first, types.CallToolResult)
            for forged in ["not json", '{"v": 1}', '{"v": 1, "interrupt_id": "interrupt-other"}']:
                assert await _retry(client, "t", forged, APPROVE) == "HITL_DECISION", forged
            interrupt = first.structured_content["pending"]["interrupt_id"]
            state = f'{{"v": 1, "interrupt_id": "{interrupt}"}}'
            assert await _retry(client, "t", state, None) == "HITL_DECISION"  # no answer
            # the state of this thread's approval does not answer another thread's
            assert await _retry(client, "elsewhere", state, APPROVE) == "CHECKPOINT_MISSING"

    asyncio.run(main())
    assert PUBLISHED == []


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"thread_id": "t"}, "TOOL_ARGUMENTS"),
        ({"thread_id": "t", "text": 3}, "TOOL_ARGUMENTS"),
        ({"thread_id": "t", "text": "hi", "extra": 1}, "TOOL_ARGUMENTS"),
        ({"thread_id": "../etc", "text": "hi"}, "THREAD_ID_INVALID"),
        ({"thread_id": "t", "text": "   "}, "INVALID_ARGUMENT"),
    ],
    ids=["missing-text", "text-not-a-string", "unknown-argument", "bad-thread-id", "blank-text"],
)
def test_bad_arguments_are_a_tool_error_with_our_code(
    served: Served, arguments: dict[str, Any], code: str
) -> None:
    async def main() -> None:
        async with connect(served) as client:
            assert error_of(await client.call_tool("ask", arguments)) == code

    asyncio.run(main())


def test_an_unknown_tool_is_a_protocol_error_with_our_code(served: Served) -> None:
    async def main() -> None:
        for mode in ("auto", "legacy"):
            async with connect(served, mode=mode) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("memory_search", {"query": "x"})
                assert raised.value.error.code == types.INVALID_PARAMS
                assert raised.value.error.message.startswith("[NOT_FOUND] no tool 'memory_search'")
                assert raised.value.error.data["error"]["code"] == "NOT_FOUND"

    asyncio.run(main())


def test_mcp_needs_the_token_and_passes_the_site_guard(served: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for headers in [{}, {"Authorization": "Bearer wrong"}]:
            refused = http.post("/mcp", json=body, headers={**accept, **headers})
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "UNAUTHORIZED"
        rebound = http.post("/mcp", json=body, headers={**accept, **AUTH, "Host": "evil.example"})
        assert rebound.status_code == 400
        assert rebound.json()["error"]["code"] == "HOST_NOT_ALLOWED"
        foreign = http.post(
            "/mcp", json=body, headers={**accept, **AUTH, "Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        assert foreign.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"

    async def main() -> None:
        with pytest.raises(ExceptionGroup) as raised:  # the SDK's client cannot connect
            async with connect(served, headers={}) as client:
                await client.list_tools()
        assert raised.group_contains(MCPError, depth=None)

    asyncio.run(main())


def test_without_mcp_there_is_no_mcp_route(tmp_path: Path) -> None:
    running = start_server(create_app(make_agent, store="memory:", console=False))
    try:
        response = httpx.post(f"{running.url}/mcp", json={})
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "NOT_FOUND"
    finally:
        running.stop()


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[tuple[MemoryBank, str]]:
    """A directory bank holding one record of another namespace (its id)."""
    opened = MemoryBank(tmp_path / "bank")
    stranger = asyncio.run(opened.remember("Bob drinks black tea", namespace=("user-2",)))
    yield opened, stranger.id
    asyncio.run(opened.close())


def test_the_memory_tools_reach_the_configured_namespace_only(
    tmp_path: Path, bank: tuple[MemoryBank, str]
) -> None:
    opened, stranger = bank
    app = create_app(
        make_agent,
        store="memory:",
        token=TOKEN,
        console=False,
        bank=opened,
        mcp=True,
        mcp_namespace=["user-1"],
    )
    running = start_server(app)
    try:

        async def main() -> str:
            async with connect(running) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert sorted(tools) == [
                    "ask",
                    "decide",
                    "memory_forget",
                    "memory_remember",
                    "memory_search",
                ]
                for tool in tools.values():
                    assert "namespace" not in tool.input_schema["properties"]
                remembered = await client.call_tool(
                    "memory_remember", {"text": "Ada drinks green tea", "key": "drink"}
                )
                record_id = text_of(remembered).removeprefix("Remembered as ").rstrip(".")
                found = await client.call_tool("memory_search", {"query": "tea"})
                assert text_of(found).startswith(f"{record_id}: Ada drinks green tea")
                assert "Bob" not in text_of(found)
                other = await client.call_tool("memory_forget", {"record_id": stranger})
                assert text_of(other) == f"No record {stranger}."
                smuggled = await client.call_tool(
                    "memory_search", {"query": "tea", "namespace": ["user-2"]}
                )
                assert error_of(smuggled) == "TOOL_ARGUMENTS"
                forgot = await client.call_tool("memory_forget", {"record_id": record_id})
                assert text_of(forgot) == f"Forgot {record_id}."
                return record_id

        record_id = asyncio.run(main())
    finally:
        running.stop()
    assert asyncio.run(opened.get(record_id)) is None
    assert asyncio.run(opened.get(stranger)) is not None  # another namespace's, untouched


@pytest.mark.parametrize(
    "namespace",
    ["user-1", (), ("a/b",), ("",)],
    ids=["a-string", "empty", "slash", "blank-part"],
)
def test_create_app_refuses_a_bad_mcp_namespace(namespace: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="mcp_namespace"):
        create_app(make_agent, store="memory:", mcp=True, mcp_namespace=namespace)


def _failing(messages: list[Message], tools: list[Any]) -> Message:
    """A model whose provider refuses: the prompt names the error."""
    if messages[-1].text == "rate":
        raise errors.ModelRateLimitError("slow down")
    raise RuntimeError("a bug in the model adapter, with secrets")


@pytest.mark.parametrize(
    ("prompt", "code"), [("rate", "MODEL_RATE_LIMIT"), ("bug", "INTERNAL")], ids=["model", "bug"]
)
def test_a_failed_run_is_a_tool_error_with_its_code_and_no_internals(
    prompt: str, code: str
) -> None:
    app = create_app(
        lambda: Agent(FunctionModel(_failing)), store="memory:", console=False, mcp=True
    )
    running = start_server(app)
    try:

        async def main() -> types.CallToolResult:
            async with connect(running, headers={}) as client:
                return await client.call_tool("ask", {"thread_id": "t", "text": prompt})

        result = asyncio.run(main())
    finally:
        running.stop()
    assert error_of(result) == code
    assert "secrets" not in text_of(result)


@tool
async def book(city: str, context: ToolContext) -> str:
    """Book a room: asks how many nights first (as an MCP server's tool would)."""
    if context.answer is None:
        nights = {"type": "object", "properties": {"nights": {"type": "integer"}}}
        raise ElicitationRequired(Elicitation(f"How many nights in {city}?", nights))
    return f"booked {context.answer.action} {context.answer.content}"


def _booking(messages: list[Message], tools: list[Any]) -> Message:
    """A model that books a room in Oslo, then reports the tool's result."""
    if messages[-1].role == "tool":
        return Message("assistant", f"Done: {messages[-1].text}")
    return Message("assistant", "", tool_calls=[ToolCall("b1", "book", {"city": "Oslo"})])


@pytest.mark.parametrize(
    ("answer", "reply"),
    [
        (
            types.ElicitResult(action="accept", content={"nights": 3}),
            "Done: booked accept {'nights': 3}",
        ),
        (types.ElicitResult(action="decline"), "Done: booked decline None"),
    ],
    ids=["accept", "decline"],
)
def test_a_tools_question_is_passed_on_as_it_was_asked(
    answer: types.ElicitResult, reply: str
) -> None:
    app = create_app(
        lambda: Agent(FunctionModel(_booking), tools=[book]),
        store="memory:",
        console=False,
        mcp=True,
    )
    running = start_server(app)
    elicit, asked = answering(answer)
    try:

        async def main() -> tuple[types.CallToolResult, types.CallToolResult]:
            async with connect(running, headers={}, elicit=elicit) as client:
                answered = await client.call_tool("ask", {"thread_id": "a", "text": "book"})
            async with connect(running, headers={}, mode="legacy") as client:
                waiting = await client.call_tool("ask", {"thread_id": "b", "text": "book"})
            return answered, waiting

        answered, waiting = asyncio.run(main())
        # ... and the JSON API answers the question a client without elicitation read
        interrupt = waiting.structured_content["interrupt_id"]
        resumed = httpx.post(
            f"{running.url}/api/threads/b/resume",
            json={"decisions": {interrupt: {"answer": {"nights": 2}}}},
            headers={"Accept": "application/json"},
            timeout=30,
        ).json()
        assert resumed["text"] == "Done: booked accept {'nights': 2}", resumed
    finally:
        running.stop()
    (question,) = asked
    assert isinstance(question, types.ElicitRequestFormParams)
    assert question.message == "How many nights in Oslo?"
    assert question.requested_schema["properties"] == {"nights": {"type": "integer"}}
    assert text_of(answered) == reply
    # a client that cannot answer reads the question and how to answer it
    assert waiting.structured_content["elicitation"]["message"] == "How many nights in Oslo?"
    assert '"answer"' in text_of(waiting)
