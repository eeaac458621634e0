"""The agent loop: one async-generator step function that both ``run()`` and ``stream()`` drive.

:func:`run_loop` takes a frozen :class:`RunSetup` (the model, tools by name, tool specs,
middleware, effective system prompt, conversation manager, limits, ``decide``) and a
:class:`LoopRun` (starting history, optional prompt, decisions, hooks), and yields events
while it works: model call, then the turn's tool calls (decided first, run concurrently),
then the next model call, until the model answers without tool calls. It never touches
memory and knows nothing of ``Agent``: the caller commits ``run.visible()`` (or
``run.kept_on_interrupt()`` after an interrupt). The :class:`RunHooks` are the seams
checkpointing uses. The run's types (``RunSetup``, ``LoopRun``, ``RunHooks``,
``ToolProgress``) live in ``_run`` and are re-exported here; one call's execution (its
middleware, hooks and the tool itself) lives in ``_calls``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from .._telemetry import tool_suspended, trace_chat, trace_chat_stream
from ..conversation.null import keeps_everything
from ..elicitation import ElicitationRequired
from ..errors import (
    AgentError,
    ContextOverflowError,
    InvalidArgumentError,
    MaxTurnsError,
    ModelError,
    OutputInvalidError,
)
from ..history import CheckedHistory, repair_history
from ..hitl import HitlInterrupt, ResolvedDecision, check_edit, resolve_decision
from ..messages import Message, ToolCall, new_id
from ..models._base import ModelDone, ReasoningDelta, TextDelta, ToolSpec
from ..tools import Tool
from ._calls import Plan, Progress, run_planned
from ._output import correction_text, parse_output
from ._run import Asked, LoopRun, Replay, RunHooks, RunSetup, ToolProgress
from .events import (
    AgentEvent,
    MessageCompletedEvent,
    MessageStartedEvent,
    ReasoningDeltaEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from .middleware import ModelCallContext

__all__ = [
    "MAX_OVERFLOW_RETRIES",
    "LoopRun",
    "RunHooks",
    "RunSetup",
    "ToolProgress",
    "kept_checked",
    "kept_well_formed",
    "run_loop",
    "unique_call_ids",
]

logger = logging.getLogger(__name__)

#: How many times one model call is retried after ``reduce()`` on a context overflow.
MAX_OVERFLOW_RETRIES = 3

_RETRY_KIND = "output_retry"


@dataclass(slots=True)
class _Reply:
    message: Message


def _same(a: Sequence[Message], b: Sequence[Message]) -> bool:
    """Whether two sequences hold equal messages (a C-level pass when they are the same)."""
    if len(a) != len(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return a == b
    if isinstance(b, CheckedHistory):
        return b == a
    if isinstance(a, CheckedHistory):
        return a == b
    return list(a) == list(b)


def _checked_messages(value: object, where: str) -> list[Message]:
    """``value`` as a list of messages, else ``INVALID_ARGUMENT`` naming ``where``."""
    if isinstance(value, list | tuple) and all(isinstance(m, Message) for m in value):
        return list(value)
    raise InvalidArgumentError(f"{where} must be a list of Message objects, got {value!r:.200}")


def kept_checked(
    new: object, known: CheckedHistory, where: str = "a conversation manager's result"
) -> CheckedHistory:
    """``new`` as a checked history: ``known`` when it holds the same messages, else repaired."""
    if isinstance(new, CheckedHistory):
        return new
    if isinstance(new, list | tuple) and _same(new, known):
        return known
    return CheckedHistory.repaired(_checked_messages(new, where))


def kept_well_formed(
    new: Sequence[Message],
    known: Sequence[Message],
    where: str = "a conversation manager's result",
) -> list[Message]:
    """``new`` repaired, skipping the repair when it is ``known`` (already well formed)."""
    if isinstance(new, CheckedHistory) or (isinstance(new, list | tuple) and _same(new, known)):
        return list(new)
    return repair_history(_checked_messages(new, where))


def _check_user_turn_kept(before: Sequence[Message], after: Sequence[Message]) -> None:
    """``CONTEXT_OVERFLOW`` if reducing ``before`` to ``after`` cut the newest user turn.

    What the user said is never cut to make room: when it cannot fit, the run fails.
    """
    newest = next((m.id for m in reversed(before) if m.role == "user"), None)
    if newest is not None and all(m.id != newest for m in after):
        raise ContextOverflowError(
            "the newest user turn does not fit the model's context: reducing the history "
            "would cut it, so the run stops instead; nothing was committed"
        )


def _check_model_context(ctx: ModelCallContext) -> None:
    """What ``before_model`` hooks left in ``ctx`` (besides messages) has the right types."""
    tools = ctx.tools
    if not (isinstance(tools, list | tuple) and all(isinstance(t, ToolSpec) for t in tools)):
        raise InvalidArgumentError(
            f"before_model's ctx.tools must be a list of ToolSpec objects, got {tools!r:.200}"
        )
    prompt = ctx.system_prompt
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidArgumentError(
            f"before_model's ctx.system_prompt must be a str or None, got {prompt!r:.200}"
        )


def unique_call_ids(message: Message) -> Message:
    """Give calls with an empty or repeated id a fresh one (ids only pair calls and results)."""
    seen: set[str] = set()
    calls: list[ToolCall] = []
    changed = False
    for call in message.tool_calls:
        if not call.id or call.id in seen:
            call = call.model_copy(update={"id": f"call_{new_id()}"})
            changed = True
        seen.add(call.id)
        calls.append(call)
    return message.model_copy(update={"tool_calls": calls}) if changed else message


def _check_assistant(value: object, where: str, error: type[AgentError]) -> Message:
    if not isinstance(value, Message) or value.role != "assistant":
        raise error(f"{where} must be an assistant Message, got {value!r:.200}")
    return value


@dataclass(slots=True)
class _Streamed:
    """What one model call streamed already (so the final message is not replayed)."""

    text: bool = False
    reasoning: bool = False


async def _ask(
    setup: RunSetup, sent: list[Message], ctx: ModelCallContext, message_id: str, seen: _Streamed
) -> AsyncIterator[AgentEvent | _Reply]:
    """One model request (streamed when the model streams); deltas, then a ``_Reply``."""
    if not callable(getattr(setup.model, "stream", None)):
        response = await trace_chat(
            setup.model,
            setup.model.complete(sent, ctx.tools, system_prompt=ctx.system_prompt),
            sent,
            ctx.system_prompt,
        )
        yield _Reply(response)
        return
    done: Message | None = None
    stream = trace_chat_stream(
        setup.model,
        setup.model.stream(sent, ctx.tools, system_prompt=ctx.system_prompt),  # type: ignore[attr-defined]
        sent,
        ctx.system_prompt,
    )
    async for chunk in stream:
        if isinstance(chunk, TextDelta):
            seen.text = True
            yield TextDeltaEvent(message_id=message_id, delta=chunk.text)
        elif isinstance(chunk, ReasoningDelta):
            seen.reasoning = True
            yield ReasoningDeltaEvent(message_id=message_id, delta=chunk.text)
        elif isinstance(chunk, ModelDone):
            done = chunk.message
    if done is None:
        raise ModelError("the model's stream ended without a ModelDone chunk")
    yield _Reply(done)


async def _reduce_after_overflow(setup: RunSetup, run: LoopRun) -> None:
    """Shrink ``run.transcript`` with the manager's ``reduce()``, or ``CONTEXT_OVERFLOW``.

    Never cuts the newest user turn: when only it (and the pins) is left, the run fails.
    """
    before = [m.id for m in run.transcript]
    reduced = kept_well_formed(
        await setup.manager().reduce(run.transcript),
        (),
        "a conversation manager's reduce() result",
    )
    if [m.id for m in reduced] == before:
        raise ContextOverflowError(
            "the newest user turn (with the pinned messages) does not fit the "
            f"model's context even after reducing ({len(before)} messages left); "
            "nothing was committed"
        )
    _check_user_turn_kept(run.transcript, reduced)
    logger.info(
        "context overflow: reduced history from %d to %d messages, retrying",
        len(before),
        len(reduced),
    )
    run.transcript = reduced


async def _prepared_call(
    setup: RunSetup, run: LoopRun, turn: int
) -> tuple[ModelCallContext, list[Message]]:
    """The ``before_model`` context of one call and the messages it sends (never empty)."""
    given = list(run.transcript)  # the model's own list: the loop appends to its transcript
    ctx = ModelCallContext(
        setup.owner,
        given,
        list(setup.tool_specs),
        setup.system_prompt,
        turn,
        pause=run.pause,
    )
    await setup.middleware.run("before_model", ctx)
    _check_model_context(ctx)
    sent = ctx.messages
    # run.transcript is well formed (an invariant of the loop), so the repair before the
    # model call is skipped when the messages to send are exactly the transcript: without
    # a before_model hook they are its copy untouched (no pass to compare them).
    untouched = sent is given and not setup.middleware.has("before_model")
    if not (untouched or (isinstance(sent, list) and _same(sent, run.transcript))):
        sent = repair_history(_checked_messages(sent, "before_model's ctx.messages"))
    if not sent:
        raise ContextOverflowError(
            "no message left to send to the model (a conversation manager or middleware "
            "removed them all); nothing was committed"
        )
    return ctx, [*run.context, *sent] if run.context else sent


async def _call_model(
    setup: RunSetup, run: LoopRun, turn: int
) -> AsyncIterator[AgentEvent | _Reply]:
    """One model call with overflow recovery; yields deltas, then a ``_Reply``."""
    message_id = new_id()
    yield MessageStartedEvent(message_id=message_id, turn=turn)
    seen = _Streamed()
    for attempt in range(MAX_OVERFLOW_RETRIES + 1):
        ctx, sent = await _prepared_call(setup, run, turn)
        reply: _Reply | None = None
        try:
            async for item in _ask(setup, sent, ctx, message_id, seen):
                if isinstance(item, _Reply):
                    reply = item
                else:
                    yield item
        except ContextOverflowError:
            if attempt >= MAX_OVERFLOW_RETRIES:
                raise
            await _reduce_after_overflow(setup, run)
            continue
        break
    assert reply is not None  # _ask ends with a _Reply or raises
    response = _check_assistant(reply.message, "a model's answer", ModelError)
    ctx.response = unique_call_ids(response.model_copy(update={"id": message_id}))
    await setup.middleware.run("after_model", ctx)
    response = _check_assistant(ctx.response, "after_model's ctx.response", InvalidArgumentError)
    if response.id != message_id:
        response = response.model_copy(update={"id": message_id})
    response = unique_call_ids(response)
    if not seen.reasoning:
        for block in response.reasoning:
            yield ReasoningDeltaEvent(message_id=message_id, delta=block.text)
    if not seen.text and response.text:
        yield TextDeltaEvent(message_id=message_id, delta=response.text)
    run.usage.add(response)
    yield MessageCompletedEvent(message=response, turn=turn)
    yield _Reply(response)


def _final_form(setup: RunSetup, message: Message) -> Message:
    """A final (tool-free) turn as stored: plain text for "v0", blocks kept for "v1"."""
    if setup.output_version == "v0" and not isinstance(message.content, str):
        return message.model_copy(update={"content": message.text})
    return message


def _replayed_plan(call: ToolCall, replay: Replay | None) -> Plan | None:
    """The plan of a replayed turn's call that landed or was answered, else ``None``."""
    if replay is None:
        return None
    if call.id in replay.landed:
        return Plan(call, call, None, landed=replay.landed[call.id])
    if call.id in replay.answers:
        # Answering is the human's decision on this call: it runs guarded, like an
        # approved call (its result is saved before the loop goes on).
        answered = ResolvedDecision("approve", "exact")
        return Plan(call, call, answered, answer=replay.answers[call.id])
    return None


async def _approval_plan(
    setup: RunSetup, run: LoopRun, response: Message, call: ToolCall, tool: Tool
) -> Plan:
    """The decided plan of an approval call; a suspend saves and raises the interrupt."""
    reason: str | None = None
    try:
        decision = await resolve_decision(tool, call.args, decisions=run.book, decide=setup.decide)
    except HitlInterrupt as raised:
        # A decide callback that raises the interrupt itself means "suspend": the loop
        # makes the interrupt (this call's id, the thread) and saves what it must.
        decision, reason = ResolvedDecision("suspend", "callback"), raised.reason
    if decision.kind == "suspend":
        interrupt = HitlInterrupt(
            call.name, call.args, call.id, thread_id=run.thread_id, reason=reason
        )
        run.kept = run.visible()
        if run.hooks.on_interrupt is not None:
            await run.hooks.on_interrupt(interrupt, list(run.kept), response)
        tool_suspended(call, interrupt)
        raise interrupt
    run_call = call
    if decision.kind == "edit":
        assert decision.args is not None
        check_edit(decision, tool)
        run_call = call.model_copy(update={"args": decision.args})
    return Plan(call, run_call, decision)


async def _plan_turn(
    setup: RunSetup, run: LoopRun, response: Message, replay: Replay | None = None
) -> list[Plan]:
    """Decide every approval call of a turn before any call runs (raises on suspend).

    A turn fully decided spends the stored decisions it used (see :class:`DecisionBook`).
    """
    plans: list[Plan] = []
    for call in response.tool_calls:
        tool = setup.tools.get(call.name)
        plan = _replayed_plan(call, replay)
        if plan is None and (tool is None or not tool.requires_approval):
            plan = Plan(call, call, None)
        if plan is None:
            assert tool is not None
            plan = await _approval_plan(setup, run, response, call, tool)
        plans.append(plan)
    # Every approval call of the turn is decided and the turn goes on to run: the stored
    # decisions it used are spent now, before any call runs (so no checkpoint written
    # while the turn runs still holds them), and a later turn that calls the tool again
    # is asked again. A turn that suspends spends nothing: its resume re-issues it.
    run.book.consume(
        p.decision.key for p in plans if p.decision is not None and p.decision.key is not None
    )
    return plans


async def _cancel_all(tasks: Sequence[asyncio.Task[Message]]) -> None:
    """Cancel the calls still running and wait until every one has stopped."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _result_event(message: Message) -> ToolResultEvent:
    return ToolResultEvent(
        call_id=message.tool_call_id or "", tool=message.name or "", message=message
    )


async def _run_tools(
    setup: RunSetup, run: LoopRun, response: Message, plans: list[Plan], turn: int
) -> AsyncIterator[AgentEvent]:
    """Run a turn's calls concurrently; yield each result as it lands; store in call order."""
    history = run.visible()
    run.transcript.append(response)
    hooks = run.hooks
    if hooks.on_turn_start is not None:
        await hooks.on_turn_start(list(history), response)
    progress = Progress()
    tasks = [asyncio.create_task(run_planned(setup, run, plan, turn, progress)) for plan in plans]
    position = {task: i for i, task in enumerate(tasks)}
    results: list[Message | None] = [None] * len(tasks)
    asked: list[tuple[int, ElicitationRequired]] = []
    try:
        pending = set(tasks)
        while pending:
            done, pending = await progress.wait(pending)
            for event in progress.take():
                yield event
            for task in sorted(done, key=position.__getitem__):
                error = task.exception()
                if isinstance(error, ElicitationRequired):
                    # The other calls finish (never cancelled half way); then the turn
                    # stops on the first question.
                    asked.append((position[task], error))
                    continue
                message = task.result()
                results[position[task]] = message
                yield _result_event(message)
                call = plans[position[task]].call
                await _report_result(hooks, history, response, call, message, results)
    finally:
        await _cancel_all(tasks)
    if asked:
        await _stop_on_question(
            run, history, response, plans, results, min(asked, key=lambda a: a[0])
        )
    run.transcript.extend(r for r in results if r is not None)
    if hooks.on_tool_turn is not None:
        await hooks.on_tool_turn(run.visible())


async def _report_result(
    hooks: RunHooks,
    history: list[Message],
    response: Message,
    call: ToolCall,
    message: Message,
    results: list[Message | None],
) -> None:
    """Tell ``on_tool_result`` a call's result landed, with the results landed so far."""
    if hooks.on_tool_result is not None:
        landed = [r for r in results if r is not None]
        await hooks.on_tool_result(ToolProgress(history, response, call, message, landed))


async def _stop_on_question(
    run: LoopRun,
    history: list[Message],
    response: Message,
    plans: list[Plan],
    results: list[Message | None],
    first: tuple[int, ElicitationRequired],
) -> None:
    """Raise the elicitation interrupt of the first call that asked (saved by the hooks).

    Other calls that asked too are left without a result: a resume runs them again, and
    they ask again.
    """
    index, signal = first
    call, elicitation = plans[index].call, signal.elicitation
    interrupt = HitlInterrupt(
        call.name,
        call.args,
        call.id,
        thread_id=run.thread_id,
        kind="elicitation",
        message=elicitation.message,
        schema=elicitation.schema,
    )
    run.kept = list(history)
    landed = [r for r in results if r is not None]
    if run.hooks.on_asked is not None:
        await run.hooks.on_asked(Asked(interrupt, elicitation, history, response, landed))
    tool_suspended(call, interrupt)
    raise interrupt


def _begin(run: LoopRun) -> None:
    """Build the transcript: the history repaired, then the prompt (if any)."""
    run.set_transcript(CheckedHistory.repaired(run.history))
    run.grown_from = run.checked
    if run.prompt is not None:
        run.transcript.append(run.prompt)
    run.started = True


def _next_turn(setup: RunSetup, run: LoopRun) -> int:
    """Count one more model turn (``MAX_TURNS`` past the limit): its number."""
    if run.turns >= setup.max_turns:
        raise MaxTurnsError(
            f"the run reached max_turns={setup.max_turns} model calls without a final answer"
        )
    run.turns += 1
    return run.turns


async def _manage(setup: RunSetup, run: LoopRun) -> None:
    """Let the conversation manager shape the transcript before a model call."""
    manager, checked = setup.manager(), run.checked_transcript()
    if keeps_everything(manager):
        return  # it would hand back the transcript's messages (no copy, no comparison)
    managed = await manager.before_model(checked)
    # A manager that keeps everything hands back the transcript's messages: one
    # list-to-list comparison, and the loop goes on with its own list.
    if not (isinstance(managed, list) and managed == run.transcript):
        run.set_transcript(kept_checked(managed, run.checked))


def _tool_call_events(setup: RunSetup, run: LoopRun, response: Message) -> list[ToolCallEvent]:
    """The events announcing a tool turn's calls (``MAX_TURNS`` when no turn is left)."""
    if run.turns >= setup.max_turns:
        raise MaxTurnsError(
            f"the model still called tools after max_turns={setup.max_turns} model calls"
        )
    events = []
    for call in response.tool_calls:
        tool = setup.tools.get(call.name)
        requires_approval = bool(tool and tool.requires_approval)
        events.append(
            ToolCallEvent(call=call, message_id=response.id, requires_approval=requires_approval)
        )
    return events


def _output_parsed(setup: RunSetup, run: LoopRun, response: Message, failures: int) -> bool:
    """Parse a final answer's structured output into ``run.output``.

    ``False`` when it is invalid and a correction was added for another answer (the
    invalid answer and the correction are hidden from the stored history);
    ``OUTPUT_INVALID`` once ``failures`` used up the retries.
    """
    if setup.response_format is None:
        return True
    try:
        run.output = parse_output(setup.response_format, response.text)
    except ValidationError as exc:
        if failures >= setup.output_retries:
            raise OutputInvalidError(
                f"structured output stayed invalid after {failures + 1} "
                f"answers: {correction_text(exc)}"
            ) from None
        correction = Message("user", correction_text(exc), metadata={"kind": _RETRY_KIND})
        invalid = response.model_copy(
            update={"metadata": {**response.metadata, "kind": _RETRY_KIND}}
        )
        run.retry_ids.update((invalid.id, correction.id))
        run.transcript.extend((invalid, correction))
        return False
    return True


async def run_loop(setup: RunSetup, run: LoopRun) -> AsyncGenerator[AgentEvent, None]:
    """Drive model and tools until a final answer; state lands in ``run`` (see module doc)."""
    # Invariant: run.transcript is well formed at every step. It starts repaired, every
    # list a manager returns is repaired unless it is the transcript itself, and the loop
    # only appends a user prompt, complete tool groups and final assistant turns.
    _begin(run)
    output_failures = 0
    while True:
        turn = _next_turn(setup, run)
        replay, run.replay = run.replay, None
        response: Message | None = replay.turn if replay is not None else None
        if response is None:
            await _manage(setup, run)
            async for item in _call_model(setup, run, turn):
                if isinstance(item, _Reply):
                    response = item.message
                else:
                    yield item
        assert response is not None
        if response.tool_calls:
            for event in _tool_call_events(setup, run, response):
                yield event
            plans = await _plan_turn(setup, run, response, replay)
            async for tool_event in _run_tools(setup, run, response, plans, turn):
                yield tool_event
            continue
        if not _output_parsed(setup, run, response, output_failures):
            output_failures += 1
            continue
        run.final = _final_form(setup, response)
        run.transcript.append(run.final)
        return
