"""A2A 1.0 with the official a2a-sdk client over a real socket: runs, approvals, tasks, restart."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import a2a_pb2
from server_support import PUBLISHED, Served, make_agent, start_server

from framework_agents.server import create_app

State = a2a_pb2.TaskState


def user_message(
    *, text: str | None = None, data: dict[str, Any] | None = None, **ids: str
) -> a2a_pb2.Message:
    """A user message with a text or a data part (and task/context ids)."""
    part = new_text_part(text) if text is not None else new_data_part(data or {})
    return a2a_pb2.Message(
        message_id=str(uuid.uuid4()), role=a2a_pb2.Role.ROLE_USER, parts=[part], **ids
    )


async def send(
    url: str, message: a2a_pb2.Message, *, streaming: bool, binding: str = "JSONRPC"
) -> a2a_pb2.Task:
    """Send ``message`` and return the task as the client last saw it."""
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding])
    client = await create_client(url, client_config=config)
    try:
        task_ids: set[str] = set()
        updates = 0
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            updates += 1
            for field in ("task", "status_update", "artifact_update"):
                if response.HasField(field):
                    event = getattr(response, field)
                    task_ids.add(event.id if field == "task" else event.task_id)
        assert len(task_ids) == 1, task_ids
        if streaming:
            assert updates > 1  # several stream responses, not one answer
        return await client.get_task(a2a_pb2.GetTaskRequest(id=task_ids.pop()))
    finally:
        await client.close()


async def read_thread(url: str, thread_id: str) -> dict[str, Any]:
    """``GET /api/threads/{thread_id}``."""
    async with httpx.AsyncClient(base_url=url) as client:
        data: dict[str, Any] = (await client.get(f"/api/threads/{thread_id}")).json()
        return data


def approval_of(task: a2a_pb2.Task) -> dict[str, Any]:
    """The approval data part of an input-required task."""
    assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
    (data,) = get_data_parts(list(task.status.message.parts))
    assert data["type"] == "tool_approval_request"
    approval: dict[str, Any] = data
    return approval


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "blocking"])
def test_a_turn_completes_and_a_follow_up_uses_the_same_thread(
    served: Served, streaming: bool
) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="hello"), streaming=streaming)
        assert task.status.state == State.TASK_STATE_COMPLETED
        assert get_text_parts(list(task.status.message.parts)) == ["echo: hello"]
        second = await send(
            served.url, user_message(text="again", context_id=task.context_id), streaming=streaming
        )
        assert second.context_id == task.context_id and second.id != task.id
        thread = await read_thread(served.url, task.context_id)
        assert [m["text"] if "text" in m else m["content"] for m in thread["messages"]] == [
            "hello",
            "echo: hello",
            "again",
            "echo: again",
        ]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("decision", "published", "answer"),
    [
        ({"decision": "approve"}, [{"title": "News", "copies": 3}], "done: published 'News' x3"),
        (
            {"decision": "edit", "editedArgs": {"title": "Edited", "copies": 2}},
            [{"title": "Edited", "copies": 2}],
            "done: published 'Edited' x2",
        ),
        ({"decision": "reject", "reason": "no way"}, [], "no way"),
    ],
    ids=["approve", "edit", "reject"],
)
@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "blocking"])
def test_approval_round_trip(
    served: Served, streaming: bool, decision: dict[str, Any], published: list[Any], answer: str
) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="publish News"), streaming=streaming)
        request = approval_of(task)
        assert request["tool"] == "publish"
        assert request["args"] == {"title": "News", "copies": 3}
        assert request["allowedDecisions"] == ["approve", "edit", "reject"]
        assert PUBLISHED == []
        reply = user_message(
            data={**decision, "toolCallId": request["toolCallId"]},
            task_id=task.id,
            context_id=task.context_id,
        )
        done = await send(served.url, reply, streaming=streaming)
        assert done.id == task.id
        assert done.status.state == State.TASK_STATE_COMPLETED
        assert answer in get_text_parts(list(done.status.message.parts))[0]
        assert published == PUBLISHED
        for value in PUBLISHED:  # protobuf Value made 3 a float: the call got ints
            assert type(value["copies"]) is int

    asyncio.run(scenario())


def test_list_tasks_by_context_and_cancel(served: Served) -> None:
    async def scenario() -> None:
        first = await send(served.url, user_message(text="one"), streaming=False)
        await send(
            served.url, user_message(text="two", context_id=first.context_id), streaming=False
        )
        other = await send(served.url, user_message(text="elsewhere"), streaming=False)
        waiting = await send(
            served.url, user_message(text="publish X", context_id=first.context_id), streaming=False
        )
        client = await create_client(served.url, client_config=ClientConfig(streaming=False))
        try:
            listed = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=first.context_id))
            assert len(listed.tasks) == 3
            assert {t.context_id for t in listed.tasks} == {first.context_id}
            assert other.id not in {t.id for t in listed.tasks}
            cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=waiting.id))
            assert cancelled.status.state == State.TASK_STATE_CANCELED
        finally:
            await client.close()
        thread = await read_thread(served.url, first.context_id)
        assert thread["pending"] is None  # the cancelled approval was rejected
        assert PUBLISHED == []

    asyncio.run(scenario())


def test_rest_binding_and_bad_decision(served: Served) -> None:
    async def scenario() -> None:
        task = await send(
            served.url, user_message(text="publish R"), streaming=True, binding="HTTP+JSON"
        )
        request = approval_of(task)
        wrong = user_message(
            data={"decision": "approve", "toolCallId": "someone-else"},
            task_id=task.id,
            context_id=task.context_id,
        )
        failed = await send(served.url, wrong, streaming=False, binding="HTTP+JSON")
        assert failed.status.state == State.TASK_STATE_FAILED
        (data,) = get_data_parts(list(failed.status.message.parts))
        assert data["error"]["code"] == "HITL_DECISION"
        thread = await read_thread(served.url, task.context_id)
        assert thread["pending"]["tool_call_id"] == request["toolCallId"]

    asyncio.run(scenario())


def test_decision_after_a_server_restart(store_dir: Path) -> None:
    PUBLISHED.clear()

    async def ask(url: str) -> a2a_pb2.Task:
        return await send(url, user_message(text="publish Later"), streaming=True)

    first = start_server(create_app(make_agent, store=str(store_dir), console=False))
    try:
        task = asyncio.run(ask(first.url))
        request = approval_of(task)
    finally:
        first.stop()
    second = start_server(create_app(make_agent, store=str(store_dir), console=False))
    try:
        reply = user_message(
            data={"decision": "approve", "toolCallId": request["toolCallId"]},
            task_id=task.id,
            context_id=task.context_id,
        )
        done = asyncio.run(send(second.url, reply, streaming=True))
        assert done.status.state == State.TASK_STATE_COMPLETED
        assert PUBLISHED == [{"title": "Later", "copies": 3}]
    finally:
        second.stop()


def test_a_new_turn_while_an_approval_waits_fails_with_its_code(served: Served) -> None:
    async def scenario() -> None:
        waiting = await send(served.url, user_message(text="publish W"), streaming=False)
        approval_of(waiting)
        other = user_message(text="something else", context_id=waiting.context_id)
        failed = await send(served.url, other, streaming=True)
        assert failed.status.state == State.TASK_STATE_FAILED
        (data,) = get_data_parts(list(failed.status.message.parts))
        assert data["error"]["code"] == "APPROVAL_PENDING"
        thread = await read_thread(served.url, waiting.context_id)
        assert thread["pending"]["tool"] == "publish"

    asyncio.run(scenario())
