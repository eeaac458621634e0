"""What an A2A task shows, and a task ended as its thread stands when its run is gone.

The parts of an ``input-required`` status (an approval request, a tool's question), of a
running call's progress and of a failure; what a task showed and asked; and the
settling of a task whose run died with its replica, lost its thread, or ran elsewhere
(:func:`ended_status`, :func:`revive_orphan`, :func:`revive_answered`,
:func:`revive_settled`): the thread's checkpoint says how far its turn got.
"""

from __future__ import annotations

import json
import time
from datetime import UTC
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
from a2a.server.agent_execution import RequestContext
from a2a.types import a2a_pb2

from .. import agent as ours
from ..checkpoint.model import check_thread_id
from ..errors import InvalidArgumentError
from ..messages import new_id
from ._errors import ShuttingDownError, error_payload
from ._held import placement, ran_unanswered
from ._runner import ThreadRunner
from ._shapes import Pending, progress_value

__all__ = [
    "agent_message",
    "answer_arrived",
    "answer_in",
    "approval_request",
    "asked_of",
    "decided_call",
    "elicitation_request",
    "ended_status",
    "failure_parts",
    "input_request",
    "progress_parts",
    "retry_parts",
    "revive_answered",
    "revive_orphan",
    "revive_settled",
    "shown_interrupt",
    "shown_request",
]

Message = a2a_pb2.Message
Part = a2a_pb2.Part
Role = a2a_pb2.Role
Task = a2a_pb2.Task
TaskState = a2a_pb2.TaskState


def _call_shown(pending: Pending) -> dict[str, Any]:
    """What a request shows of the call waiting: its interrupt, call id, tool and arguments."""
    return {
        "interruptId": pending.interrupt_id,
        "toolCallId": pending.tool_call_id,
        "tool": pending.tool,
        "args": pending.args,
    }


def approval_request(pending: Pending) -> dict[str, Any]:
    """The data part of an ``input-required`` status."""
    return {
        "type": "tool_approval_request",
        **_call_shown(pending),
        "key": pending.key,
        "allowedDecisions": list(pending.allowed_decisions),
        "outcomeUnknown": pending.outcome_unknown,
    }


def elicitation_request(pending: Pending) -> dict[str, Any]:
    """The data part of an ``input-required`` status for a tool's question."""
    return {
        "type": "elicitation",
        "message": pending.message,
        "schema": pending.schema,
        **_call_shown(pending),
        "allowedActions": ["accept", "decline", "cancel"],
    }


def input_request(pending: Pending) -> list[Part]:
    """The parts of the status message that shows ``pending``: a text and a data part."""
    if pending.asks:
        text = f"The tool {pending.tool} asks: {pending.message}"
        return [new_text_part(text), new_data_part(elicitation_request(pending))]
    text = f"The call {pending.tool}({json.dumps(pending.args)}) needs approval."
    return [new_text_part(text), new_data_part(approval_request(pending))]


def progress_parts(event: ours.ToolProgressEvent) -> list[Part]:
    """The status message parts of a running call's progress: a text and a data part."""
    done = f"{event.progress:g}" + (f"/{event.total:g}" if event.total is not None else "")
    text = f"{event.tool}: {done}" + (f" {event.message}" if event.message else "")
    data = {"type": "tool_progress", **progress_value(event)}
    return [new_text_part(text), new_data_part(data)]


#: The ``type`` of the data parts that show what a task waits for.
_REQUESTS = ("tool_approval_request", "elicitation")


def shown_interrupt(task: Task | None) -> str | None:
    """The ``interruptId`` of the approval request ``task``'s status shows, if any."""
    if task is None or task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return None
    if not task.status.HasField("message"):
        return None
    for data in get_data_parts(list(task.status.message.parts)):
        if isinstance(data, dict) and data.get("type") in _REQUESTS:
            shown = data.get("interruptId")
            return shown if isinstance(shown, str) else None
    return None


def agent_message(task: Task | RequestContext, parts: list[Part]) -> Message:
    task_id = task.id if isinstance(task, Task) else (task.task_id or "")
    context_id = task.context_id or ""
    return Message(
        message_id=new_id(),
        role=Role.ROLE_AGENT,
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )


def decided_call(data: dict[str, Any], task: Task | None) -> str | None:
    """The call a decision answers: its ``toolCallId``, else the one its task showed."""
    call = data.get("toolCallId")
    if call is None and task is not None:
        shown = shown_request(task)
        requests = [] if shown is None else get_data_parts(list(shown.parts))
        call = next((d.get("toolCallId") for d in requests if isinstance(d, dict)), None)
    return call if isinstance(call, str) else None


def shown_request(task: Task) -> Message | None:
    """The agent message that showed what ``task`` waits for (its status, or moved to history).

    The SDK moves the status message into the history when an answer arrives.
    """
    messages: list[Message] = [task.status.message] if task.status.HasField("message") else []
    for message in [*messages, *reversed(task.history)]:
        if message.role == Role.ROLE_USER:
            continue
        for data in get_data_parts(list(message.parts)):
            if isinstance(data, dict) and data.get("type") in _REQUESTS:
                shown: Message = message
                return shown
    return None


def answer_arrived(task: Task) -> bool:
    """Whether ``task`` waits with its request moved to its history: an answer arrived.

    The SDK moves a waiting task's status message into its history when the answer
    arrives, and saves the task so before the answer's run starts: until that run saves
    the task's end, the task reads input-required showing nothing.
    """
    return (
        task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        and shown_interrupt(task) is None
        and shown_request(task) is not None
    )


def asked_of(task: Task) -> Message | None:
    """The user message that started ``task`` (its last one in the history)."""
    for message in reversed(task.history):
        if message.role == Role.ROLE_USER:
            asked: Message = message
            return asked
    return None


def answer_in(checkpoint: Any, asked: Message | None) -> tuple[bool, str | None]:
    """Whether ``checkpoint`` holds the turn of ``asked``, and the answer it holds to it.

    ``asked`` is a prompt (found by its message id) or a decision (found by the tool
    message of the call it decided); the answer is the text of the first assistant
    message without calls after it (``None`` before one).
    """
    if asked is None:
        return False, None
    messages = list(checkpoint.messages)
    start = _turn_of(messages, asked)
    if start is None:
        return False, None
    return True, _answer_after(messages[start + 1 :])


def _turn_of(messages: list[Any], asked: Message) -> int | None:
    """Where the last turn of ``asked`` starts in ``messages`` (its prompt, its call's result)."""
    decided = [d for d in get_data_parts(list(asked.parts)) if isinstance(d, dict)]
    call_id = decided[0].get("toolCallId") if decided else None
    start = None
    for at, message in enumerate(messages):
        if (call_id is None and message.role == "user" and message.id == asked.message_id) or (
            call_id is not None and message.role == "tool" and message.tool_call_id == call_id
        ):
            start = at
    return start


def _answer_after(messages: list[Any]) -> str | None:
    """The text of the first assistant message without calls before the next prompt, if any."""
    for message in messages:
        if message.role == "user":
            break
        if message.role == "assistant" and not message.tool_calls and message.text:
            return str(message.text)
    return None


def failure_parts(exc: BaseException) -> list[Part]:
    """The parts of a failed task's status: ``[CODE] message`` and ``{"error": ...}``."""
    payload = error_payload(exc)
    return [
        new_text_part(f"[{payload['code']}] {payload['message']}"),
        new_data_part({"error": payload}),
    ]


def retry_parts(exc: BaseException, shown: Message) -> list[Part]:
    """The parts of a task left waiting after an answer that could not run now.

    ``[CODE] message``, the data parts of ``shown`` (the request the task showed), and
    ``{"error": ...}``.
    """
    note, error = failure_parts(exc)
    return [note, *(p for p in shown.parts if p.HasField("data")), error]


async def ended_status(
    runner: ThreadRunner, checkpoint: Any, asked: Message | None
) -> tuple[int, list[Part]]:
    """The state and status parts of a task asking ``asked`` whose run is over.

    Over, not followed: it died with its replica, or ran on an earlier message of the same
    id. The thread waits for a decision: input-required, showing it (a call of unknown
    outcome too); it answered ``asked``: completed with that answer; it holds no turn of
    ``asked``, or ends in ``asked`` unanswered (its run died before the model answered):
    failed with ``SHUTTING_DOWN`` (send it again: it runs, or is answered where the thread
    left it); it holds the turn without an answer otherwise: failed with
    ``INVALID_ARGUMENT`` (sending it again would not run it).
    """
    pending = await runner.pending_of(checkpoint) if checkpoint is not None else None
    if pending is not None:
        return TaskState.TASK_STATE_INPUT_REQUIRED, input_request(pending)
    found, answer = answer_in(checkpoint, asked) if checkpoint is not None else (False, None)
    if answer is not None:
        return TaskState.TASK_STATE_COMPLETED, [new_text_part(answer)]
    if found and placement(checkpoint, asked.message_id if asked else None) == "continue":
        found = False  # sent again, it is answered where the thread left it
    if found:
        error: BaseException = InvalidArgumentError(
            "the thread holds this message's turn without an answer (its run stopped in it): "
            "send the next message"
        )
    else:
        error = ShuttingDownError(
            "the run of this task ended with its server (stopped, or frozen past its lease) "
            "before it answered; the thread is at its last checkpoint, without this "
            "message's answer: send it again"
        )
    return TaskState.TASK_STATE_FAILED, failure_parts(error)


async def revive_orphan(runner: ThreadRunner, task: Task) -> Task | None:
    """``task`` as it stands when the run working on it died with its replica, else ``None``.

    A task submitted or working for longer than the store's lease whose thread no run
    holds (here or on another replica) lost its run: the thread's checkpoint says how far
    it got (:func:`ended_status`).
    """
    if task.status.state not in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING):
        return None
    if task.status.HasField("timestamp"):
        age = time.time() - task.status.timestamp.ToDatetime(tzinfo=UTC).timestamp()
        if age < runner.lease:
            return None  # its run may be about to take the thread, or to report its end
    thread_id = check_thread_id(task.context_id)
    if await runner.held(thread_id):
        return None
    checkpoint = await runner.load(thread_id)
    return await _ended_as_thread_stands(runner, task, checkpoint)


async def revive_answered(runner: ThreadRunner, task: Task) -> Task | None:
    """``task`` whose answer arrived but whose run is gone (:func:`answer_arrived`), else ``None``.

    The answer's replica died after the SDK saved the task (before the run took the
    thread, or after the run's last save): the task read input-required showing nothing,
    which no client can answer, and no replica settled it (the replica test's clients
    read it for as long as they tried: issue 35's ``GAVE_UP``). Once no run holds the
    thread, it shows what the thread waits for (the approval again when the answer never
    ran); the request again when the decided call's result landed unanswered (the
    decision sent again has the thread answered, :func:`revive_settled`); else it ends
    as the thread stands (:func:`ended_status`).
    """
    if not answer_arrived(task):
        return None
    thread_id = check_thread_id(task.context_id)
    if await runner.held(thread_id):
        return None  # the answer's run, on this replica or another: it saves the task's end
    checkpoint = await runner.load(thread_id)
    call_id = decided_call({}, task)
    shown = shown_request(task)
    if (
        checkpoint is not None
        and checkpoint.pending is None
        and call_id is not None
        and shown is not None
        and ran_unanswered(checkpoint, call_id)
    ):
        revived = Task()
        revived.CopyFrom(task)
        revived.status.timestamp.GetCurrentTime()
        revived.status.message.CopyFrom(shown)
        return revived
    return await _ended_as_thread_stands(runner, task, checkpoint)


async def _ended_as_thread_stands(runner: ThreadRunner, task: Task, checkpoint: Any) -> Task:
    """A copy of ``task`` ended as ``checkpoint`` stands (:func:`ended_status`), stamped now."""
    state, parts = await ended_status(runner, checkpoint, asked_of(task))
    revived = Task()
    revived.CopyFrom(task)
    revived.status.timestamp.GetCurrentTime()
    revived.status.state = state  # type: ignore[assignment]
    revived.status.message.CopyFrom(agent_message(task, parts))
    return revived


async def revive_settled(runner: ThreadRunner, task: Task) -> Task | None:
    """``task`` showing an approval its thread no longer waits for: ended as the thread stands.

    The run that settled the approval ended without saving the task's end (its replica
    died after the thread's last save): the thread went on while the task still showed
    the approval, and the decision sent again met "no approval waiting". Only when the
    thread waits for nothing and no run holds it (:func:`ended_status`); a newer approval
    is never shown in place of the one the task showed (a decision that names no interrupt
    is bound to the one its task showed, :func:`check_bound`). Left as it is when the
    thread holds that call's result unanswered (its run died after it landed): the
    decision sent again on the task has the thread answered (``ThreadRunner.start_answer``).
    """
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED or shown_interrupt(task) is None:
        return None
    thread_id = check_thread_id(task.context_id)
    if await runner.held(thread_id):
        return None
    checkpoint = await runner.load(thread_id)  # again: a run may have ended since
    if checkpoint is None or checkpoint.pending is not None:
        return None
    call_id = decided_call({}, task)
    if call_id is not None and ran_unanswered(checkpoint, call_id):
        return None  # the call's result landed, unanswered: the decision sent again answers
    return await _ended_as_thread_stands(runner, task, checkpoint)
