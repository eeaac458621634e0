"""A2A decisions and cancels act on the approval their task showed, and nothing else.

An input-required task shows one approval (its ``interruptId``). When that approval was
settled elsewhere (the JSON API) and a newer one opened on the thread, an answer on the
old task must not settle the newer one: the approver never saw its call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types import a2a_pb2
from server_support import PUBLISHED, Served, start_server
from test_a2a import State, approval_of, read_thread, send, user_message

from framework_agents import Agent, FunctionModel, Message, ToolCall, tool
from framework_agents.server import create_app

_JSON = {"accept": "application/json"}


async def _settled_and_reopened(url: str, task: a2a_pb2.Task) -> dict[str, Any]:
    """Reject the task's approval over the JSON API, open a newer one; its pending."""
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        thread = f"/api/threads/{task.context_id}"
        settled = await client.post(
            f"{thread}/resume", json={"decisions": {"publish": {"reject": "no"}}}, headers=_JSON
        )
        assert settled.json()["status"] == "completed"
        reopened = await client.post(
            f"{thread}/runs", json={"prompt": "publish Second"}, headers=_JSON
        )
        pending: dict[str, Any] = reopened.json()["pending"]
        assert pending["args"]["title"] == "Second"
        return pending


async def _cancel(url: str, task_id: str) -> a2a_pb2.Task:
    """``CancelTask`` with the official client; the task as it answers."""
    client = await create_client(url, client_config=ClientConfig(streaming=False))
    try:
        return await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
    finally:
        await client.close()


def test_a_decision_on_a_task_whose_approval_was_settled_elsewhere_is_refused(
    served: Served,
) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="publish First"), streaming=False)
        shown = approval_of(task)
        newer = await _settled_and_reopened(served.url, task)
        for data in (
            {"decision": "approve"},
            {"decision": "approve", "toolCallId": shown["toolCallId"]},
        ):
            late = user_message(data=data, task_id=task.id, context_id=task.context_id)
            answered = await send(served.url, late, streaming=False)
            assert answered.status.state == State.TASK_STATE_FAILED
            (error,) = get_data_parts(list(answered.status.message.parts))
            assert error["error"]["code"] == "HITL_DECISION"
            thread = await read_thread(served.url, task.context_id)
            assert thread["pending"]["interrupt_id"] == newer["interrupt_id"]  # still open
            assert PUBLISHED == []
            task = await send(served.url, user_message(text="publish First"), streaming=False)
            shown = approval_of(task)
            newer = await _settled_and_reopened(served.url, task)

    asyncio.run(scenario())


def test_a_decision_naming_another_interrupt_is_refused(served: Served) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="publish News"), streaming=False)
        wrong = user_message(
            data={"decision": "approve", "interruptId": "interrupt-of-something-else"},
            task_id=task.id,
            context_id=task.context_id,
        )
        answered = await send(served.url, wrong, streaming=False)
        assert answered.status.state == State.TASK_STATE_FAILED
        assert PUBLISHED == []

    asyncio.run(scenario())


def test_cancelling_a_task_whose_approval_was_settled_elsewhere_leaves_the_newer_one(
    served: Served,
) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="publish First"), streaming=False)
        newer = await _settled_and_reopened(served.url, task)
        cancelled = await _cancel(served.url, task.id)
        assert cancelled.status.state == State.TASK_STATE_CANCELED
        thread = await read_thread(served.url, task.context_id)
        assert thread["pending"]["interrupt_id"] == newer["interrupt_id"]
        assert PUBLISHED == []

    asyncio.run(scenario())


@tool(requires_approval=True, allowed_decisions=("approve", "edit"))
def deploy(env: str) -> str:
    """Deploy (approve or edit only: no reject)."""
    return f"deployed {env}"


def _deployer(messages: list[Message], tools: object) -> Message:
    if messages[-1].role == "tool":
        return Message("assistant", f"done: {messages[-1].text}")
    return Message("assistant", tool_calls=[ToolCall("c1", "deploy", {"env": "prod"})])


def test_cancelling_a_task_whose_tool_cannot_be_rejected_keeps_the_approval(
    store_dir: Path,
) -> None:
    """The cancel ends the task; the approval stays open (it was a 500 before)."""
    running = start_server(
        create_app(
            lambda: Agent(FunctionModel(_deployer), tools=[deploy]),
            store=str(store_dir),
            console=False,
        )
    )

    async def scenario() -> None:
        task = await send(running.url, user_message(text="deploy"), streaming=False)
        assert approval_of(task)["allowedDecisions"] == ["approve", "edit"]
        cancelled = await _cancel(running.url, task.id)
        assert cancelled.status.state == State.TASK_STATE_CANCELED
        thread = await read_thread(running.url, task.context_id)
        assert thread["pending"]["tool"] == "deploy" and thread["running"] is False

    try:
        asyncio.run(scenario())
    finally:
        running.stop()


def test_a_message_not_from_the_user_or_with_an_empty_text_is_invalid_params(
    served: Served,
) -> None:
    async def scenario() -> None:
        bad = [
            {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]},
            {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": ""}]},
        ]
        async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
            for message in bad:
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": message},
                }
                answer = await client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
                assert answer.json()["error"]["code"] == -32602, answer.text
                rest = await client.post(
                    "/a2a/rest/message:send",
                    json={"message": message},
                    headers={"A2A-Version": "1.0"},
                )
                assert rest.status_code == 400, rest.text

    asyncio.run(scenario())


def test_a_body_nested_too_deeply_is_a_parse_error(served: Served) -> None:
    """It was an internal error (-32603) with a traceback in the log."""
    deep = b"[" * 100_000 + b"]" * 100_000
    with httpx.Client(base_url=served.url, timeout=30) as client:
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        answer = client.post("/a2a", content=deep, headers=headers)
        assert answer.json()["error"]["code"] == -32700
        fine = client.post(
            "/a2a",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}},
            headers={"A2A-Version": "1.0"},
        )
        assert "error" in fine.json() and fine.json()["error"]["code"] != -32700
