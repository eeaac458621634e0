"""``/mcp``: the agent served over the Model Context Protocol (streamable HTTP, stateless).

The official SDK's low-level ``Server`` and its stateless session manager speak the wire
protocol; this module maps tool calls to our runner and our errors. Tools:

* ``ask(thread_id, text)``: runs the agent on the thread (one namespace with the JSON API,
  A2A and AG-UI) and returns its answer;
* ``decide(thread_id, interrupt_id, decision, reason?, args?)``: answers an approval the
  thread waits for (what a client that cannot answer an elicitation calls);
* with a bank, ``memory_search``, ``memory_remember`` and ``memory_forget``, bound to the
  namespace the server was configured with (no tool takes a namespace).

An approval ``ask`` meets comes back to a client that declared elicitation, on the
stateless protocol (2026-07-28), as ``input_required``: one form elicitation (decision,
reason, and the call's arguments when they are all strings, numbers or booleans and the
tool allows an edit) and a ``requestState`` naming the thread and the interrupt. The
client's retry carries the answer, which resumes the thread; nothing is held in memory
between the two requests, so a restart or another replica in between changes nothing. A
tool's own question (an MCP server's elicitation the agent met) is passed on as it was
asked, and the answer resumes the thread as ``{"answer": ...}`` (or a decline, a cancel).
The state is not trusted: it names an interrupt, and the answer is refused
(``HITL_DECISION``) unless that interrupt is still the one the thread (named by the call's
own ``thread_id``) waits for. Any other client (the 2025 protocols, which have no way to
ask back on a stateless server) gets a result saying which approval is pending and how
to answer it.

Failures are tool results with ``isError`` whose text is ``[CODE] message`` and whose
structured content is ``{"error": {"code", "message"}}``; an unknown tool is a JSON-RPC
error ``-32602`` with ``[NOT_FOUND]``. No answer carries a stack trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Literal

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from starlette.routing import Route

from ..agent.events import InterruptEvent, RunErrorEvent, RunFinishedEvent
from ..bank import MemoryBank
from ..bank.memory import namespace_tools
from ..errors import HitlDecisionError
from ..tools import Tool, encode_tool_result
from ._errors import NotFoundError, error_payload
from ._runner import RunHandle, ThreadRunner
from ._shapes import Pending
from ._tenants import bank_namespace, current_tenant

__all__ = ["APPROVAL_KEY", "mcp_routes"]

logger = logging.getLogger(__name__)

#: The key of the approval in an ``input_required`` answer's requests and responses.
APPROVAL_KEY = "approval"
#: The prefix of an argument's field in the approval form.
_ARG = "args."

ThreadId = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(min_length=1, max_length=100_000)]


async def _ask(thread_id: ThreadId, text: Text) -> None:
    """Send a message to the agent on a thread and get its answer.

    Args:
        thread_id: The conversation: a new id starts one, a known id continues it (the
            same thread the server's JSON API, A2A and AG-UI see).
        text: The message.
    """


async def _decide(
    thread_id: ThreadId,
    interrupt_id: Annotated[str, Field(min_length=1, max_length=200)],
    decision: Literal["approve", "reject", "edit"],
    reason: Annotated[str, Field(max_length=2000)] | None = None,
    args: dict[str, Any] | None = None,
) -> None:
    """Answer the approval a thread waits for, then get the agent's answer.

    Args:
        thread_id: The thread whose approval this answers.
        interrupt_id: The approval's id, as ask reported it.
        decision: approve, reject, or edit (run the call with other arguments).
        reason: Why, for a rejection (the agent reads it).
        args: The call's new arguments, for an edit.
    """


def _schema(tool: Tool) -> types.Tool:
    return types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)


def _text(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def _failure(exc: BaseException) -> types.CallToolResult:
    """A tool error with our code (an internal error's text stays in the log)."""
    payload = error_payload(exc)
    return types.CallToolResult(
        content=[types.TextContent(text=f"[{payload['code']}] {payload['message']}")],
        structured_content={"error": payload},
        is_error=True,
    )


def _simple(args: dict[str, Any]) -> bool:
    """Whether every argument is a string, number or boolean (a form can edit those)."""
    return all(isinstance(v, str | int | float | bool) for v in args.values())


def _field(value: Any, name: str) -> dict[str, Any]:
    kind = (
        "boolean"
        if isinstance(value, bool)
        else "integer"
        if isinstance(value, int)
        else "number"
        if isinstance(value, float)
        else "string"
    )
    return {"type": kind, "title": name, "default": value}


def approval_form(pending: Pending) -> types.ElicitRequest:
    """The form elicitation that asks for a decision on ``pending``."""
    editable = "edit" in pending.allowed_decisions and _simple(pending.args)
    decisions = [d for d in pending.allowed_decisions if d != "edit" or editable]
    properties: dict[str, Any] = {
        "decision": {"type": "string", "title": "Decision", "enum": decisions},
        "reason": {"type": "string", "title": "Reason (for a rejection)"},
    }
    if editable:
        properties |= {_ARG + k: _field(v, k) for k, v in pending.args.items()}
    message = (
        f"The agent wants to call {pending.tool}({json.dumps(pending.args, ensure_ascii=False)})."
        " Approve it" + (", edit its arguments" if editable else "") + " or reject it?"
    )
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=message,
            requested_schema={
                "type": "object",
                "properties": properties,
                "required": ["decision"],
            },
        )
    )


def decision_of(answer: types.ElicitResult, pending: Pending) -> Any:
    """Our decision for the client's answer to :func:`approval_form` (``None``: cancelled).

    A decline is a rejection; a cancel leaves the approval open.
    """
    if answer.action == "cancel":
        return None
    if answer.action == "decline":
        return {"reject": "The MCP client declined the approval."}
    content = answer.content or {}
    kind = content.get("decision")
    reason = content.get("reason")
    if kind == "approve":
        return "approve"
    if kind == "reject":
        return {"reject": reason} if isinstance(reason, str) and reason.strip() else "reject"
    if kind == "edit":
        edited = dict(pending.args)
        edited |= {
            k[len(_ARG) :]: v for k, v in content.items() if k.startswith(_ARG) and v is not None
        }
        return {"edit": edited}
    raise HitlDecisionError(f"decision must be approve, reject or edit, not {kind!r:.40}")


#: Our answer to a tool's question, by the action the MCP client's human took.
_ANSWERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "accept": lambda content: {"answer": content},
    "decline": lambda content: {"decline": True},
    "cancel": lambda content: {"cancel": True},
}


def _passed_on(question: dict[str, Any]) -> types.ElicitRequest:
    """A tool's question (an MCP server's elicitation the agent met), asked of our client."""
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=str(question["message"]), requested_schema=dict(question["schema"])
        )
    )


def _pending_result(
    pending: Pending, thread_id: str, question: dict[str, Any] | None
) -> types.CallToolResult:
    """What a client that cannot answer an elicitation gets: what waits and how to answer."""
    if question is not None:
        text = (
            f"Waiting for an answer: a tool of the agent asks {question['message']!r} "
            f"(interrupt id {pending.interrupt_id}). Answer with POST "
            f"/api/threads/{thread_id}/resume and "
            f'{{"decisions": {{"{pending.interrupt_id}": {{"answer": {{...}}}}}}}}.'
        )
        return _text(
            text,
            {
                "status": "interrupted",
                "thread_id": thread_id,
                "interrupt_id": pending.interrupt_id,
                "elicitation": {"message": question["message"], "schema": question["schema"]},
            },
        )
    call = f"{pending.tool}({json.dumps(pending.args, ensure_ascii=False)})"
    text = (
        f"Waiting for approval: the agent wants to call {call} (interrupt id "
        f"{pending.interrupt_id}). Answer with the tool decide(thread_id={thread_id!r}, "
        f"interrupt_id={pending.interrupt_id!r}, decision='approve' | 'reject' | 'edit'), "
        f"or POST /api/threads/{thread_id}/resume with "
        f'{{"decisions": {{"{pending.interrupt_id}": "approve"}}}}.'
    )
    return _text(
        text, {"status": "interrupted", "thread_id": thread_id, "pending": pending.to_json()}
    )


class _McpTools:
    """The tools ``/mcp`` serves, and what a call of each does."""

    def __init__(
        self,
        runner: ThreadRunner,
        memory: Sequence[Tool],
        memory_of: Callable[[], Sequence[Tool]] | None = None,
    ) -> None:
        """Serve ``runner``'s threads; ``memory``: the memory tools (listed, and called).

        ``memory_of``: the memory tools of the request being served, when they depend on
        it (a tenant's own namespace); ``memory`` then only gives the listed schemas.
        """
        self.runner = runner
        self.ask = Tool(_ask, name="ask")
        self.decide = Tool(_decide, name="decide")
        self.memory = {tool.name: tool for tool in memory}
        self.memory_of = memory_of
        self.listed = [_schema(t) for t in (self.ask, self.decide, *memory)]

    def _memory_tool(self, name: str) -> Tool | None:
        if name not in self.memory:
            return None
        if self.memory_of is None:
            return self.memory[name]
        return {tool.name: tool for tool in self.memory_of()}[name]

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """``tools/list``: every tool, one page."""
        return types.ListToolsResult(tools=self.listed)

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """``tools/call``: a result, ``input_required`` for an approval, or a tool error."""
        name, args = params.name, params.arguments or {}
        try:
            if name == "ask":
                return await self._ask(ctx, params, **self.ask.validate(args))
            if name == "decide":
                return await self._decide(ctx, **self.decide.validate(args))
            tool = self._memory_tool(name)
            if tool is None:
                known = ", ".join(t.name for t in self.listed)
                error = NotFoundError(f"no tool {name[:100]!r} (tools: {known})")
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"[{error.code}] {error.message}",
                    data={"error": error_payload(error)},
                )
            return _text(encode_tool_result(await tool.invoke(args)))
        except MCPError:
            raise
        except Exception as exc:  # an AgentError with its code; anything else INTERNAL
            return _failure(exc)

    async def _ask(
        self, ctx: Any, params: types.CallToolRequestParams, *, thread_id: str, text: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.request_state is not None:  # the retry that carries the approval's answer
            return await self._answered(ctx, params, thread_id)
        handle = await self.runner.start_run(thread_id, text)
        return await self._outcome(ctx, handle)

    async def _answered(
        self, ctx: Any, params: types.CallToolRequestParams, thread_id: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        pending = await self._open(thread_id, _state_interrupt(params.request_state))
        answer = (params.input_responses or {}).get(APPROVAL_KEY)
        if not isinstance(answer, types.ElicitResult):
            raise HitlDecisionError(f"the retry carries no answer under {APPROVAL_KEY!r}")
        if pending.asks:  # a tool's question, answered as it was asked
            decision: Any = _ANSWERS[answer.action](answer.content or {})
        else:
            decision = decision_of(answer, pending)
        if decision is None:
            return _pending_result(pending, thread_id, None)
        handle = await self.runner.start_resume(thread_id, {pending.interrupt_id: decision})
        return await self._outcome(ctx, handle)

    async def _decide(
        self,
        ctx: Any,
        *,
        thread_id: str,
        interrupt_id: str,
        decision: str,
        reason: str | None,
        args: dict[str, Any] | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        pending = await self._open(thread_id, interrupt_id)
        chosen: Any = decision
        if decision == "reject" and reason:
            chosen = {"reject": reason}
        elif decision == "edit":
            if args is None:
                raise HitlDecisionError("an edit needs args, the call's new arguments")
            chosen = {"edit": args}
        handle = await self.runner.start_resume(thread_id, {pending.interrupt_id: chosen})
        return await self._outcome(ctx, handle)

    async def _open(self, thread_id: str, interrupt_id: str) -> Pending:
        """The approval ``thread_id`` waits for, if ``interrupt_id`` (else ``HITL_DECISION``)."""
        checkpoint = await self.runner.require(thread_id)
        pending = await self.runner.pending_of(checkpoint)
        if pending is None:
            raise HitlDecisionError(f"thread {thread_id!r} has no approval waiting")
        if interrupt_id != pending.interrupt_id:
            raise HitlDecisionError(
                f"the approval this answers ({interrupt_id[:60]!r}) is not open; the one "
                f"thread {thread_id!r} waits for is {pending.interrupt_id!r}"
            )
        return pending

    async def _outcome(
        self, ctx: Any, handle: RunHandle
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The run's answer, its approval (elicited or described) or its failure."""
        last: Any = None
        async for event in handle.events():
            if isinstance(event, RunFinishedEvent | InterruptEvent | RunErrorEvent):
                last = event
        if isinstance(last, RunFinishedEvent):
            return _text(last.result.text or "")
        if isinstance(last, RunErrorEvent):
            return _failure(last.error)
        checkpoint = await self.runner.load(handle.thread_id)
        pending = await self.runner.pending_of(checkpoint) if checkpoint else None
        if pending is None:
            return _failure(RuntimeError("the run ended without an outcome"))
        question = {"message": pending.message, "schema": pending.schema} if pending.asks else None
        if not _can_elicit(ctx):
            return _pending_result(pending, handle.thread_id, question)
        form = approval_form(pending) if question is None else _passed_on(question)
        state = json.dumps({"v": 1, "interrupt_id": pending.interrupt_id})
        return types.InputRequiredResult(input_requests={APPROVAL_KEY: form}, request_state=state)


def _can_elicit(ctx: Any) -> bool:
    """Whether the request can be answered with an elicitation (see the module docstring)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def _state_interrupt(state: str | None) -> str:
    """The interrupt id a ``requestState`` names (``HITL_DECISION`` if it names none)."""
    try:
        data = json.loads(state or "")
    except ValueError:
        data = None
    interrupt = data.get("interrupt_id") if isinstance(data, dict) else None
    if not isinstance(interrupt, str) or data.get("v") != 1:
        raise HitlDecisionError("requestState is not one this server wrote")
    return interrupt


def mcp_routes(
    runner: ThreadRunner,
    *,
    name: str,
    bank: MemoryBank | None,
    namespace: Sequence[str],
    tenants: bool = False,
) -> tuple[list[Route], Callable[[], AbstractAsyncContextManager[None]]]:
    """The ``/mcp`` route and the lifespan its session manager runs in.

    ``bank`` adds the memory tools, bound to ``namespace``; with ``tenants``, to the
    current tenant's ``namespace`` (its own tools, made on its first call).
    """
    memory = namespace_tools(bank, tuple(namespace)) if bank is not None else []
    memory_of: Callable[[], Sequence[Tool]] | None = None
    if tenants and bank is not None:
        made: dict[str | None, list[Tool]] = {}

        def tenant_tools() -> Sequence[Tool]:
            tenant = current_tenant()
            if tenant not in made:
                made[tenant] = namespace_tools(bank, bank_namespace(namespace))
            return made[tenant]

        memory_of = tenant_tools
    tools = _McpTools(runner, memory, memory_of)
    server: Server[Any] = Server(
        name,
        version="1.0.0",
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )
    manager = StreamableHTTPSessionManager(app=server, stateless=True)
    return [Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], manager.run
