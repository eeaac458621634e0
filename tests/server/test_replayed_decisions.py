"""A decision sent again for a call whose process died running it: shown the call, run never.

Seen in the replica test (``test_replicas.py``): an A2A client approved a call, the
replica died while the tool ran, and the thread came to show the call as of unknown
outcome under a new interrupt id. The client's stream had broken, so it sent its decision
again, naming the approval its task showed: the task failed ``HITL_DECISION``, and no task
showed the new interrupt. Now every protocol answers such a decision with the call's new
interrupt, as the thread stands, and runs nothing: A2A leaves the task input-required
showing it, AG-UI ends the run with it, the JSON API answers ``interrupted`` with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import a2a_pb2
from server_support import PUBLISHED, Served, a2a_send, rewrite_thread
from test_agui import agui, kinds, run_input

from async_helper import arun
from framework_agents import Message
from framework_agents.checkpoint.model import ThreadCheckpoint

State = a2a_pb2.TaskState


def _died_in_the_call(store_dir: Path, thread_id: str) -> None:
    """The thread as a process that died running the approved call left it.

    The call's turn saved with the call in flight before the tool ran (the at-most-once
    protocol's first step), nothing pending: what the next reader shows as of unknown
    outcome, under a new interrupt id.
    """

    def update(checkpoint: ThreadCheckpoint) -> dict[str, Any]:
        assert checkpoint.pending is not None
        return {
            "turn": checkpoint.pending_turn,
            "in_flight": [checkpoint.pending],
            "pending": None,
            "pending_turn": None,
            "interrupt_id": None,
        }

    rewrite_thread(store_dir, thread_id, update)


def _died_after_the_result(store_dir: Path, thread_id: str, result: str) -> None:
    """The thread as a process that died after the approved call's result landed left it.

    The turn and its result saved (the protocol's second step), nothing pending or in
    flight, no answer yet.
    """

    def update(checkpoint: ThreadCheckpoint) -> dict[str, Any]:
        call = checkpoint.pending
        assert call is not None
        landed = Message(role="tool", content=result, tool_call_id=call.id, name=call.name)
        return {
            "turn": checkpoint.pending_turn,
            "results": [landed],
            "pending": None,
            "pending_turn": None,
            "interrupt_id": None,
        }

    rewrite_thread(store_dir, thread_id, update)


def _request(parts: Any) -> dict[str, Any]:
    (request,) = [d for d in get_data_parts(list(parts)) if d.get("type")]
    return dict(request)


def _a2a_message(context: str, task_id: str, *, text: str = "", data: Any = None) -> Any:
    part = new_data_part(data) if data is not None else new_text_part(text)
    return a2a_pb2.Message(
        message_id=uuid.uuid4().hex,
        role=a2a_pb2.Role.ROLE_USER,
        parts=[part],
        context_id=context,
        task_id=task_id,
    )


def _approved_again(
    url: str, context: str, died: Callable[[], None], *, same_task: bool
) -> tuple[dict[str, Any], dict[str, Any], a2a_pb2.Task]:
    """Ask for a publish, let ``died`` leave the thread, then send its approval again.

    On the task that showed the approval (``same_task``) or as a new task: the approval
    shown, the decision sent, and the task as the server then has it.
    """
    asked = arun(a2a_send(url, _a2a_message(context, "", text="publish Once")))
    shown = _request(asked.status.message.parts)
    died()
    decision = {
        "decision": "approve",
        "toolCallId": shown["toolCallId"],
        "interruptId": shown["interruptId"],
    }
    task_id = asked.id if same_task else ""
    again = arun(a2a_send(url, _a2a_message(context, task_id, data=decision)))
    return shown, decision, again


@pytest.mark.parametrize("same_task", [True, False], ids=["on-its-task", "as-a-new-task"])
def test_a2a_a_decision_sent_again_shows_the_calls_new_interrupt(
    served: Served, store_dir: Path, same_task: bool
) -> None:
    PUBLISHED.clear()
    context = f"replayed-{uuid.uuid4().hex[:8]}"
    shown, _decision, again = _approved_again(
        served.url, context, lambda: _died_in_the_call(store_dir, context), same_task=same_task
    )
    assert again.status.state == State.TASK_STATE_INPUT_REQUIRED, again.status
    unknown = _request(again.status.message.parts)
    assert unknown["outcomeUnknown"] is True
    assert unknown["toolCallId"] == shown["toolCallId"]
    assert unknown["interruptId"] != shown["interruptId"]
    assert PUBLISHED == []  # the call is never run again by the decision sent again
    settle = {"decision": "reject", "toolCallId": unknown["toolCallId"]}
    settle["interruptId"] = unknown["interruptId"]
    done = arun(a2a_send(served.url, _a2a_message(context, again.id, data=settle)))
    assert done.status.state == State.TASK_STATE_COMPLETED, done.status
    assert get_text_parts(list(done.status.message.parts))[0].startswith("done: ")
    assert PUBLISHED == []


def test_a2a_a_decision_for_another_call_is_still_refused(served: Served, store_dir: Path) -> None:
    context = f"other-{uuid.uuid4().hex[:8]}"
    asked = arun(a2a_send(served.url, _a2a_message(context, "", text="publish Once")))
    shown = _request(asked.status.message.parts)
    _died_in_the_call(store_dir, context)
    decision = {"decision": "approve", "toolCallId": "call-9", "interruptId": shown["interruptId"]}
    again = arun(a2a_send(served.url, _a2a_message(context, "", data=decision)))
    assert again.status.state == State.TASK_STATE_FAILED
    assert "HITL_DECISION" in get_text_parts(list(again.status.message.parts))[0]


def test_agui_a_resume_sent_again_shows_the_calls_new_interrupt(
    served: Served, store_dir: Path
) -> None:
    PUBLISHED.clear()
    asking = {"id": "g-publish", "role": "user", "content": "publish Once"}
    with httpx.Client(base_url=served.url, timeout=30) as client:
        events = agui(client, run_input("g-replayed", [asking]))
        (first,) = events[-1]["outcome"]["interrupts"]
        _died_in_the_call(store_dir, "g-replayed")
        resume = [{"interruptId": first["id"], "status": "resolved", "payload": {"approved": True}}]
        again = agui(client, run_input("g-replayed", [asking], resume=resume))
    assert kinds(again) == ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    (unknown,) = again[-1]["outcome"]["interrupts"]
    assert unknown["id"] != first["id"]
    assert unknown["toolCallId"] == first["toolCallId"]
    assert unknown["metadata"]["outcomeUnknown"] is True
    assert PUBLISHED == []


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
@pytest.mark.parametrize("name", ["tool_call_id", "interrupt_id"])
def test_api_a_resume_sent_again_shows_the_calls_new_interrupt(
    served: Served, store_dir: Path, accept: str, name: str
) -> None:
    PUBLISHED.clear()
    thread = f"api-replayed-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=served.url, timeout=30, headers={"Accept": accept}) as client:
        asked = client.post(
            f"/api/threads/{thread}/runs",
            json={"prompt": "publish Once"},
            headers={"Accept": "application/json"},
        ).json()
        first = asked["pending"]
        _died_in_the_call(store_dir, thread)
        answer = client.post(
            f"/api/threads/{thread}/resume", json={"decisions": {first[name]: "approve"}}
        )
    assert answer.status_code == 200, answer.text
    if accept == "application/json":
        body = answer.json()
        assert body["status"] == "interrupted"
        unknown = body["pending"]
    else:
        (block,) = [b for b in answer.text.split("\n\n") if b.strip()]
        kind, data = block.split("\n", 1)
        assert kind == "event: interrupt"
        unknown = httpx.Response(200, content=data[len("data: ") :]).json()["pending"]
    assert unknown["outcome_unknown"] is True
    assert unknown["tool_call_id"] == first["tool_call_id"]
    assert unknown["interrupt_id"] != first["interrupt_id"]
    assert PUBLISHED == []


@pytest.mark.parametrize("same_task", [True, False], ids=["on-its-task", "as-a-new-task"])
def test_a2a_a_decision_sent_again_after_its_call_landed_is_answered_once(
    served: Served, store_dir: Path, same_task: bool
) -> None:
    """Its run died after the call's result landed, before the model answered: the decision
    sent again has the thread answered, the call not run again (it was HITL_DECISION for a
    new task, and the task failed SHUTTING_DOWN "send it again" on its own)."""
    PUBLISHED.clear()
    context = f"landed-{uuid.uuid4().hex[:8]}"
    _shown, decision, again = _approved_again(
        served.url,
        context,
        lambda: _died_after_the_result(store_dir, context, "published 'Once' x3"),
        same_task=same_task,
    )
    assert again.status.state == State.TASK_STATE_COMPLETED, again.status
    assert get_text_parts(list(again.status.message.parts)) == ["done: published 'Once' x3"]
    assert PUBLISHED == []
    thread = httpx.get(f"{served.url}/api/threads/{context}").json()
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    once_more = arun(a2a_send(served.url, _a2a_message(context, "", data=decision)))
    assert once_more.status.state == State.TASK_STATE_FAILED  # nothing waits: not run again
    assert len(httpx.get(f"{served.url}/api/threads/{context}").json()["messages"]) == 4


def test_agui_catching_up_after_the_calls_result_landed_has_the_thread_answered(
    served: Served, store_dir: Path
) -> None:
    """The approval's run died after the call's result landed, before the answer: the thread's
    messages end in the prompt, nothing pending. A client catching up (no new message, no
    resume) was shown just that; now the thread is answered, the call not run again."""
    PUBLISHED.clear()
    asking = {"id": "g-landed", "role": "user", "content": "publish Once"}
    with httpx.Client(base_url=served.url, timeout=30) as client:
        agui(client, run_input("g-landed", [asking]))
        _died_after_the_result(store_dir, "g-landed", "published 'Once' x3")
        events = agui(client, run_input("g-landed", [asking]))
        again = agui(client, run_input("g-landed", [asking]))  # answered once only
    deltas = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == ["done: published 'Once' x3"], kinds(events)
    snapshot = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool", "assistant"]
    assert "TEXT_MESSAGE_CONTENT" not in kinds(again)
    assert PUBLISHED == []
