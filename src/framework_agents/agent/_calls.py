"""One tool call of a model turn: its plan, its middleware and hooks, its execution.

A turn's calls are planned first (:class:`Plan`: the call as the model made it, as it
will run, and the human's decision on it), then each runs through :func:`run_planned`:
``before_tool`` middleware, the ``on_tool_start`` hook, the tool itself (every failure a
result the model can read, see :func:`_execute`), ``after_tool`` middleware. The progress
a running call reports is collected by a :class:`Progress` until the loop yields it.
:func:`run_call` runs one call outside a turn (a settled call of unknown outcome).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._telemetry import trace_tool
from ..elicitation import ElicitationAnswer, ElicitationRequired, schema_problem
from ..errors import BackendUnavailableError, InvalidArgumentError
from ..hitl import ResolvedDecision, ToolRejection
from ..messages import Message, ReasoningBlock, TextBlock, ToolCall
from ..tools import Tool, ToolArgumentsError, ToolContext, ToolOutput, encode_tool_result
from ._run import LoopRun, RunSetup
from .events import ToolProgressEvent
from .middleware import ToolCallContext

__all__ = ["Plan", "Progress", "run_call", "run_planned", "tool_message"]

# The loop's logger: these records were the loop's before the calls had a module.
logger = logging.getLogger("framework_agents.agent._loop")


@dataclass(slots=True)
class Plan:
    """One call of a turn, decided: as made, as it will run, and what a human said of it."""

    call: ToolCall  # as the model made it (its id answers the result)
    run_call: ToolCall  # as it will run (edited arguments)
    decision: ResolvedDecision | None
    answer: ElicitationAnswer | None = None  # a human's answer to the call's question
    landed: Message | None = None  # its result, from before a question stopped the turn


def tool_message(
    call: ToolCall, content: str | list[TextBlock | ReasoningBlock], **metadata: Any
) -> Message:
    """The tool message answering ``call`` with ``content`` (``metadata``: its kind, ...)."""
    return Message("tool", content, tool_call_id=call.id, name=call.name, metadata=metadata)


async def _execute(
    setup: RunSetup,
    run: LoopRun,
    tool: Tool | None,
    call: ToolCall,
    answer: ElicitationAnswer | None = None,
    report: _Reporter | None = None,
) -> Message:
    """Run one call; every failure becomes a result the model can read.

    But two: a backend the tool needs is gone (``BACKEND_UNAVAILABLE``, an MCP server that
    died): the model cannot fix that, so the run fails with it and the turn's unanswered
    calls are repaired as after a crash; and a question the tool asks a human
    (``ElicitationRequired``, with a schema of an allowed form), which stops the turn.
    """
    if tool is None:
        known = ", ".join(sorted(setup.tools)) or "none"
        return tool_message(
            call, f"Unknown tool {call.name!r}. Available tools: {known}.", kind="tool_error"
        )
    try:
        context = ToolContext(setup.owner, call, answer, pause=run.pause, on_progress=report)
        value = await tool.invoke(call.args, context=context)
    except ElicitationRequired as asked:
        problem = schema_problem(asked.elicitation.schema)
        if problem is None:
            raise
        return tool_message(
            call,
            f"Error: tool {call.name!r} asked a question it may not ask: {problem}",
            kind="tool_error",
        )
    except ToolArgumentsError as exc:
        return tool_message(
            call, f"Error: {exc.message}. Fix the arguments and try again.", kind="tool_error"
        )
    except ToolRejection as exc:
        return tool_message(call, f"Rejected: {exc.reason}", kind="rejected", reason=exc.reason)
    except BackendUnavailableError:
        raise
    except Exception as exc:
        logger.info("tool %r raised", call.name, exc_info=True)
        return tool_message(
            call, f"Error: tool {call.name!r} raised {type(exc).__name__}: {exc}", kind="tool_error"
        )
    if isinstance(value, ToolOutput):
        return tool_message(call, value.content, **value.metadata)
    try:
        text = encode_tool_result(value)
    except Exception as exc:  # e.g. bytes that are not UTF-8, a circular structure
        logger.info("tool %r returned a value that cannot be encoded", call.name, exc_info=True)
        return tool_message(
            call,
            f"Error: tool {call.name!r} returned a {type(value).__name__} that cannot be "
            f"encoded as text for the model: {exc}",
            kind="tool_error",
        )
    return tool_message(call, text)


def _preset_result(plan: Plan) -> Message | None:
    """The result a rejected call gets without running (``None``: the call runs)."""
    if plan.decision is None or plan.decision.kind != "reject":
        return None
    reason = plan.decision.reason or ""
    return tool_message(plan.call, f"Rejected: {reason}", kind="rejected", reason=reason)


def _checked_result(ctx: ToolCallContext, plan: Plan) -> Message:
    """``after_tool``'s result as a tool message answering ``plan.call``, arguments noted.

    An edited call's result records the arguments it ran with; a call approved by bare
    tool name (the human may never have seen these arguments: a re-issued call) records
    which ones ran.
    """
    result = ctx.result
    if not isinstance(result, Message):
        raise InvalidArgumentError(
            f"after_tool's ctx.result must be a Message, got {result!r:.200}"
        )
    if result.role != "tool" or result.tool_call_id != plan.call.id:
        result = result.model_copy(
            update={"role": "tool", "tool_call_id": plan.call.id, "name": plan.call.name}
        )
    decision = plan.decision
    if decision is None:
        return result
    noted = "edited_args" if decision.kind == "edit" else None
    if noted is None and decision.source == "wildcard":
        noted = "ran_args"
    if noted is None:
        return result
    return result.model_copy(update={"metadata": {**result.metadata, noted: plan.run_call.args}})


async def run_planned(
    setup: RunSetup, run: LoopRun, plan: Plan, turn: int, progress: Progress | None = None
) -> Message:
    """Middleware, decision and execution of one call; the result answers ``plan.call``.

    ``progress`` collects what the tool reports (``ToolContext.report_progress``).
    """
    if plan.landed is not None:
        return plan.landed  # ran before a question stopped its turn: not run again
    ctx = ToolCallContext(
        setup.owner,
        plan.run_call,
        setup.tools.get(plan.run_call.name),
        turn,
        decision=plan.decision,
        result=_preset_result(plan),
        pause=run.pause,
    )
    await setup.middleware.run("before_tool", ctx)
    if not isinstance(ctx.call, ToolCall):
        raise InvalidArgumentError(
            f"before_tool's ctx.call must be a ToolCall, got {ctx.call!r:.200}"
        )
    if ctx.result is None:
        tool = setup.tools.get(ctx.call.name)
        if run.hooks.on_tool_start is not None:
            await run.hooks.on_tool_start(ctx.call, plan.decision)
        if plan.decision is not None:
            run.ran.append(ctx.call)
        report = progress.reporter(ctx.call) if progress is not None else None
        ctx.result = await trace_tool(
            ctx.call, _execute(setup, run, tool, ctx.call, plan.answer, report)
        )
    await setup.middleware.run("after_tool", ctx)
    return _checked_result(ctx, plan)


async def run_call(
    setup: RunSetup,
    run: LoopRun,
    call: ToolCall,
    decision: ResolvedDecision | None,
    *,
    run_args: dict[str, Any] | None = None,
    answer: ElicitationAnswer | None = None,
) -> Message:
    """Run one call outside a model turn (a settled call of unknown outcome): its result.

    Middleware, hooks and execution as in a turn; ``run_args`` are the arguments it runs
    with (an edit), ``answer`` the answer to its question it ran with; the result answers
    ``call``. A question asked again here is a tool error (nothing can stop a settle).
    """
    run_as = call if run_args is None else call.model_copy(update={"args": run_args})
    plan = Plan(call, run_as, decision, answer=answer)
    try:
        return await run_planned(setup, run, plan, 0)
    except ElicitationRequired as asked:
        return tool_message(
            call,
            f"Error: tool {call.name!r} asked again ({asked.elicitation.message!r}) when it "
            "was run again after its outcome was unknown; call it again to ask the human",
            kind="tool_error",
        )


#: What ``ToolContext.on_progress`` is: ``(progress, total, message)``.
_Reporter = Callable[[float, float | None, str | None], None]


class Progress:
    """The progress the calls of one turn report, kept until the loop yields it."""

    def __init__(self) -> None:
        self.events: list[ToolProgressEvent] = []
        self.ready = asyncio.Event()

    def reporter(self, call: ToolCall) -> _Reporter:
        """What ``call``'s tool context reports through."""

        def report(progress: float, total: float | None, message: str | None) -> None:
            self.events.append(
                ToolProgressEvent(
                    call_id=call.id, tool=call.name, progress=progress, total=total, message=message
                )
            )
            self.ready.set()

        return report

    def take(self) -> list[ToolProgressEvent]:
        """The events reported since the last take."""
        events, self.events = self.events, []
        self.ready.clear()
        return events

    async def wait(
        self, pending: set[asyncio.Task[Message]]
    ) -> tuple[set[asyncio.Task[Message]], set[asyncio.Task[Message]]]:
        """``asyncio.wait`` for the first of ``pending`` to finish, or for some progress."""
        waiter: asyncio.Future[Any] = asyncio.ensure_future(self.ready.wait())
        try:
            done, left = await asyncio.wait({*pending, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        return {t for t in pending if t in done}, {t for t in pending if t in left}
