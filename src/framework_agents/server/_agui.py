"""AG-UI 1.0 at ``POST /agui``: our events as AG-UI events, built with ``ag-ui-protocol``.

The server's checkpoint is the source of truth. Of the ``messages`` a client sends, only
the newest user message whose id the thread does not hold yet is taken, as the new
prompt (it keeps the client's id, so the next request reconciles by id); one the thread
ends in unanswered (its replica died before the model answered) is answered (see
``_held``); the client's ``state`` and older messages are not trusted. ``resume``
entries answer the open interrupt: ``resolved`` with ``{"approved": true}`` approves,
with ``editedArgs`` edits, with ``{"approved": false, "reason"?}`` rejects; ``cancelled``
rejects.

A tool's question (an MCP server's elicitation) is an interrupt with ``reason ==
"elicitation"``: ``message`` is the question, ``responseSchema`` asks for ``{"action":
"accept" | "decline" | "cancel", "content"?}`` with ``content`` of the requested schema
(also in ``metadata.requestedSchema``). A ``resolved`` entry answers with that payload;
``cancelled`` answers ``cancel``.

A running call's progress (a tool's ``ToolContext.report_progress``, an MCP server's
progress notification) is a ``CUSTOM`` event named ``tool_progress`` whose ``value`` is
``{"toolCallId", "tool", "progress", "total", "message"}`` (``total`` and ``message``
may be ``null``), between the call's ``TOOL_CALL_END`` and its ``TOOL_CALL_RESULT``.

Every run ends with ``STATE_SNAPSHOT`` and ``MESSAGES_SNAPSHOT``, then ``RUN_FINISHED``
(an interrupt: ``outcome = {"type": "interrupt", "interrupts": [...]}``) or ``RUN_ERROR``
with our error code. A request that cannot run (a bad thread id, a busy thread, a new
prompt while an approval is open, a decision for another interrupt) is answered with
``RUN_STARTED`` then ``RUN_ERROR``; only a body that is not a ``RunAgentInput`` at all is
an HTTP 400. A request with no new user message and no ``resume`` on a thread that exists
(a client catching up: its answer was lost with the replica that ran it, or that server
died in an approved call, a call of unknown outcome) runs nothing: the snapshots, then
``RUN_FINISHED``, with the open interrupt if the thread waits for one; ``THREAD_BUSY``
while a run holds the thread (on any replica).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SystemMessage,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import agent as ours
from ..checkpoint.model import check_thread_id
from ..errors import HitlDecisionError, InvalidArgumentError, ThreadBusyError
from ..messages import Message
from ..swarm import HandoffEvent, MemberEvent
from ._api import KEEPALIVE, error_response, read_json
from ._errors import BadRequestError, error_payload
from ._held import placement, ran_unanswered
from ._questions import answer_decision
from ._runner import RunHandle, ThreadRunner
from ._shapes import Pending, progress_value

__all__ = [
    "AguiTranslator",
    "agui_routes",
    "answer_of",
    "answer_schema",
    "decision_of",
    "progress_value",
    "to_agui_messages",
]

#: What an interrupt's answer looks like (``Interrupt.responseSchema``).
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object"},
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}


def answer_schema(requested: dict[str, Any] | None) -> dict[str, Any]:
    """``Interrupt.responseSchema`` of a tool's question whose requested schema is ``requested``."""
    return {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
            "content": requested or {"type": "object"},
        },
        "required": ["action"],
    }


def _now_ms() -> int:
    return int(time.time() * 1000)


def to_agui_messages(
    messages: list[Message], pending: tuple[str, Pending] | None = None
) -> list[Any]:
    """Our history as AG-UI messages (grounding left out); the pending call's turn appended."""
    out: list[Any] = []
    for message in messages:
        if message.kind == "grounding":
            continue
        if message.role == "user":
            out.append(UserMessage(id=message.id, content=message.text))
        elif message.role == "system":
            out.append(SystemMessage(id=message.id, content=message.text))
        elif message.role == "tool":
            out.append(
                ToolMessage(
                    id=message.id, content=message.text, tool_call_id=message.tool_call_id or ""
                )
            )
        else:
            out.append(_assistant(message.id, message.text, message.tool_calls))
    if pending is not None:
        message_id, open_call = pending
        out.append(
            AssistantMessage(
                id=message_id,
                tool_calls=[
                    ToolCall(
                        id=open_call.tool_call_id,
                        function=FunctionCall(
                            name=open_call.tool, arguments=json.dumps(open_call.args)
                        ),
                    )
                ],
            )
        )
    return out


def _assistant(message_id: str, text: str, calls: list[Any]) -> AssistantMessage:
    tool_calls = [
        ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=json.dumps(c.args)))
        for c in calls
    ]
    return AssistantMessage(id=message_id, content=text or None, tool_calls=tool_calls or None)


def answer_of(entry: ResumeEntry) -> Any:
    """Our answer to a tool's question for one AG-UI resume entry (``HITL_DECISION`` if malformed).

    ``resolved`` with the payload ``{"action", "content"?}``; ``cancelled`` cancels.
    """
    if entry.status == "cancelled":
        return {"cancel": True}
    answer = entry.payload
    if not isinstance(answer, dict) or "action" not in answer:
        raise HitlDecisionError(
            'a tool asks a question: answer it with the payload {"action": "accept", '
            '"content": {...}}, {"action": "decline"} or {"action": "cancel"}'
        )
    return answer_decision(answer["action"], answer.get("content"))


def decision_of(entry: ResumeEntry) -> Any:
    """Our decision for one AG-UI resume entry (``HITL_DECISION`` if malformed)."""
    if entry.status == "cancelled":
        return {"reject": "The request was cancelled by the user."}
    payload = entry.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise HitlDecisionError('a resolved resume entry needs a payload {"approved": bool}')
    if payload["approved"]:
        edited = payload.get("editedArgs")
        if edited is None:
            return "approve"
        if not isinstance(edited, dict):
            raise HitlDecisionError("editedArgs must be a JSON object of arguments")
        return {"edit": edited}
    reason = payload.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise HitlDecisionError("reason must be a non-empty string")
    return {"reject": reason} if reason else "reject"


class AguiTranslator:
    """Our agent events -> AG-UI events for one run (keeps the open text/reasoning state)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        """Translate the run ``run_id`` of ``thread_id``."""
        self.thread_id = thread_id
        self.run_id = run_id
        self.text_open: str | None = None
        self.reasoning_open: str | None = None
        self.streamed: set[str] = set()
        self.call_parent: dict[str, str] = {}

    def started(self) -> RunStartedEvent:
        """``RUN_STARTED``."""
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id, timestamp=_now_ms())

    def _close_reasoning(self) -> list[BaseEvent]:
        if self.reasoning_open is None:
            return []
        rid, self.reasoning_open = self.reasoning_open, None
        return [ReasoningMessageEndEvent(message_id=rid), ReasoningEndEvent(message_id=rid)]

    def _close_text(self) -> list[BaseEvent]:
        if self.text_open is None:
            return []
        mid, self.text_open = self.text_open, None
        return [TextMessageEndEvent(message_id=mid)]

    def _text(self, message_id: str, delta: str) -> list[BaseEvent]:
        events = self._close_reasoning()
        if self.text_open != message_id:
            events += self._close_text()
            events.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
            self.text_open = message_id
        self.streamed.add(message_id)
        events.append(TextMessageContentEvent(message_id=message_id, delta=delta))
        return events

    def _reasoning(self, message_id: str, delta: str) -> list[BaseEvent]:
        rid = f"{message_id}.reasoning"
        events: list[BaseEvent] = []
        if self.reasoning_open != rid:
            events += self._close_text() + self._close_reasoning()
            events += [
                ReasoningStartEvent(message_id=rid),
                ReasoningMessageStartEvent(message_id=rid),
            ]
            self.reasoning_open = rid
        events.append(ReasoningMessageContentEvent(message_id=rid, delta=delta))
        return events

    def _close(self) -> list[BaseEvent]:
        """Close the open reasoning, then the open text."""
        return self._close_reasoning() + self._close_text()

    def translate(self, event: ours.AgentEvent | MemberEvent | HandoffEvent) -> list[BaseEvent]:
        """The AG-UI events of one of our events (terminal events: see :meth:`finish`).

        A served swarm adds steps: each member's turn is ``STEP_STARTED`` /
        ``STEP_FINISHED`` named by the member, and a handoff a ``CUSTOM`` event ``handoff``.
        A running call's progress is a ``CUSTOM`` event ``tool_progress``.
        """
        if isinstance(event, MemberEvent | HandoffEvent):
            return self._swarm(event)
        if isinstance(event, ours.ToolProgressEvent):
            return [CustomEvent(name="tool_progress", value=progress_value(event))]
        if isinstance(event, ours.TextDeltaEvent):
            return self._text(event.message_id, event.delta) if event.delta else []
        if isinstance(event, ours.ReasoningDeltaEvent):
            return self._reasoning(event.message_id, event.delta) if event.delta else []
        if isinstance(event, ours.MessageCompletedEvent):
            message = event.message
            events = self._close_reasoning()
            if message.text and message.id not in self.streamed:
                events += self._text(message.id, message.text)
            return events + self._close_text()
        if isinstance(event, ours.ToolCallEvent):
            return self._tool_call(event)
        if isinstance(event, ours.ToolResultEvent):
            result = ToolCallResultEvent(
                message_id=event.message.id,
                tool_call_id=event.call_id,
                content=event.message.text,
                role="tool",
            )
            return [*self._close(), result]
        return []

    def _swarm(self, event: MemberEvent | HandoffEvent) -> list[BaseEvent]:
        """A member's turn starting or ending (a step), or a handoff (``CUSTOM``)."""
        if isinstance(event, HandoffEvent):
            data = event.to_dict()
            value = {name: data[name] for name in ("from", "to", "message")}
            return [CustomEvent(name="handoff", value=value)]
        if isinstance(event.event, ours.RunStartedEvent):
            return [StepStartedEvent(step_name=event.agent)]
        return [*self._close(), StepFinishedEvent(step_name=event.agent)]

    def _tool_call(self, event: ours.ToolCallEvent) -> list[BaseEvent]:
        """A call, whole: its start (under the message that made it), arguments and end."""
        call = event.call
        self.call_parent[call.id] = event.message_id
        return [
            *self._close(),
            ToolCallStartEvent(
                tool_call_id=call.id,
                tool_call_name=call.name,
                parent_message_id=event.message_id,
            ),
            ToolCallArgsEvent(tool_call_id=call.id, delta=json.dumps(call.args)),
            ToolCallEndEvent(tool_call_id=call.id),
        ]

    def error(self, exc: BaseException) -> list[BaseEvent]:
        """Close what is open, then ``RUN_ERROR`` with our code."""
        payload = error_payload(exc)
        return [
            *self._close(),
            RunErrorEvent(message=payload["message"], code=payload["code"], timestamp=_now_ms()),
        ]

    async def finish(self, runner: ThreadRunner, event: ours.AgentEvent | None) -> list[BaseEvent]:
        """The two snapshots, then ``RUN_FINISHED`` (with an interrupt outcome if one).

        ``event=None``: no run ran; the outcome is the interrupt the thread waits for.
        """
        events = self._close()
        checkpoint = await runner.load(self.thread_id)
        pending = await runner.pending_of(checkpoint) if checkpoint else None
        messages = checkpoint.messages if checkpoint else []
        open_turn = None
        if pending is not None:
            parent = self.call_parent.get(pending.tool_call_id, f"{pending.tool_call_id}.turn")
            open_turn = (parent, pending)
        events.append(StateSnapshotEvent(snapshot=checkpoint.state if checkpoint else {}))
        events.append(MessagesSnapshotEvent(messages=to_agui_messages(messages, open_turn)))
        if (event is None or isinstance(event, ours.InterruptEvent)) and pending is not None:
            outcome = RunFinishedInterruptOutcome(interrupts=[_interrupt(pending)])
            events.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=outcome,
                    timestamp=_now_ms(),
                )
            )
        else:
            text = event.result.text if isinstance(event, ours.RunFinishedEvent) else None
            events.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    result={"text": text} if text is not None else None,
                    timestamp=_now_ms(),
                )
            )
        return events


def _interrupt(pending: Pending) -> Interrupt:
    """The AG-UI interrupt of the open approval or question."""
    if pending.asks:
        return Interrupt(
            id=pending.interrupt_id,
            reason="elicitation",
            tool_call_id=pending.tool_call_id,
            message=pending.message,
            response_schema=answer_schema(pending.schema),
            metadata={
                "tool": pending.tool,
                "args": pending.args,
                "requestedSchema": pending.schema,
            },
        )
    return Interrupt(
        id=pending.interrupt_id,
        reason="tool_call",
        tool_call_id=pending.tool_call_id,
        message=_question(pending),
        response_schema=RESPONSE_SCHEMA,
        metadata={
            "tool": pending.tool,
            "args": pending.args,
            "allowedDecisions": list(pending.allowed_decisions),
            **({"outcomeUnknown": True} if pending.outcome_unknown else {}),
        },
    )


def _question(pending: Pending) -> str:
    if pending.outcome_unknown:
        return (
            f"The call of {pending.tool!r} was approved and started, but whether it ran is "
            "unknown (the process stopped). Run it again?"
        )
    return f"Approve the call of {pending.tool!r}?"


def _encode(event: BaseEvent) -> str:
    return f"data: {event.model_dump_json(by_alias=True)}\n\n"


async def _new_prompt(runner: ThreadRunner, run: RunAgentInput) -> Message | None:
    """The newest user message, keeping its id, unless the thread took it already.

    One the thread holds unanswered at its end (its run died before the model answered)
    is run again: the runner decides under the thread's lock whether it is answered there
    or was taken meanwhile (``_held``). ``None``: nothing new to run.
    """
    checkpoint = await runner.load(run.thread_id)
    for message in reversed(run.messages):
        if message.role != "user":
            continue
        if placement(checkpoint, message.id) == "taken":
            return None
        content = message.content
        if isinstance(content, list):
            content = "".join(getattr(part, "text", "") or "" for part in content)
        if not isinstance(content, str) or not content.strip():
            raise InvalidArgumentError("the new user message has no text")
        return Message(role="user", content=content, id=message.id)
    return None


class _Waiting(Exception):
    """A request that runs nothing: shown the thread as it stands.

    Nothing new to run on a thread no run holds (a client catching up), or a decision for
    a call now of unknown outcome, naming it as it was before it ran (``Pending.replaced``).
    """


async def _start(runner: ThreadRunner, run: RunAgentInput) -> RunHandle:
    check_thread_id(run.thread_id)
    if run.resume:
        checkpoint = await runner.require(run.thread_id)
        pending = await runner.pending_of(checkpoint)
        if pending is None:
            raise HitlDecisionError(f"thread {run.thread_id!r} has no interrupt to resume")
        entries = [e for e in run.resume if e.interrupt_id in pending.names()]
        if len(run.resume) == 1 and pending.replaced(run.resume[0].interrupt_id):
            raise _Waiting  # a decision for a call now of unknown outcome: shown that call
        if len(entries) != 1 or len(run.resume) != 1:
            raise HitlDecisionError(
                f"resume must answer the open interrupt {pending.interrupt_id!r} exactly once"
            )
        read = answer_of if pending.asks else decision_of
        return await runner.start_resume(run.thread_id, {pending.interrupt_id: read(entries[0])})
    prompt = await _new_prompt(runner, run)
    if prompt is None:
        current = await runner.load(run.thread_id)
        if current is None:
            raise InvalidArgumentError("no new user message to run and no resume entries")
        if await runner.held(run.thread_id):
            raise ThreadBusyError(
                f"thread {run.thread_id!r} is running: catch up once its run has ended"
            )
        if ran_unanswered(current, None):
            # An approved call's result landed, its run died before the answer: answered now
            # (decided again under the thread's lock; the call does not run again).
            return await runner.start_answer(run.thread_id, None)
        raise _Waiting  # a client catching up: shown the thread as it stands
    return await runner.start_run(run.thread_id, prompt)


async def _events(runner: ThreadRunner, run: RunAgentInput) -> AsyncIterator[str]:
    tr = AguiTranslator(run.thread_id, run.run_id)
    yield _encode(tr.started())
    try:
        handle = await _start(runner, run)
    except _Waiting:
        for event in await tr.finish(runner, None):
            yield _encode(event)
        return
    except Exception as exc:
        for event in tr.error(exc):
            yield _encode(event)
        return
    if handle.before is not None:
        # A resume: the client drops the open turn it was shown (the stored turn that
        # runs the call is announced again by TOOL_CALL_START, under its stored id).
        yield _encode(MessagesSnapshotEvent(messages=to_agui_messages(handle.before.messages)))
    async for ev in handle.events_or_idle(runner.keepalive):
        if ev is None:
            yield KEEPALIVE
            continue
        if isinstance(ev, ours.RunErrorEvent):
            out = tr.error(ev.error)
        elif isinstance(ev, ours.InterruptEvent | ours.RunFinishedEvent):
            out = await tr.finish(runner, ev)
        else:
            out = tr.translate(ev)
        for event in out:
            yield _encode(event)
    if handle.taken:  # its message was taken meanwhile: the thread as it stands
        for event in await tr.finish(runner, None):
            yield _encode(event)


def agui_routes(runner: ThreadRunner) -> list[Route]:
    """``POST /agui``."""

    async def agui(request: Request) -> Response:
        """One AG-UI run (``RunAgentInput`` in, SSE out)."""
        try:
            body = await read_json(request)
            try:
                run = RunAgentInput.model_validate(body)
            except ValidationError as exc:
                raise BadRequestError(
                    f"the body is not an AG-UI RunAgentInput: {exc.error_count()} problem(s), "
                    f"first: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
                ) from None
        except Exception as exc:
            return error_response(exc)
        return StreamingResponse(
            _events(runner, run),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return [Route("/agui", agui, methods=["POST"])]
