"""A small MCP server on the official Python SDK (its low-level ``Server``), for the client tests.

Run as ``python tests/mcp/server.py [stdio|http PORT] [--bad-schema]``. Its tools cover what a
reference server does not do on purpose: an error result, a slow call, a server that dies in
the middle of a call, a 10 MB result, a tool added at run time (``tools/list_changed``), and
with ``--bad-schema`` a tool whose input schema is not an object schema.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
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


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
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
    if name == "weather":
        return types.CallToolResult(
            content=[
                types.TextContent(text='{"celsius": 21}'),
                types.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            ],
            structured_content={"celsius": 21},
        )
    return _text(f"unknown tool {name}", error=True)


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


SERVER = Server(
    "framework-agents-test-server",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
)


async def main() -> None:
    options = SERVER.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await SERVER.run(read, write, options)


if __name__ == "__main__":
    asyncio.run(main())
