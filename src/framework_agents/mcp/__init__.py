"""Tools, resources and prompts of Model Context Protocol servers (extra ``mcp``).

:class:`MCPClient` speaks to one server, started as a subprocess over stdio or reached
over streamable HTTP, through the protocol's official SDK. Its tools become framework
:class:`~framework_agents.tools.Tool` objects any :class:`~framework_agents.Agent` takes::

    async with MCPClient.stdio("node", ["server.js"]) as client:
        agent = Agent(model, tools=await client.tools(prefix="files_"))

Errors: a server that cannot be started or reached, or that dies, is
:class:`~framework_agents.errors.BackendUnavailableError` (``BACKEND_UNAVAILABLE``); bad
arguments (a tool schema that is not an object schema) ``INVALID_ARGUMENT``; what a tool
call reports (an error result, a timeout, an unreadable answer) is a tool error the model
sees (:class:`MCPToolError`).

A server's question during a call (elicitation) raises
:class:`~framework_agents.hitl.HitlInterrupt` with ``kind == "elicitation"`` through the
agent; ``resume`` with the answer completes the call (``_elicit``).

Not here yet: serving over MCP, and progress notifications as stream events (the agent's
stream has no event a tool emits while it runs; progress is logged at DEBUG level).
"""

from __future__ import annotations

from ._client import MCPClient
from ._convert import MCPPrompt, MCPResource, ResourceContents
from ._tools import MCPToolError

__all__ = ["MCPClient", "MCPPrompt", "MCPResource", "MCPToolError", "ResourceContents"]
