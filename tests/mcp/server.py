"""A small MCP server on the official Python SDK (its low-level ``Server``), for the client tests.

Run as ``python tests/mcp/server.py [--bad-schema] [--legacy]``, over stdio. Its tools cover
what a reference server does not do on purpose: an error result, a slow call, a server that
dies in the middle of a call, a 10 MB result, progress notifications (``count``), a tool
added at run time (``tools/list_changed``), with ``--bad-schema`` a tool whose input schema
is not an object schema, and elicitations (``book``, ``book_twice``, ``odd_ask``).

Elicitation follows the protocol era the client opens: on the stateless 2026-07-28
protocol a call that needs an answer returns ``input_required`` (the question and a sealed
``requestState``, under a fixed key so that a server started again accepts it) and the
client sends the call again with the answer; with ``--legacy`` the server only speaks the
initialize handshake and asks mid-call (``elicitation/create``), waiting for the answer.
A ``book`` that completes appends a JSON line to the file named by ``MCP_TEST_RECORD``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
EMPTY = {"type": "object", "properties": {}}
BIG = 10 * 1024 * 1024


def _tools() -> list[types.Tool]:
    tools = [
        types.Tool(name="shout", description="The text in capitals.", input_schema=OBJECT),
        types.Tool(name="fail", description="Always an error result.", input_schema=EMPTY),
        types.Tool(
            name="sleep",
            description="Sleeps for `seconds`.",
            input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
        ),
        types.Tool(name="die", description="The server exits mid-call.", input_schema=EMPTY),
        types.Tool(name="huge", description="A 10 MB text result.", input_schema=EMPTY),
        types.Tool(name="grow", description="Adds the tool `later`.", input_schema=EMPTY),
        types.Tool(
            name="weather",
            description="Structured content and an image.",
            input_schema=EMPTY,
            output_schema={"type": "object", "properties": {"celsius": {"type": "number"}}},
        ),
        types.Tool(
            name="book",
            description="Books a room in `city`; asks how many nights.",
            input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        types.Tool(
            name="book_twice",
            description="Asks two questions in one round, then books.",
            input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        types.Tool(name="odd_ask", description="Asks with a nested schema.", input_schema=EMPTY),
        types.Tool(
            name="count",
            description="Counts to `to`, reporting progress at each step.",
            input_schema={"type": "object", "properties": {"to": {"type": "integer"}}},
        ),
    ]
    if GROWN:
        tools.append(types.Tool(name="later", description="Added at run time.", input_schema=EMPTY))
    if "--bad-schema" in sys.argv:
        tools.append(
            types.Tool(
                name="listy", description="A non-object schema.", input_schema={"type": "array"}
            )
        )
    return tools


GROWN: list[bool] = []


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


#: What a tool call answers: a result, or (stateless protocol) the questions it needs.
ToolAnswer = types.CallToolResult | types.InputRequiredResult


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> ToolAnswer:
    args = params.arguments or {}
    name = params.name
    if name == "shout":
        return _text(str(args.get("text", "")).upper())
    if name == "fail":
        return _text("the disk is full", error=True)
    if name == "sleep":
        await anyio.sleep(float(args.get("seconds", 1)))
        return _text("slept")
    if name == "die":
        sys.stdout.flush()
        os._exit(3)
    if name == "huge":
        return _text("x" * BIG)
    if name == "grow":
        GROWN.append(True)
        await ctx.session.send_tool_list_changed()
        return _text("grown")
    if name == "later":
        return _text("later ran")
    if name == "count":
        to = int(args.get("to", 3))
        for step in range(1, to + 1):
            await ctx.session.report_progress(step, to, f"step {step} of {to}")
        return _text(f"counted to {to}")
    if name in ("book", "book_twice", "odd_ask"):
        return await _elicit_tool(ctx, params)
    if name == "weather":
        return types.CallToolResult(
            content=[
                types.TextContent(text='{"celsius": 21}'),
                types.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            ],
            structured_content={"celsius": 21},
        )
    return _text(f"unknown tool {name}", error=True)


NIGHTS = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "minimum": 1, "maximum": 30, "title": "Nights"},
        "breakfast": {"type": "boolean"},
    },
    "required": ["nights"],
}
NAME = {"type": "object", "properties": {"guest": {"type": "string"}}, "required": ["guest"]}
NESTED = {
    "type": "object",
    "properties": {"address": {"type": "object", "properties": {"street": {"type": "string"}}}},
}


def _questions(name: str, city: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """What a tool asks, by the key of each question."""
    if name == "odd_ask":
        return {"address": ("Where do you live?", NESTED)}
    asked = {"nights": (f"How many nights in {city}?", NIGHTS)}
    if name == "book_twice":
        asked["guest"] = ("Who is the guest?", NAME)
    return asked


async def _elicit_tool(ctx: Any, params: types.CallToolRequestParams) -> ToolAnswer:
    """Ask every question of the tool, then book with the answers (or tell why not)."""
    city = str((params.arguments or {}).get("city", "Paris"))
    asked = _questions(params.name, city)
    answers: dict[str, types.ElicitResult] = {}
    if ctx.protocol_version in MODERN:
        given = params.input_responses or {}
        for key in asked:
            found = given.get(key)
            if isinstance(found, types.ElicitResult):
                answers[key] = found
        missing = {
            key: types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
            for key, (message, schema) in asked.items()
            if key not in answers
        }
        if missing:
            return types.InputRequiredResult(input_requests=missing, request_state=f"ask:{city}")
    else:
        for key, (message, schema) in asked.items():
            answers[key] = await ctx.session.elicit_form(
                message, schema, related_request_id=ctx.request_id
            )
    refused = next((a.action for a in answers.values() if a.action != "accept"), None)
    if refused is not None:
        return _text(f"not booked ({refused})")
    content: dict[str, Any] = {}
    for answer in answers.values():
        content.update(answer.content or {})
    record = os.environ.get("MCP_TEST_RECORD")
    if record:
        line = json.dumps({"tool": params.name, "city": city, **content}) + "\n"
        async with await anyio.open_file(record, "a", encoding="utf-8") as out:
            await out.write(line)
    return _text(f"booked {content.get('nights')} nights in {city} {json.dumps(content)}")


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name="greet",
                description="A greeting.",
                arguments=[types.PromptArgument(name="who", required=True)],
            )
        ]
    )


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    who = (params.arguments or {}).get("who", "nobody")
    return types.GetPromptResult(
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=f"Greet {who}.")),
            types.PromptMessage(role="assistant", content=types.TextContent(text="Hello!")),
        ]
    )


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri="memo://readme", name="readme", mime_type="text/plain"),
            types.Resource(uri="memo://logo", name="logo", mime_type="image/png"),
        ]
    )


async def read_resource(
    ctx: Any, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "memo://readme":
        contents: list[Any] = [
            types.TextResourceContents(uri=uri, mime_type="text/plain", text="Read me.")
        ]
    elif uri == "memo://logo":
        contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob="AAEC")]
    else:
        raise ValueError(f"no resource {uri}")
    return types.ReadResourceResult(contents=contents)


MODERN = ("2026-07-28",)
#: A fixed key: a server started again (a new process) accepts the state it sealed before.
STATE_KEY = b"framework-agents-test-server-request-state-key-0001"

SERVER = Server(
    "framework-agents-test-server",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
)


SERVER.middleware.append(
    RequestStateBoundary(
        RequestStateSecurity(keys=[STATE_KEY]), default_audience="framework-agents-test-server"
    )
)


async def main() -> None:
    options = SERVER.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        if "--legacy" in sys.argv:  # the initialize handshake only: a stateful session
            async with SERVER.lifespan(SERVER) as state:
                await serve_loop(SERVER, read, write, lifespan_state=state, init_options=options)
        else:
            await SERVER.run(read, write, options)


if __name__ == "__main__":
    asyncio.run(main())
