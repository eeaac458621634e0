"""One conversation: started over A2A, continued over AG-UI, inspected and approved over /api."""

from __future__ import annotations

import asyncio
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_part
from a2a.types import a2a_pb2
from server_support import PUBLISHED, Served


async def start_over_a2a(url: str) -> str:
    """Send one turn over A2A; the task's context id."""
    client = await create_client(url, client_config=ClientConfig(streaming=True))
    try:
        message = a2a_pb2.Message(
            message_id=str(uuid.uuid4()), role=a2a_pb2.Role.ROLE_USER, parts=[new_text_part("hi")]
        )
        context_id = ""
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            if response.HasField("task"):
                context_id = response.task.context_id
        return context_id
    finally:
        await client.close()


def test_one_thread_across_a2a_agui_and_the_json_api(served: Served) -> None:
    thread_id = asyncio.run(start_over_a2a(served.url))
    assert thread_id
    with httpx.Client(base_url=served.url, timeout=30) as client:
        body = {
            "threadId": thread_id,
            "runId": "r1",
            "messages": [{"id": "u2", "role": "user", "content": "publish Cross"}],
        }
        agui = client.post("/agui", json=body).text
        assert '"outcome":{"type":"interrupt"' in agui.replace(" ", "")
        thread = client.get(f"/api/threads/{thread_id}").json()
        assert [m["content"] for m in thread["messages"]] == ["hi", "echo: hi", "publish Cross"]
        pending = thread["pending"]
        assert pending["tool"] == "publish" and pending["args"] == {"title": "Cross", "copies": 3}
        done = client.post(
            f"/api/threads/{thread_id}/resume",
            json={"decisions": {pending["interrupt_id"]: "approve"}},
            headers={"Accept": "application/json"},
        ).json()
        assert done["status"] == "completed"
        assert done["text"] == "done: published 'Cross' x3"
        assert PUBLISHED == [{"title": "Cross", "copies": 3}]
        final = client.get(f"/api/threads/{thread_id}").json()
        assert final["pending"] is None
        assert [m["role"] for m in final["messages"]][-3:] == ["assistant", "tool", "assistant"]
        assert [e["kind"] for e in final["timeline"]] == ["run", "run", "resume"]
