"""The support swarm served over AG-UI and A2A (real uvicorn socket), with the approval of a
refund inside the billing member, resumed over each protocol.

Needs the server package (issue 13): skipped where it is not in the tree.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

framework_server = pytest.importorskip(
    "framework_agents.server", reason="the server package (issue 13) is absent"
)
pytest.importorskip("a2a.client", reason="the a2a-sdk (server extra) is absent")
uvicorn = pytest.importorskip("uvicorn", reason="uvicorn (server extra) is absent")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.helpers.proto_helpers import (  # noqa: E402
    get_data_parts,
    get_text_parts,
    new_data_part,
    new_text_part,
)
from a2a.types import a2a_pb2  # noqa: E402

from framework_agents.swarm.example import served_support_swarm  # noqa: E402


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """The support swarm (behind its agent view) served on a free loopback port."""
    app = framework_server.create_app(
        served_support_swarm, store=str(tmp_path / "store"), console=False
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        thread.join(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def _agui(client: httpx.Client, thread_id: str, **body: Any) -> list[dict[str, Any]]:
    payload = {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **body,
    }
    response = client.post("/agui", json=payload)
    assert response.status_code == 200, response.text
    return [json.loads(b[6:]) for b in response.text.split("\n\n") if b.strip()]


def test_agui_runs_the_swarm_and_resumes_the_approval_inside_billing(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        prompt = {"id": str(uuid.uuid4()), "role": "user", "content": "refund order 1234"}
        events = _agui(client, "sw1", messages=[prompt])
        kinds = [e["type"] for e in events]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        calls = [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"]
        assert calls == ["handoff_to_agent", "issue_refund"]
        # Each member's turn is an AG-UI step; the handoff between them a CUSTOM event.
        steps = [
            (e["type"], e.get("stepName") or e.get("value", {}).get("to"))
            for e in events
            if e["type"] in ("STEP_STARTED", "STEP_FINISHED", "CUSTOM")
        ]
        assert steps == [
            ("STEP_STARTED", "triage"),
            ("STEP_FINISHED", "triage"),
            ("CUSTOM", "billing"),
            ("STEP_STARTED", "billing"),
            ("STEP_FINISHED", "billing"),
        ]
        (handoff,) = [e for e in events if e["type"] == "CUSTOM"]
        assert handoff["name"] == "handoff" and handoff["value"]["from"] == "triage"
        adapter = TypeAdapter(AguiEvent)
        for event in events:  # every event is one the protocol's own models accept
            adapter.validate_python(event)
        outcome = events[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        (interrupt,) = outcome["interrupts"]
        assert interrupt["metadata"]["tool"] == "issue_refund"
        assert interrupt["metadata"]["args"] == {"order": 1234}

        thread = client.get("/api/threads/sw1").json()
        assert thread["state"]["framework_agents.swarm"]["active"] == "billing"

        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        done = _agui(client, "sw1", resume=resume)
        assert done[-1]["type"] == "RUN_FINISHED"
        assert done[-1].get("outcome", {"type": "success"})["type"] != "interrupt"
        results = [e for e in done if e["type"] == "TOOL_CALL_RESULT"]
        assert [r["toolCallId"] for r in results] == [interrupt["toolCallId"]]
        texts = "".join(e["delta"] for e in done if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert "refund issued for order 1234" in texts


def _message(**fields: Any) -> a2a_pb2.Message:
    text, data = fields.pop("text", None), fields.pop("data", None)
    part = new_text_part(text) if text is not None else new_data_part(data)
    return a2a_pb2.Message(
        message_id=str(uuid.uuid4()), role=a2a_pb2.Role.ROLE_USER, parts=[part], **fields
    )


async def _send(url: str, message: a2a_pb2.Message) -> a2a_pb2.Task:
    client = await create_client(url, client_config=ClientConfig(streaming=True))
    try:
        task_id = ""
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            for field in ("task", "status_update"):
                if response.HasField(field):
                    event = getattr(response, field)
                    task_id = event.id if field == "task" else event.task_id
        return await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
    finally:
        await client.close()


def test_a2a_asks_for_the_refund_approval_and_completes_after_it(url: str) -> None:
    async def scenario() -> None:
        task = await _send(url, _message(text="refund order 555"))
        assert task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
        (request,) = get_data_parts(list(task.status.message.parts))
        assert (request["type"], request["tool"]) == ("tool_approval_request", "issue_refund")
        reply = _message(
            data={"decision": "approve", "toolCallId": request["toolCallId"]},
            task_id=task.id,
            context_id=task.context_id,
        )
        done = await _send(url, reply)
        assert done.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        assert "refund issued for order 555" in get_text_parts(list(done.status.message.parts))[0]

    asyncio.run(scenario())


def test_the_json_api_streams_member_steps_and_the_handoff(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        response = client.post("/api/threads/sw3/runs", json={"prompt": "refund order 77"})
        assert response.status_code == 200
        events = []
        for block in response.text.split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in lines:
                events.append((lines["event"], json.loads(lines["data"])))
        end = events[-1][0]
        assert events[0][0] == "run_started" and end in ("run_finished", "interrupt")
        steps = [(k, d.get("agent"), d.get("phase")) for k, d in events if k == "member_step"]
        assert steps == [
            ("member_step", "triage", "started"),
            ("member_step", "triage", "finished"),
            ("member_step", "billing", "started"),
            ("member_step", "billing", "interrupted" if end == "interrupt" else "finished"),
        ]
        (handoff,) = [d for k, d in events if k == "handoff"]
        assert (handoff["from"], handoff["to"]) == ("triage", "billing")
        kinds = [k for k, _ in events]
        assert kinds.index("handoff") < kinds.index("member_step", kinds.index("handoff"))
