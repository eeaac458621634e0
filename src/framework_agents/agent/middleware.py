"""Middleware: hooks around every model call and every tool call.

A middleware is any object with some of ``before_model``, ``after_model``,
``before_tool`` and ``after_tool`` (sync or async), each taking ONE typed context. Hooks
run in the order the middleware were given, for "before" and "after" alike. A hook changes
the call by assigning to its context:

* ``before_model(ctx: ModelCallContext)``: replace ``ctx.messages`` (what is sent; the
  stored history is not changed) or ``ctx.system_prompt``.
* ``after_model(ctx: ModelCallContext)``: replace ``ctx.response``.
* ``before_tool(ctx: ToolCallContext)``: replace ``ctx.call`` (e.g. other arguments), or
  set ``ctx.result`` to answer the call without running the tool.
* ``after_tool(ctx: ToolCallContext)``: replace ``ctx.result``.

Whatever a hook returns is ignored. A hook that raises fails the run (it is code of
yours, not model input). ``await ctx.pause()`` (either context) saves the run's thread
now, as a tool's :class:`~framework_agents.tools.ToolContext` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .._util import maybe_await
from ..messages import Message, ToolCall
from ..models._base import ToolSpec
from ..tools import no_thread

if TYPE_CHECKING:
    from ..hitl import ResolvedDecision
    from ..tools import Tool
    from .agent import Agent

__all__ = ["HookName", "Middleware", "MiddlewareChain", "ModelCallContext", "ToolCallContext"]

HookName = Literal["before_model", "after_model", "before_tool", "after_tool"]
_HOOKS: tuple[HookName, ...] = ("before_model", "after_model", "before_tool", "after_tool")


@dataclass(slots=True)
class ModelCallContext:
    """One model call: what is sent and, in ``after_model``, what came back."""

    agent: Agent
    messages: list[Message]
    tools: list[ToolSpec]
    system_prompt: str | None
    turn: int
    response: Message | None = None
    #: ``await ctx.pause()``: save the run's thread now (see ``ToolContext.pause``).
    pause: Callable[[], Awaitable[None]] = field(default=no_thread, repr=False, compare=False)


@dataclass(slots=True)
class ToolCallContext:
    """One tool call: the call (as decided), the tool, and in ``after_tool`` its result."""

    agent: Agent
    call: ToolCall
    tool: Tool | None
    turn: int
    decision: ResolvedDecision | None = None
    result: Message | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: ``await ctx.pause()``: save the run's thread now (see ``ToolContext.pause``).
    pause: Callable[[], Awaitable[None]] = field(default=no_thread, repr=False, compare=False)


class Middleware:
    """Optional base class: every hook does nothing; override the ones you need."""

    def before_model(self, ctx: ModelCallContext) -> Any:
        """Called before each model call."""

    def after_model(self, ctx: ModelCallContext) -> Any:
        """Called after each model call."""

    def before_tool(self, ctx: ToolCallContext) -> Any:
        """Called before each tool call."""

    def after_tool(self, ctx: ToolCallContext) -> Any:
        """Called after each tool call."""


class MiddlewareChain:
    """The hooks of several middleware, looked up once, called in order."""

    __slots__ = ("_hooks", "middleware")

    def __init__(self, middleware: Sequence[object]) -> None:
        self.middleware: tuple[object, ...] = tuple(middleware)
        self._hooks: dict[HookName, list[Callable[[Any], Any]]] = {
            name: [h for h in (getattr(m, name, None) for m in self.middleware) if callable(h)]
            for name in _HOOKS
        }

    def has(self, name: HookName) -> bool:
        """Whether any middleware implements ``name``."""
        return bool(self._hooks[name])

    async def run(self, name: HookName, ctx: ModelCallContext | ToolCallContext) -> None:
        """Call every ``name`` hook with ``ctx``, in order."""
        for hook in self._hooks[name]:
            await maybe_await(hook(ctx))
