"""A running call's progress reaches AG-UI and A2A clients (the real ones).

AG-UI: a ``CUSTOM`` event named ``tool_progress`` (checked by ``@ag-ui/client`` under Node,
``tests/js/tool_progress.mjs``); A2A: a ``working`` status update whose message holds a
``{"type": "tool_progress", ...}`` data part (checked by the a2a-sdk client).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts, new_text_part
from a2a.types import a2a_pb2
from server_support import Served, start_server

from async_helper import arun
from framework_agents import Agent, FunctionModel, Message, ToolCall, ToolContext, tool
from framework_agents.server import create_app

JS_DIR = Path(__file__).resolve().parents[1] / "js"


@tool
async def upload(name: str, context: ToolContext) -> str:
    """Upload a file, reporting three steps (the last without a total or a message)."""
    context.report_progress(1, 3, "step 1")
    await asyncio.sleep(0)
    context.report_progress(2, 3, "step 2")
    await asyncio.sleep(0)
    context.report_progress(3)
    return f"uploaded {name}"


def _answer(messages: list[Message], tools: list[Any]) -> Message:
    last = messages[-1]
    if last.role == "tool":
        return Message(role="assistant", content=f"done: {last.text}")
    if last.text.startswith("upload "):
        turn = sum(1 for m in messages if m.role == "user")
        return Message(
            role="assistant", tool_calls=[ToolCall(f"u{turn}", "upload", {"name": last.text[7:]})]
        )
    return Message(role="assistant", content=f"echo: {last.text}")


def _agent() -> Agent:
    return Agent(FunctionModel(_answer), tools=[upload])


@pytest.fixture
def progress_server(tmp_path: Path) -> Iterator[Served]:
    """An agent whose ``upload`` tool reports progress, served on a directory store."""
    running = start_server(create_app(_agent, store=str(tmp_path / "store"), console=False))
    yield running
    running.stop()


def test_a2a_client_sees_progress_as_working_status_updates(progress_server: Served) -> None:
    async def scenario() -> tuple[list[a2a_pb2.TaskStatus], a2a_pb2.Task]:
        config = ClientConfig(streaming=True)
        client = await create_client(progress_server.url, client_config=config)
        try:
            message = a2a_pb2.Message(
                message_id=uuid.uuid4().hex,
                role=a2a_pb2.Role.ROLE_USER,
                parts=[new_text_part("upload report")],
            )
            statuses: list[a2a_pb2.TaskStatus] = []
            task_id = ""
            request = a2a_pb2.SendMessageRequest(message=message)
            async for response in client.send_message(request):
                if response.HasField("status_update"):
                    statuses.append(response.status_update.status)
                    task_id = response.status_update.task_id
            task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            return statuses, task
        finally:
            await client.close()

    statuses, task = arun(scenario())
    progress = [
        (data, get_text_parts(list(s.message.parts)))
        for s in statuses
        for data in get_data_parts(list(s.message.parts))
        if data.get("type") == "tool_progress"
    ]
    assert all(
        s.state == a2a_pb2.TaskState.TASK_STATE_WORKING
        for s in statuses
        if s.HasField("message") and "tool_progress" in str(s.message)
    )
    call_id = progress[0][0]["toolCallId"]
    assert [p for p, _ in progress] == [
        {"type": "tool_progress", "toolCallId": call_id, "tool": "upload", "progress": 1.0,
         "total": 3.0, "message": "step 1"},
        {"type": "tool_progress", "toolCallId": call_id, "tool": "upload", "progress": 2.0,
         "total": 3.0, "message": "step 2"},
        {"type": "tool_progress", "toolCallId": call_id, "tool": "upload", "progress": 3.0,
         "total": None, "message": None},
    ]  # fmt: skip
    assert [t for _, t in progress] == [
        ["upload: 1/3 step 1"],
        ["upload: 2/3 step 2"],
        ["upload: 3"],
    ]
    assert task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
    assert get_text_parts(list(task.status.message.parts)) == ["done: uploaded report"]


@pytest.mark.node
def test_agui_client_sees_progress_as_custom_events(progress_server: Served) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Node.js 20 runs the JS client tests)")
    if not (JS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip(f"the JS clients are not installed: run `npm ci --prefix {JS_DIR}`")
    env = {**os.environ, "FA_SERVER_URL": progress_server.url}
    result = subprocess.run(
        [node, "--test", "tool_progress.mjs"],
        cwd=JS_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# pass 1" in result.stdout and "# fail 0" in result.stdout
