"""A2A 1.0 with the official ``a2a-sdk``: an executor over our threads, a task store on ``Storage``.

Routes: ``POST /a2a`` (JSON-RPC), ``/a2a/rest/...`` (HTTP+JSON) and the agent card at
``/.well-known/agent-card.json`` (its interface URLs follow the request's host).

* The thread of a task is the *stored task's* context id (a follow-up that names only the
  task id gets a fresh context id from the SDK; the stored task's is the one that counts),
  so each new user turn is a new task in the same context and thread.
* A run that needs an approval puts the task in ``TASK_STATE_INPUT_REQUIRED``; its status
  message holds a text part and a data part ``{"type": "tool_approval_request",
  "toolCallId", "tool", "args", "key", "allowedDecisions", "interruptId"}``. The client
  answers on the same task with ``{"decision": "approve" | "edit" | "reject",
  "toolCallId", "editedArgs"?, "reason"?}``. Arguments come from our checkpoint; edited
  arguments come back through protobuf ``Value`` (every number a float), so integral
  floats are turned back into ints.
* A tool's question (an MCP server's elicitation) puts the task in
  ``TASK_STATE_INPUT_REQUIRED`` too: a text part (the question) and a data part
  ``{"type": "elicitation", "message", "schema", "interruptId", "toolCallId", "tool",
  "args", "allowedActions"}``. The client answers on the same task with ``{"action":
  "accept", "content": {...}}`` (checked against the schema), ``{"action": "decline"}`` or
  ``{"action": "cancel"}`` (``interruptId`` optional, as for a decision); cancelling the
  task answers ``cancel``.
* A running call's progress (``ToolContext.report_progress``, an MCP server's progress
  notification) is a ``TaskStatusUpdateEvent`` that keeps the task ``TASK_STATE_WORKING``;
  its status message holds a text part (``"tool: 3/10 message"``) and a data part
  ``{"type": "tool_progress", "toolCallId", "tool", "progress", "total", "message"}``
  (``total`` and ``message`` may be ``null``).
* A message sent again under its id is not run twice (answered from the thread; one the
  thread ends in unanswered, its replica dead before the model answered, is answered: see
  ``_held``); a decision sent again for a call its replica died in, now shown as of
  unknown outcome under a new interrupt, leaves its task showing that one; a task
  left working by a replica that died, whose run lost its thread
  (``CHECKPOINT_CONFLICT``), still showing an approval its thread no longer waits for,
  or left by a replica that died after its answer arrived (input-required showing
  nothing: the SDK had moved the request into the history), ends as the thread stands
  (:func:`ended_status`).
* An answer on an ``input-required`` task that cannot run now (``THREAD_BUSY``: a run
  holds the thread, a dead replica's until its lease runs out; ``LOCK_TIMEOUT``,
  ``SHUTTING_DOWN``, ``BACKEND_UNAVAILABLE``) leaves the task ``input-required``, its
  status message a text part ``[CODE] message``, the request it showed and a data part
  ``{"error": {"code", "message"}}``: read the task again (it shows what the thread waits
  for then, a call of unknown outcome say) and answer.
* A failure ends the task in ``TASK_STATE_FAILED`` with a text part ``[CODE] message`` and
  a data part ``{"error": {"code", "message"}}``.
* Tasks live in :class:`StorageTaskStore` (our ``Storage``, no SQLAlchemy); a task idle in
  ``input-required`` is released from memory after ``INTERRUPTED_TASK_TIMEOUT`` seconds
  and recreated from the store on the decision, which also survives a server restart.
"""

from __future__ import annotations

import os

# The SDK reads this when it is first imported: its spans stay off unless asked for.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.helpers.proto_helpers import (
    get_data_parts,
    get_text_parts,
    new_task_from_user_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from .. import agent as ours
from ..checkpoint.model import check_thread_id
from ..errors import HitlDecisionError, ThreadBusyError
from ..messages import Message as ours_message
from ._a2a_store import StorageTaskStore
from ._a2a_tasks import (
    agent_message,
    decided_call,
    ended_status,
    failure_parts,
    input_request,
    progress_parts,
    retry_parts,
    revive_answered,
    revive_orphan,
    revive_settled,
    shown_interrupt,
    shown_request,
)
from ._held import placement, ran_unanswered
from ._questions import answer_decision
from ._runner import RunHandle, ThreadRunner
from ._shapes import Pending

__all__ = ["INTERRUPTED_TASK_TIMEOUT", "A2AExecutor", "StorageTaskStore", "a2a_routes"]

logger = logging.getLogger(__name__)

#: Seconds a task waiting for a decision stays in memory before the store takes over.
INTERRUPTED_TASK_TIMEOUT = 300.0

Message = a2a_pb2.Message
Part = a2a_pb2.Part
Role = a2a_pb2.Role
Task = a2a_pb2.Task
TaskState = a2a_pb2.TaskState


def integral(value: Any) -> Any:
    """``value`` with every integral float made an int again (protobuf ``Value`` has no ints)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


#: Codes of an answer that could not run now: its task is left waiting, not failed.
_RETRY_LATER = frozenset({"THREAD_BUSY", "LOCK_TIMEOUT", "SHUTTING_DOWN", "BACKEND_UNAVAILABLE"})

#: Task states after which a task never changes.
_FINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def check_bound(pending: Pending, task: Task | None, data: dict[str, Any] | None) -> None:
    """``HITL_DECISION`` unless the approval waiting is the one the decision answers.

    The one ``task`` showed (its status's approval request), and the one the decision
    names (``interruptId``): an answer to an approval that was settled meanwhile (and a
    newer one opened) must not settle the newer one, whose call the approver never saw.
    A decision in a task that showed none and naming none answers what is waiting.
    """
    named = None if data is None else data.get("interruptId")
    for bound in (shown_interrupt(task), named):
        if bound is not None and bound != pending.interrupt_id:
            raise HitlDecisionError(
                f"the approval this answers ({str(bound)!r:.60}) is no longer open; "
                f"the one waiting now is {pending.interrupt_id!r}: read the task again"
            )


def _check_call(data: dict[str, Any], pending: Pending) -> None:
    """``HITL_DECISION`` when the data part names another call than the one waiting."""
    call_id = data.get("toolCallId")
    if call_id is not None and call_id not in (pending.tool_call_id, pending.interrupt_id):
        raise HitlDecisionError(
            f"toolCallId {call_id!r:.80} is not the call waiting for a decision "
            f"({pending.tool_call_id!r})"
        )


def answer_of(data: dict[str, Any], pending: Pending) -> Any:
    """Our answer to a tool's question for an A2A data part (``HITL_DECISION`` if malformed)."""
    _check_call(data, pending)
    if "action" not in data:
        raise HitlDecisionError(
            f"the tool {pending.tool!r} asks a question: answer it with "
            '{"action": "accept", "content": {...}}, {"action": "decline"} or '
            '{"action": "cancel"}'
        )
    return answer_decision(data["action"], integral(data.get("content")))


def decision_of(data: dict[str, Any], pending: Pending) -> Any:
    """Our decision for an A2A decision data part (``HITL_DECISION`` if malformed)."""
    _check_call(data, pending)
    kind = data.get("decision")
    if kind == "approve":
        return "approve"
    if kind == "edit":
        edited = data.get("editedArgs")
        if not isinstance(edited, dict):
            raise HitlDecisionError("an edit decision needs editedArgs, a JSON object")
        return {"edit": integral(edited)}
    if kind == "reject":
        reason = data.get("reason")
        return {"reject": reason} if isinstance(reason, str) and reason.strip() else "reject"
    raise HitlDecisionError(f"decision must be approve, edit or reject, not {kind!r:.40}")


class _Landed(Exception):
    """The message of a task ran before (a prompt of its id, or the decision it answered)."""

    def __init__(self, checkpoint: Any) -> None:
        super().__init__("landed")
        self.checkpoint = checkpoint


class _Shown(Exception):
    """A decision for a call now of unknown outcome, as it was before it ran (:func:`replaced`)."""

    def __init__(self, pending: Pending) -> None:
        super().__init__("shown")
        self.pending = pending


def replaced(pending: Pending, task: Task | None, data: dict[str, Any]) -> bool:
    """Whether ``data`` decides an approval ``pending`` replaced: the same call, now unknown.

    The approval's decision ran the call, its replica died in it, and the thread shows the
    call as of unknown outcome under a new interrupt id; the decision sent again (its
    stream broke) names the approval its task showed. It must not fail the task (no task
    would show the new interrupt) nor run the call again: the task shows the new one.
    The call is the one the decision names (``toolCallId``), else the one its task showed.
    """
    if not pending.outcome_unknown:
        return False
    bound = {shown_interrupt(task), data.get("interruptId")} - {None}
    if not bound or bound == {pending.interrupt_id}:
        return False
    return decided_call(data, task) == pending.tool_call_id


async def _new_task(context: RequestContext, event_queue: EventQueue) -> Task:
    """The task a message without one starts, sent to the queue (``InvalidParamsError``)."""
    assert context.message is not None
    try:
        task = new_task_from_user_message(context.message)
    except ValueError as exc:  # not from the user, no parts, an empty text part
        raise InvalidParamsError(message=str(exc)) from None
    await event_queue.enqueue_event(task)
    return task


async def _relay(handle: RunHandle, updater: TaskUpdater, task: Task) -> ours.AgentEvent | None:
    """Relay the run's events as task updates; its last interrupt, finish or error, if any."""
    last: ours.AgentEvent | None = None
    streamed: set[str] = set()
    async for event in handle.events():
        if isinstance(event, ours.RunStartedEvent):
            await updater.start_work()
        elif isinstance(event, ours.TextDeltaEvent) and event.delta:
            # Tokens as they come: chunks of the message's "answer" artifact.
            await updater.add_artifact(
                [new_text_part(event.delta)],
                artifact_id=event.message_id,
                name="answer",
                append=event.message_id in streamed,
                last_chunk=False,
            )
            streamed.add(event.message_id)
        elif isinstance(event, ours.MessageCompletedEvent) and event.message.text:
            # The whole text closes the artifact (it replaces the chunks).
            await updater.add_artifact(
                [new_text_part(event.message.text)],
                artifact_id=event.message.id,
                name="answer",
                append=False,
                last_chunk=True,
            )
        elif isinstance(event, ours.ToolProgressEvent):
            await updater.update_status(
                TaskState.TASK_STATE_WORKING,
                message=agent_message(task, progress_parts(event)),
            )
        elif isinstance(event, ours.InterruptEvent | ours.RunFinishedEvent | ours.RunErrorEvent):
            last = event
    return last


class A2AExecutor(AgentExecutor):
    """Runs the thread of a task's context with our runner; maps our events to task updates."""

    def __init__(self, runner: ThreadRunner) -> None:
        """Run threads with ``runner``."""
        self.runner = runner

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start or continue the thread of the task's context (see the module docstring)."""
        task = context.current_task
        if task is not None and task.status.state in _FINAL:
            # A message queued behind the one that finished the task (a retried decision):
            # a finished task is never changed again.
            raise UnsupportedOperationError(
                message=f"task {task.id} is in a final state: {TaskState.Name(task.status.state)}"
            )
        answers = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            task = await _new_task(context, event_queue)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            handle = await self._start(task, context)
        except _Landed as landed:
            await self._landed(updater, task, landed.checkpoint, context.message)
            return
        except _Shown as replay:  # nothing ran: the task shows the call's new interrupt
            await updater.requires_input(agent_message(task, input_request(replay.pending)))
            return
        except Exception as exc:
            await self._refused(updater, task, exc, answers=answers)
            return
        await self._follow(handle, updater, task, context.message)

    async def _refused(
        self, updater: TaskUpdater, task: Task, exc: Exception, *, answers: bool
    ) -> None:
        """A run that could not start: its task fails, or an answer's task is left waiting.

        An answer (``answers``: the task was ``input-required``) that cannot run now
        (``_RETRY_LATER``) leaves its task waiting (failing it would leave the approval
        with no task to show it on): read it again (it shows what the thread waits for
        then) and answer.
        """
        shown = shown_request(task) if answers else None
        if shown is not None and getattr(exc, "code", None) in _RETRY_LATER:
            await updater.requires_input(agent_message(task, retry_parts(exc, shown)))
            return
        await self._fail(updater, task, exc)

    async def _landed(
        self, updater: TaskUpdater, task: Task, checkpoint: Any, asked: Message | None
    ) -> None:
        """End a task whose message ran before (a client's retry): how that turn ended."""
        if await self.runner.held(task.context_id):
            await self._fail(
                updater,
                task,
                ThreadBusyError(
                    f"a message of id {asked.message_id if asked else ''!r:.80} is running "
                    "in this context: ask for its task, or send it again once it ended"
                ),
            )
            return
        await self._end(updater, task, *await ended_status(self.runner, checkpoint, asked))

    async def _lost(
        self, updater: TaskUpdater, task: Task, thread_id: str, asked: Message | None
    ) -> None:
        """End a task whose run lost its thread (``CHECKPOINT_CONFLICT``: it wrote nothing).

        Its replica was stopped past its lease, say, and the thread moved on without it
        (a call it had started is now of unknown outcome): the task ends as the thread
        stands (:func:`ended_status`). While another run holds the thread, the task stays
        working and is settled when read once that run has ended (:func:`revive_orphan`).
        """
        if await self.runner.held(thread_id):
            return
        checkpoint = await self.runner.load(thread_id)
        await self._end(updater, task, *await ended_status(self.runner, checkpoint, asked))

    async def _end(self, updater: TaskUpdater, task: Task, state: int, parts: list[Part]) -> None:
        message = agent_message(task, parts)
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(message)
        elif state == TaskState.TASK_STATE_COMPLETED:
            await updater.complete(message)
        else:
            await updater.failed(message)

    async def _start(self, task: Task, context: RequestContext) -> RunHandle:
        """Start the run of the task's message: a decision's, else a prompt's."""
        thread_id = check_thread_id(task.context_id)
        message = context.message
        parts = list(message.parts) if message is not None else []
        decisions = [
            d
            for d in get_data_parts(parts)
            if isinstance(d, dict) and ("decision" in d or "action" in d)
        ]
        if decisions:
            return await self._start_decision(thread_id, decisions[0], context.current_task)
        return await self._start_prompt(thread_id, parts, message)

    async def _start_decision(
        self, thread_id: str, data: dict[str, Any], task: Task | None
    ) -> RunHandle:
        """Resume the thread with the decision (or answer) ``data`` sent on ``task``."""
        checkpoint = await self.runner.require(thread_id)
        pending = await self.runner.pending_of(checkpoint)
        if pending is None:
            return await self._start_unawaited(thread_id, checkpoint, data, task)
        if replaced(pending, task, data):
            raise _Shown(pending)
        check_bound(pending, task, data)
        if pending.outcome_unknown and data.get("interruptId") != pending.interrupt_id:
            raise HitlDecisionError(
                f"the call of {pending.tool!r} was approved and started, whether it ran "
                "is unknown: settle it by a decision naming its interruptId "
                f"{pending.interrupt_id!r}"
            )
        read = answer_of if pending.asks else decision_of
        decision = read(data, pending)
        return await self.runner.start_resume(thread_id, {pending.interrupt_id: decision})

    async def _start_unawaited(
        self, thread_id: str, checkpoint: Any, data: dict[str, Any], task: Task | None
    ) -> RunHandle:
        """A decision sent when the thread waits for none: answered, landed, or refused."""
        if await self.runner.held(thread_id):
            # A run holds the thread: the decision itself, maybe, on a replica that
            # died in its call (shown as of unknown outcome once its lease ran out).
            raise ThreadBusyError(
                f"a run holds context {thread_id!r} and nothing waits for a decision "
                "now: read the task again once that run has ended"
            )
        call_id = decided_call(data, task)
        if call_id is not None and ran_unanswered(checkpoint, call_id):
            # The decision ran the call and its run died after the result landed,
            # before the answer: the thread goes on from there (runs nothing again).
            return await self.runner.start_answer(thread_id, call_id)
        if task is not None and shown_request(task) is not None:
            # The approval this task showed was settled since (by this decision on
            # a replica that stopped before it saved the task's end, say): the task
            # ends as the thread stands, as it reads once settled (revive_settled).
            raise _Landed(checkpoint)
        raise HitlDecisionError(f"context {thread_id!r} has no approval waiting")

    async def _start_prompt(
        self, thread_id: str, parts: list[Part], message: Message | None
    ) -> RunHandle:
        """Run the thread on the text of ``parts`` (``_Landed`` if its message ran before)."""
        text = "\n".join(get_text_parts(parts)).strip()
        if not text or message is None or not message.message_id:
            return await self.runner.start_run(thread_id, text)
        # The client's message id is kept: a task whose run died is matched to its turn,
        # and a message sent again (its answer was lost) does not run twice; one the
        # thread holds unanswered at its end is answered (decided under the thread's lock:
        # a message taken meanwhile runs nothing, ``handle.taken``).
        held = await self.runner.load(thread_id)
        if placement(held, message.message_id) == "taken":
            raise _Landed(held)
        prompt = ours_message(role="user", content=text, id=message.message_id)
        return await self.runner.start_run(thread_id, prompt)

    async def _follow(
        self, handle: RunHandle, updater: TaskUpdater, task: Task, asked: Message | None
    ) -> None:
        """Relay the run's events to the task, then end it as the run ended."""
        # The terminal update goes out once the run has released its thread, so a client
        # that sends its next turn as soon as it sees it never finds the thread busy.
        last = await _relay(handle, updater, task)
        if last is None and handle.taken:  # its message was taken meanwhile
            await self._landed(updater, task, await self.runner.load(handle.thread_id), asked)
            return
        if isinstance(last, ours.InterruptEvent):
            checkpoint = await self.runner.load(handle.thread_id)
            pending = await self.runner.pending_of(checkpoint) if checkpoint else None
            if pending is not None:
                await updater.requires_input(agent_message(task, input_request(pending)))
                return
        if isinstance(last, ours.RunFinishedEvent):
            text = last.result.text or ""
            await updater.complete(agent_message(task, [new_text_part(text)]))
        elif isinstance(last, ours.RunErrorEvent):
            if getattr(last.error, "code", None) == "CHECKPOINT_CONFLICT":
                await self._lost(updater, task, handle.thread_id, asked)
                return
            await self._fail(updater, task, last.error)
        else:
            await self._fail(updater, task, RuntimeError("the run ended without an outcome"))

    async def _fail(self, updater: TaskUpdater, task: Task, exc: BaseException) -> None:
        await updater.failed(agent_message(task, failure_parts(exc)))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task; an approval it waits for is rejected (a question: cancelled).

        So the thread can go on.
        """
        task = context.current_task
        task_id = context.task_id or (task.id if task else "")
        context_id = task.context_id if task else (context.context_id or "")
        updater = TaskUpdater(event_queue, task_id, context_id)
        shown = shown_interrupt(task)
        if shown is not None:
            checkpoint = await self.runner.load(check_thread_id(context_id))
            pending = await self.runner.pending_of(checkpoint) if checkpoint else None
            if (
                pending is not None
                and pending.interrupt_id == shown  # the approval this task showed, still open
                and ("reject" in pending.allowed_decisions or pending.asks)
                and not self.runner.busy(context_id)
            ):
                undo = {"cancel": True} if pending.asks else {"reject": "The task was cancelled."}
                handle = await self.runner.start_resume(context_id, {pending.interrupt_id: undo})
                await handle.wait()
        await updater.cancel()


def agent_card(base_url: str, *, name: str, description: str) -> a2a_pb2.AgentCard:
    """The agent card, its interfaces under ``base_url``."""
    base = base_url.rstrip("/")
    return a2a_pb2.AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
            a2a_pb2.AgentInterface(
                url=f"{base}/a2a/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        ],
        capabilities=a2a_pb2.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            a2a_pb2.AgentSkill(
                id="chat",
                name="chat",
                description=description,
                tags=["chat", "human-in-the-loop"],
            )
        ],
    )


def _parsed_first(route: Route) -> Route:
    """``route`` answering a body it cannot parse with JSON-RPC -32700 Parse error.

    The SDK's dispatcher lets some parser failures through as an internal error (-32603,
    Python's exception text as the message, a traceback in the log): a body nested too
    deeply (``RecursionError``), one that is not UTF-8, an integer longer than Python's
    4,300 digits. The body is parsed here first (starlette keeps it for the SDK's
    endpoint, which parses it again); one that does not parse is answered here, with a
    fixed message.
    """
    endpoint = route.endpoint

    async def parsed_first(request: Request) -> Response:
        body = await request.body()
        try:
            json.loads(body)
        except RecursionError:
            return _parse_error("the body is nested too deeply")
        except ValueError:  # not JSON, not UTF-8, an integer too long to convert
            return _parse_error("the body is not valid JSON in UTF-8")
        return await endpoint(request)  # type: ignore[no-any-return]

    return Route(route.path, parsed_first, methods=sorted(route.methods or ("POST",)))


def _rest_parsed_first(routes: list[BaseRoute]) -> list[BaseRoute]:
    """The REST binding's ``routes``, a POST body that does not parse answered 400 here.

    The SDK answers a body that is not UTF-8 with 500 "unknown exception" and a traceback
    in the log; here it is 400 ``INVALID_ARGUMENT`` (the binding's error shape) with a
    fixed message. An empty body goes on (``:cancel`` needs none).
    """
    wrapped: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Mount):
            inner = _rest_parsed_first(list(route.routes))
            wrapped.append(Mount(route.path, routes=inner, name=route.name))
        elif isinstance(route, Route) and "POST" in (route.methods or ()):
            wrapped.append(_rest_route(route))
        else:
            wrapped.append(route)
    return wrapped


def _rest_route(route: Route) -> Route:
    endpoint = route.endpoint

    async def parsed_first(request: Request) -> Response:
        body = await request.body()
        if body.strip():
            try:
                json.loads(body)
            except (ValueError, RecursionError):
                error = {
                    "code": 400,
                    "status": "INVALID_ARGUMENT",
                    "message": "the body is not valid JSON in UTF-8",
                }
                return JSONResponse({"error": error}, status_code=400)
        return await endpoint(request)  # type: ignore[no-any-return]

    return Route(route.path, parsed_first, methods=sorted(route.methods or ("POST",)))


def _parse_error(reason: str) -> Response:
    error = {"code": -32700, "message": f"Parse error: {reason}"}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})


def a2a_routes(
    runner: ThreadRunner, *, name: str, description: str
) -> tuple[list[BaseRoute], Callable[[], Awaitable[None]]]:
    """The A2A routes over ``runner``, and how to close the SDK's handler."""
    card = agent_card("http://127.0.0.1", name=name, description=description)

    async def revive(task: Task) -> Task | None:
        """A task whose run died, or died in a call of unknown outcome.

        The first: :func:`revive_orphan` (working), :func:`revive_answered` (its answer
        arrived). The second: input-required, showing that call. A task showing an
        approval its thread no longer waits for: :func:`revive_settled`.
        """
        if not task.context_id or runner.busy(task.context_id):
            return None
        orphan = await revive_orphan(runner, task) or await revive_answered(runner, task)
        if orphan is not None:
            return orphan
        checkpoint = await runner.load(check_thread_id(task.context_id))
        pending = await runner.pending_of(checkpoint) if checkpoint else None
        if pending is None:
            return await revive_settled(runner, task)
        if not pending.outcome_unknown:
            return None
        if shown_interrupt(task) == pending.interrupt_id:
            return None  # shown already
        revived = Task()
        revived.CopyFrom(task)
        revived.status.state = TaskState.TASK_STATE_INPUT_REQUIRED
        revived.status.message.CopyFrom(agent_message(task, input_request(pending)))
        return revived

    handler = DefaultRequestHandler(
        agent_executor=A2AExecutor(runner),
        task_store=StorageTaskStore(runner.store.storage, revive),
        agent_card=card,
        interrupted_task_timeout=INTERRUPTED_TASK_TIMEOUT,
    )

    async def card_route(request: Request) -> Response:
        served = agent_card(str(request.base_url), name=name, description=description)
        return JSONResponse(agent_card_to_dict(served))

    routes: list[BaseRoute] = [
        Route("/.well-known/agent-card.json", card_route, methods=["GET"]),
        *(_parsed_first(route) for route in create_jsonrpc_routes(handler, "/a2a")),
        # Mounted rather than prefixed: the SDK's tenant routes would otherwise sit at /{tenant}.
        Mount("/a2a/rest", routes=_rest_parsed_first(create_rest_routes(handler))),
    ]

    async def close() -> None:
        await handler.aclose()

    return routes, close
