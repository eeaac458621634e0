"""AG-UI 1.0 over a real socket: event order, interrupts, resume, reconciliation, errors."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter
from server_support import PUBLISHED, Served

EVENT = TypeAdapter(Event)


def run_input(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A RunAgentInput body."""
    return {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def user(text: str) -> dict[str, Any]:
    """A new user message."""
    return {"id": str(uuid.uuid4()), "role": "user", "content": text}


def agui(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST /agui and return its events, each validated by the ag-ui-protocol types."""
    response = client.post("/agui", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in response.text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: ")
            data = json.loads(block[6:])
            EVENT.validate_python(data)  # a schema error fails the test
            events.append(data)
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """The event types in order."""
    return [e["type"] for e in events]


def test_text_run_is_bracketed_and_ends_with_the_two_snapshots(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        events = agui(client, run_input("g1", [user("hello")]))
        assert kinds(events) == [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED",
        ]
        assert events[2]["delta"] == "echo: hello"
        assert [m["role"] for m in events[5]["messages"]] == ["user", "assistant"]
        assert "outcome" not in events[-1]


def test_interrupt_refuses_new_input_then_resume_answers_the_original_call(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        events = agui(client, run_input("g2", [user("publish Post")]))
        assert kinds(events) == [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED",
        ]
        call_id = events[1]["toolCallId"]
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        assert events[-1]["outcome"]["type"] == "interrupt"
        assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == call_id
        assert interrupt["metadata"] == {
            "tool": "publish",
            "args": {"title": "Post", "copies": 3},
            "allowedDecisions": ["approve", "edit", "reject"],
        }
        snapshot = events[5]["messages"]
        assert snapshot[-1]["toolCalls"][0]["id"] == call_id  # the open call is shown

        refused = agui(client, run_input("g2", [user("something else")]))
        assert kinds(refused) == ["RUN_STARTED", "RUN_ERROR"]
        assert refused[-1]["code"] == "APPROVAL_PENDING"

        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        done = agui(client, run_input("g2", [], resume=resume))
        assert kinds(done)[:6] == [
            "RUN_STARTED",
            "MESSAGES_SNAPSHOT",  # the open turn the client was shown is dropped...
            "TOOL_CALL_START",  # ...and the stored turn that runs the call announced
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
        ]
        assert done[2]["toolCallId"] == call_id
        results = [e for e in done if e["type"] == "TOOL_CALL_RESULT"]
        assert [r["toolCallId"] for r in results] == [call_id]
        assert kinds(done)[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        texts = [e["delta"] for e in done if e["type"] == "TEXT_MESSAGE_CONTENT"]
        assert texts == ["done: published 'Post' x3"]
        assert PUBLISHED == [{"title": "Post", "copies": 3}]


def test_edit_reject_and_cancel_entries(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        cases = [
            ({"approved": True, "editedArgs": {"title": "E", "copies": 1}}, "resolved", "x1"),
            ({"approved": False, "reason": "nope"}, "resolved", "nope"),
            (None, "cancelled", "cancelled"),
        ]
        for i, (payload, status, expected) in enumerate(cases):
            thread = f"g3-{i}"
            first = agui(client, run_input(thread, [user("publish P")]))
            interrupt_id = first[-1]["outcome"]["interrupts"][0]["id"]
            entry: dict[str, Any] = {"interruptId": interrupt_id, "status": status}
            if payload is not None:
                entry["payload"] = payload
            done = agui(client, run_input(thread, [], resume=[entry]))
            text = "".join(e["delta"] for e in done if e["type"] == "TEXT_MESSAGE_CONTENT")
            assert expected in text, text
        assert PUBLISHED == [{"title": "E", "copies": 1}]


def test_resent_history_is_reconciled_by_id(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        first = user("one")
        events = agui(client, run_input("g4", [first]))
        history = events[5]["messages"]
        tampered = [dict(m) for m in history]
        tampered[1]["content"] = "the client rewrote this"
        agui(client, run_input("g4", [*tampered, user("two")]))
        thread = client.get("/api/threads/g4").json()
        assert [m["content"] for m in thread["messages"]] == [
            "one",
            "echo: one",
            "two",
            "echo: two",
        ]
        assert thread["messages"][0]["id"] == first["id"]
        # Nothing new to run (a client catching up after a lost answer): the thread as it
        # stands, nothing run; on a thread that does not exist, INVALID_ARGUMENT.
        again = agui(client, run_input("g4", thread["messages"][:1]))
        assert kinds(again) == [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED",
        ]
        assert [m["content"] for m in again[2]["messages"]] == [
            "one",
            "echo: one",
            "two",
            "echo: two",
        ]
        assert (again[-1].get("outcome") or {}).get("type") != "interrupt"
        assert len(client.get("/api/threads/g4").json()["messages"]) == 4
        missing = agui(client, run_input("g4-none", []))
        assert kinds(missing) == ["RUN_STARTED", "RUN_ERROR"]
        assert missing[-1]["code"] == "INVALID_ARGUMENT"


def test_bad_inputs(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        hostile = agui(client, run_input("../etc", [user("x")]))
        assert hostile[-1]["type"] == "RUN_ERROR" and hostile[-1]["code"] == "THREAD_ID_INVALID"
        wrong = agui(
            client,
            run_input(
                "g5", [], resume=[{"interruptId": "nope", "status": "resolved", "payload": {}}]
            ),
        )
        assert wrong[-1]["code"] == "CHECKPOINT_MISSING"
        response = client.post("/agui", json={"threadId": "x"})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "BAD_REQUEST"


def test_reasoning_then_text(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        events = agui(client, run_input("g6", [user("think hard")]))
        assert kinds(events)[:9] == [
            "RUN_STARTED",
            "REASONING_START",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END",
            "REASONING_END",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
        ]
        assert events[3]["delta"] == "pondering" and events[7]["delta"] == "thought: hard"
        assert events[1]["messageId"] != events[6]["messageId"]


def test_a_busy_thread_is_a_run_error(served: Served) -> None:
    runner = served.app.state.runner
    handle = runner.claim("g7", resume=False)  # as if a run of another client held it
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            events = agui(client, run_input("g7", [user("hi")]))
            assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"]
            assert events[-1]["code"] == "THREAD_BUSY"
    finally:
        runner.release(handle)
