"""An MCP server's tools as framework :class:`~framework_agents.tools.Tool` objects.

Each tool keeps the server's description and input schema; a call sends the arguments as
the model wrote them (the server validates them) and turns the result into the tool's
return value (see ``_convert``). A question of the server raises
``ElicitationRequired`` (``_elicit``); the call made again with the human's answer in its
``ToolContext`` goes on from it; the server's progress notifications go to the context's
``report_progress`` (a ``tool_progress`` stream event). What a call reports — an error
result, no answer within the timeout, an answer too large or unreadable — raises
:class:`MCPToolError`, which the agent shows the model as a tool error. A server that is
gone raises ``BACKEND_UNAVAILABLE``, which fails the run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol

from ..elicitation import ElicitationAnswer
from ..errors import InvalidArgumentError
from ..tools import Tool, ToolContext, ToolOutput
from ._convert import error_text, tool_output

__all__ = ["ApprovalRule", "MCPToolError", "Reporter", "approval_rule", "make_tool", "selected"]

#: Where a call's progress goes: ``ToolContext.report_progress(progress, total, message)``.
Reporter = Callable[[float, float | None, str | None], None]

#: ``requires_approval`` of :meth:`MCPClient.tools`: for all, for the names given, or asked.
ApprovalRule = bool | Collection[str] | Callable[[str], bool]


class MCPToolError(Exception):
    """A tool call the server could not complete (the agent shows the model its text)."""


class Caller(Protocol):
    """What a tool needs of its client: one call (``_client.MCPClient`` is one)."""

    async def call_tool(
        self,
        name: str,
        args: dict[str, Any],
        *,
        call_timeout: float | None,
        answer: ElicitationAnswer | None = None,
        progress: Reporter | None = None,
    ) -> Any: ...  # a CallToolResult


def approval_rule(value: object) -> Callable[[str], bool]:
    """``requires_approval`` checked once, as a predicate on server names."""
    if isinstance(value, bool):
        return lambda _name: value
    if isinstance(value, str):
        raise InvalidArgumentError(
            f"requires_approval names tools in a set, not a string: {{{value!r}}}"
        )
    if isinstance(value, Collection):
        names = frozenset(value)
        if not all(isinstance(n, str) for n in names):
            raise InvalidArgumentError("requires_approval must hold tool names (strings)")
        return names.__contains__
    if callable(value):
        rule = value

        def asked(name: str) -> bool:
            answer = rule(name)
            if not isinstance(answer, bool):
                raise InvalidArgumentError(
                    f"requires_approval({name!r}) must return a bool, got {answer!r:.100}"
                )
            return answer

        return asked
    raise InvalidArgumentError(
        "requires_approval must be a bool, a set of tool names or a callable(name) -> bool, "
        f"not {type(value).__name__}"
    )


def _names(value: object, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Collection):
        raise InvalidArgumentError(f"{what} must be a collection of tool names, got {value!r:.100}")
    if not all(isinstance(n, str) for n in value):
        raise InvalidArgumentError(f"{what} must hold tool names (strings)")
    return frozenset(value)


def selected(offered: list[str], include: object, exclude: object) -> list[str]:
    """The server names ``include``/``exclude`` keep, in the server's order.

    Naming a tool the server does not offer is ``INVALID_ARGUMENT`` (a typo would
    otherwise silently drop or keep a tool).
    """
    kept, dropped = _names(include, "include"), _names(exclude, "exclude")
    for given, what in ((kept, "include"), (dropped, "exclude")):
        unknown = sorted((given or frozenset()) - set(offered))
        if unknown:
            raise InvalidArgumentError(
                f"{what} names tools the server does not offer: {unknown}; it offers {offered}"
            )
    return [n for n in offered if (kept is None or n in kept) and n not in (dropped or ())]


def make_tool(
    client: Caller,
    listed: Any,
    *,
    prefix: str,
    requires_approval: bool,
    call_timeout: float | None,
    max_result_chars: int,
) -> Tool:
    """One listed tool (an SDK ``Tool``) as a framework tool named ``prefix + name``."""
    server_name: str = listed.name
    name = prefix + server_name

    async def call(args: dict[str, Any], context: ToolContext | None) -> str | ToolOutput:
        answer = context.answer if context is not None else None
        report = context.report_progress if context is not None else None
        result = await client.call_tool(
            server_name, args, call_timeout=call_timeout, answer=answer, progress=report
        )
        if result.is_error:
            raise MCPToolError(error_text(result))
        value, size = tool_output(result)
        if size > max_result_chars:
            raise MCPToolError(
                f"the result is {size} characters, over the limit of {max_result_chars} "
                "(max_result_chars); ask for less"
            )
        return value

    call.__name__ = name
    schema = listed.input_schema
    if not (isinstance(schema, dict) and schema.get("type") == "object"):
        raise InvalidArgumentError(
            f"MCP tool {server_name!r}: its input schema is not an object schema "
            f"({schema!r:.200}); leave it out with exclude={{{server_name!r}}}"
        )
    return Tool.from_schema(
        name, listed.description or "", schema, call, requires_approval=requires_approval
    )
