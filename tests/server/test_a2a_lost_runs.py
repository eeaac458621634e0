"""A2A after a lost answer or a dead replica: a message sent again runs once; a task whose
run died is settled from its thread instead of staying ``working`` for ever.

Both seen in the replica test (``test_replicas.py``): a client whose stream broke sent its
message again and the thread held it twice; a task whose replica was SIGKILLed mid-run
read ``TASK_STATE_WORKING`` on every other replica, so its client never got an answer.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import a2a_pb2
from google.protobuf import json_format  # type: ignore[import-untyped]
from server_support import (
    PUBLISHED,
    Served,
    a2a_send,
    make_agent,
    rewrite_thread,
    start_server,
)

from async_helper import arun
from framework_agents import Agent, FunctionModel, InMemoryCheckpointer, InMemoryStorage, Message
from framework_agents.errors import CheckpointConflictError
from framework_agents.server import create_app
from framework_agents.server._a2a_tasks import (
    agent_message,
    input_request,
    revive_orphan,
    revive_settled,
)
from framework_agents.server._runner import ThreadRunner
from framework_agents.server._store import ServerStore

State = a2a_pb2.TaskState


def _message(text: str, context_id: str, message_id: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=message_id,
        role=a2a_pb2.Role.ROLE_USER,
        parts=[new_text_part(text)],
        context_id=context_id,
    )


def test_a_message_sent_again_under_its_id_runs_once(served: Served) -> None:
    PUBLISHED.clear()
    context = f"again-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[a2a_pb2.Task, ...]:
        first = await a2a_send(served.url, _message("hello", context, "m-hello"))
        again = await a2a_send(served.url, _message("hello", context, "m-hello"))
        asked = await a2a_send(served.url, _message("publish Once", context, "m-publish"))
        asked_again = await a2a_send(served.url, _message("publish Once", context, "m-publish"))
        return first, again, asked, asked_again

    first, again, asked, asked_again = arun(scenario())
    assert first.status.state == State.TASK_STATE_COMPLETED
    # The second task is answered from the thread: the turn is not run again.
    assert again.id != first.id
    assert again.status.state == State.TASK_STATE_COMPLETED
    assert get_text_parts(list(again.status.message.parts)) == ["echo: hello"]
    assert asked_again.status.state == State.TASK_STATE_INPUT_REQUIRED
    (request,) = get_data_parts(list(asked_again.status.message.parts))
    (shown,) = get_data_parts(list(asked.status.message.parts))
    assert request["interruptId"] == shown["interruptId"]
    thread = httpx.get(f"{served.url}/api/threads/{context}").json()
    users = [(m["id"], m["content"]) for m in thread["messages"] if m["role"] == "user"]
    assert users == [("m-hello", "hello"), ("m-publish", "publish Once")]
    assert PUBLISHED == []


def _task(context_id: str, asked: a2a_pb2.Message, *, age: float) -> a2a_pb2.Task:
    task = a2a_pb2.Task(id=uuid.uuid4().hex, context_id=context_id, history=[asked])
    task.status.state = State.TASK_STATE_WORKING
    task.status.timestamp.FromSeconds(int(time.time() - age))
    return task


def test_a_task_whose_run_died_is_settled_from_its_thread() -> None:
    runner = ThreadRunner(make_agent, ServerStore(InMemoryCheckpointer(), InMemoryStorage()))
    long_ago = runner.lease + 5

    async def scenario() -> dict[str, Any]:
        ran = await runner.start_run("t1", Message(role="user", content="hello", id="m1"))
        await ran.wait()
        asked = await runner.start_run("t2", Message(role="user", content="publish X", id="m2"))
        await ran.wait()
        await asked.wait()
        return {
            # the run answered before its replica died: completed with that answer
            "answered": await revive_orphan(
                runner, _task("t1", _message("hello", "t1", "m1"), age=long_ago)
            ),
            # the run died before its turn was saved: failed, coded, send it again
            "lost": await revive_orphan(
                runner, _task("t1", _message("again", "t1", "m-lost"), age=long_ago)
            ),
            # the run stopped for an approval: input-required, showing it
            "asking": await revive_orphan(
                runner, _task("t2", _message("publish X", "t2", "m2"), age=long_ago)
            ),
            # younger than the lease: its run may still report (left alone)
            "young": await revive_orphan(runner, _task("t1", _message("hello", "t1", "m1"), age=0)),
        }

    got = arun(scenario())
    answered, lost, asking = got["answered"], got["lost"], got["asking"]
    assert answered.status.state == State.TASK_STATE_COMPLETED
    assert get_text_parts(list(answered.status.message.parts)) == ["echo: hello"]
    assert lost.status.state == State.TASK_STATE_FAILED
    (error,) = get_data_parts(list(lost.status.message.parts))
    assert error["error"]["code"] == "SHUTTING_DOWN"
    assert asking.status.state == State.TASK_STATE_INPUT_REQUIRED
    (request,) = get_data_parts(list(asking.status.message.parts))
    assert request["type"] == "tool_approval_request" and request["args"]["title"] == "X"
    assert got["young"] is None


def _conflicting(messages: list[Message], tools: list[Any]) -> Message:
    """Echoes; a turn asking ``conflict`` loses its thread, as a replica frozen past its lease."""
    if messages[-1].text == "conflict":
        raise CheckpointConflictError("the lease ran out: another holder has the thread")
    return Message(role="assistant", content=f"echo: {messages[-1].text}")


def test_a_run_that_lost_its_thread_ends_its_task_as_the_thread_stands(tmp_path: Path) -> None:
    """``CHECKPOINT_CONFLICT`` (nothing written) is not the task's end: the thread is.

    Here nothing of the turn landed: failed ``SHUTTING_DOWN`` (send it again). In the replica
    test a frozen replica's approved call lost its thread this way; the task then showed the
    call of unknown outcome another replica had surfaced, where it used to fail with the
    conflict and leave its client no task that showed the open interrupt.
    """
    served = start_server(
        create_app(
            lambda: Agent(FunctionModel(_conflicting)), store=str(tmp_path / "s"), console=False
        )
    )
    try:
        task = arun(a2a_send(served.url, _message("conflict", "lost-ctx", "m-conflict")))
    finally:
        served.stop()
    assert task.status.state == State.TASK_STATE_FAILED
    (error,) = get_data_parts(list(task.status.message.parts))
    assert error["error"]["code"] == "SHUTTING_DOWN"


def test_the_lease_is_the_stores_also_through_a_tenants_checkpointer() -> None:
    from framework_agents.server._tenants import TenantCheckpointer

    inner = InMemoryCheckpointer()
    inner.lease = 7.0  # type: ignore[attr-defined]  # as a database store's checkpointer has
    plain = ThreadRunner(make_agent, ServerStore(inner, InMemoryStorage()))
    scoped = ThreadRunner(make_agent, ServerStore(TenantCheckpointer(inner), InMemoryStorage()))
    assert plain.lease == scoped.lease == 7.0
    assert (
        ThreadRunner(make_agent, ServerStore(InMemoryCheckpointer(), InMemoryStorage())).lease
        == 30.0
    )


def test_a_task_showing_an_approval_settled_since_ends_as_the_thread_stands() -> None:
    """Its decision ran, but the replica died before the task's end was saved."""
    runner = ThreadRunner(make_agent, ServerStore(InMemoryCheckpointer(), InMemoryStorage()))
    asked = _message("publish Late", "t3", "m3")

    async def scenario() -> tuple[Any, Any]:
        await (
            await runner.start_run("t3", Message(role="user", content="publish Late", id="m3"))
        ).wait()
        checkpoint = await runner.load("t3")
        assert checkpoint is not None
        pending = await runner.pending_of(checkpoint)
        assert pending is not None
        task = _task("t3", asked, age=0)
        task.status.state = State.TASK_STATE_INPUT_REQUIRED
        task.status.message.CopyFrom(agent_message(task, input_request(pending)))
        waiting = await revive_settled(runner, task)  # the approval is still open: left alone
        await (await runner.start_resume("t3", {pending.interrupt_id: "approve"})).wait()
        return waiting, await revive_settled(runner, task)

    PUBLISHED.clear()
    waiting, settled = arun(scenario())
    assert waiting is None
    assert settled.status.state == State.TASK_STATE_COMPLETED
    assert get_text_parts(list(settled.status.message.parts)) == ["done: published 'Late' x3"]
    assert PUBLISHED == [{"title": "Late", "copies": 3}]


def test_an_answer_that_cannot_run_now_leaves_its_task_waiting(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run holds the thread and nothing waits (a dead replica's decision, in its call).

    ``THREAD_BUSY`` on the task, which still waits (a failed task could never show the
    call of unknown outcome the thread shows once the lease runs out).
    """
    runner = served.app.state.runner
    PUBLISHED.clear()

    async def scenario() -> tuple[list[str], a2a_pb2.Task, a2a_pb2.Task]:
        client = await create_client(served.url, client_config=ClientConfig(streaming=False))
        try:
            asked = await a2a_send(served.url, _message("publish Held", "held-ctx", "m-held"))
            (request,) = get_data_parts(list(asked.status.message.parts))
            data = {"decision": "approve", "interruptId": request["interruptId"]}
            answer = a2a_pb2.Message(
                message_id=uuid.uuid4().hex,
                role=a2a_pb2.Role.ROLE_USER,
                parts=[new_data_part(data)],
                context_id="held-ctx",
                task_id=asked.id,
            )

            async def held(thread_id: str) -> bool:
                return True

            async def nothing(checkpoint: Any) -> None:
                return None

            with monkeypatch.context() as patch:
                patch.setattr(runner, "held", held)
                patch.setattr(runner, "pending_of", nothing)
                async for _ in client.send_message(a2a_pb2.SendMessageRequest(message=answer)):
                    pass
                waiting = await client.get_task(a2a_pb2.GetTaskRequest(id=asked.id))
                refused = [
                    d["error"]["code"]
                    for d in get_data_parts(list(waiting.status.message.parts))
                    if "error" in d
                ]
                shown = [
                    d["interruptId"]
                    for d in get_data_parts(list(waiting.status.message.parts))
                    if d.get("type") == "tool_approval_request"
                ]
                assert shown == [request["interruptId"]]  # the same approval, still shown
            answer.message_id = uuid.uuid4().hex  # answered again once the run has ended
            async for _ in client.send_message(a2a_pb2.SendMessageRequest(message=answer)):
                pass
            done = await client.get_task(a2a_pb2.GetTaskRequest(id=asked.id))
            return refused, waiting, done
        finally:
            await client.close()

    refused, waiting, done = arun(scenario())
    assert refused == ["THREAD_BUSY"]
    assert waiting.status.state == State.TASK_STATE_INPUT_REQUIRED
    assert done.status.state == State.TASK_STATE_COMPLETED
    assert PUBLISHED == [{"title": "Held", "copies": 3}]


def test_a_decision_after_its_approval_was_settled_reads_the_answer(served: Served) -> None:
    """Its approval was settled meanwhile (here over the JSON API): not HITL_DECISION, the task
    ends as the thread stands, the tool having run once."""
    PUBLISHED.clear()

    async def scenario() -> a2a_pb2.Task:
        asked = await a2a_send(served.url, _message("publish Twice", "settled-ctx", "m-settled"))
        (request,) = get_data_parts(list(asked.status.message.parts))
        headers = {"Accept": "application/json"}
        async with httpx.AsyncClient(base_url=served.url, headers=headers) as api:
            done = await api.post(
                "/api/threads/settled-ctx/resume",
                json={"decisions": {request["interruptId"]: "approve"}},
            )
            assert done.json()["status"] == "completed"
        client = await create_client(served.url, client_config=ClientConfig(streaming=False))
        try:
            answer = a2a_pb2.Message(
                message_id=uuid.uuid4().hex,
                role=a2a_pb2.Role.ROLE_USER,
                parts=[
                    new_data_part({"decision": "approve", "interruptId": request["interruptId"]})
                ],
                context_id="settled-ctx",
                task_id=asked.id,
            )
            try:
                async for _ in client.send_message(a2a_pb2.SendMessageRequest(message=answer)):
                    pass
            except Exception:  # the task read as completed first: a finished task is refused
                pass
            return await client.get_task(a2a_pb2.GetTaskRequest(id=asked.id))
        finally:
            await client.close()

    task = arun(scenario())
    assert task.status.state == State.TASK_STATE_COMPLETED
    assert get_text_parts(list(task.status.message.parts)) == ["done: published 'Twice' x3"]
    assert PUBLISHED == [{"title": "Twice", "copies": 3}]


async def _answer_cut_short(served: Served, context: str) -> tuple[Any, dict[str, Any], Any]:
    """Ask for a publish, then save its task as the answer's replica left it when it died.

    The SDK moves the request into the history when the answer arrives and saves the task
    (``TaskManager.update_with_message``) before the answer's run starts. The task asked,
    the request it showed, and how to save the cut-short task again.
    """
    storage = served.app.state.runner.store.storage
    asked = await a2a_send(served.url, _message("publish Cut", context, f"m-{context}"))
    (request,) = get_data_parts(list(asked.status.message.parts))
    key = f"a2a/tasks/{asked.id}.json"
    record = json.loads(await storage.get(key))
    task = json_format.ParseDict(record["task"], a2a_pb2.Task())
    decision = {"decision": "approve", **{k: request[k] for k in ("interruptId", "toolCallId")}}
    answer = a2a_pb2.Message(
        message_id=uuid.uuid4().hex,
        role=a2a_pb2.Role.ROLE_USER,
        parts=[new_data_part(decision)],
        context_id=context,
        task_id=asked.id,
    )
    task.history.append(task.status.message)
    task.status.ClearField("message")
    task.history.append(answer)
    record["task"] = json_format.MessageToDict(task)

    async def cut() -> None:
        await storage.put(key, json.dumps(record).encode())

    await cut()
    return asked, request, cut


def _shown(task: a2a_pb2.Task) -> list[str]:
    return [d["type"] for d in get_data_parts(list(task.status.message.parts)) if "type" in d]


def test_a_task_its_answer_reached_before_its_replica_died_is_settled(served: Served) -> None:
    """The answer's replica died after the SDK saved the task, before or after the run:
    the task read input-required showing nothing.

    Seen in the replica test (issue 35's ``GAVE_UP``): the client read the task, empty, for
    as long as it tried; no other replica settled it (it showed no request to settle).
    Read now, it shows the approval again while the thread still waits for it (the
    answer's run never took the thread), and ends as the thread stands once it ran.
    """
    runner = served.app.state.runner
    PUBLISHED.clear()

    async def scenario() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        asked, request, cut = await _answer_cut_short(served, "cut-ctx")
        client = await create_client(served.url, client_config=ClientConfig(streaming=False))
        try:
            waiting = await client.get_task(a2a_pb2.GetTaskRequest(id=asked.id))
            await cut()  # cut short again, this time after the answer's run
            await (await runner.start_resume("cut-ctx", {request["interruptId"]: "approve"})).wait()
            done = await client.get_task(a2a_pb2.GetTaskRequest(id=asked.id))
        finally:
            await client.close()
        return waiting, done

    waiting, done = arun(scenario())
    assert waiting.status.state == State.TASK_STATE_INPUT_REQUIRED
    assert _shown(waiting) == ["tool_approval_request"]
    assert done.status.state == State.TASK_STATE_COMPLETED
    assert get_text_parts(list(done.status.message.parts)) == ["done: published 'Cut' x3"]
    assert PUBLISHED == [{"title": "Cut", "copies": 3}]


def test_a_task_its_answer_reached_shows_its_request_when_the_call_landed_unanswered(
    served: Served, store_dir: Path
) -> None:
    """The answer's run died after its call's result landed, before the model answered:
    the task shows the request again, and the decision sent again has the thread answered
    (the call does not run again)."""
    PUBLISHED.clear()

    async def scenario() -> tuple[a2a_pb2.Task, a2a_pb2.Task]:
        asked, request, _cut = await _answer_cut_short(served, "landed-ctx")

        def landed(checkpoint: Any) -> dict[str, Any]:
            call = checkpoint.pending
            result = Message(role="tool", content="published Cut", tool_call_id=call.id)
            return {
                "turn": checkpoint.pending_turn,
                "results": [result],
                "pending": None,
                "pending_turn": None,
                "interrupt_id": None,
            }

        await asyncio.to_thread(rewrite_thread, store_dir, "landed-ctx", landed)
        client = await create_client(served.url, client_config=ClientConfig(streaming=False))
        try:
            waiting = await client.get_task(a2a_pb2.GetTaskRequest(id=asked.id))
        finally:
            await client.close()
        decision = {k: request[k] for k in ("interruptId", "toolCallId")}
        again = a2a_pb2.Message(
            message_id=uuid.uuid4().hex,
            role=a2a_pb2.Role.ROLE_USER,
            parts=[new_data_part({"decision": "approve", **decision})],
            context_id="landed-ctx",
            task_id=asked.id,
        )
        return waiting, await a2a_send(served.url, again)

    waiting, done = arun(scenario())
    assert waiting.status.state == State.TASK_STATE_INPUT_REQUIRED
    assert _shown(waiting) == ["tool_approval_request"]
    assert done.status.state == State.TASK_STATE_COMPLETED
    assert get_text_parts(list(done.status.message.parts)) == ["done: published Cut"]
    assert PUBLISHED == []  # its result had landed: not run again
