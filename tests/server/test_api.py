"""The JSON API over a real socket: threads, runs (SSE and JSON), resume, delete, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from server_support import PUBLISHED, Served

JSON = {"Content-Type": "application/json"}


def sse_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of every server-sent event of a response."""
    events = []
    for block in response.text.split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_run_streams_events_and_the_thread_can_be_read(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        response = client.post("/api/threads/t1/runs", json={"prompt": "hello"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kinds = [kind for kind, _ in sse_events(response)]
        assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
        assert "text_delta" in kinds and "message_completed" in kinds
        thread = client.get("/api/threads/t1").json()
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
        assert thread["messages"][1]["content"] == "echo: hello"
        assert thread["pending"] is None
        assert [e["kind"] for e in thread["timeline"]] == ["run"]
        listed = client.get("/api/threads").json()
        assert listed["threads"][0]["thread_id"] == "t1"
        assert listed["threads"][0]["title"] == "hello"


def test_interrupt_then_approve_over_json(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        accept = {"Accept": "application/json"}
        first = client.post("/api/threads/t2/runs", json={"prompt": "publish News"}, headers=accept)
        summary = first.json()
        assert summary["status"] == "interrupted"
        pending = summary["pending"]
        assert pending["tool"] == "publish" and pending["args"] == {"title": "News", "copies": 3}
        assert pending["allowed_decisions"] == ["approve", "edit", "reject"]
        assert client.get("/api/threads/t2").json()["pending"]["tool_call_id"] == "call-1"
        refused = client.post("/api/threads/t2/runs", json={"prompt": "hi"})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "APPROVAL_PENDING"
        resumed = client.post(
            "/api/threads/t2/resume", json={"decisions": {pending["tool_call_id"]: "approve"}}
        )
        events = sse_events(resumed)
        results = [data for kind, data in events if kind == "tool_result"]
        assert [r["call_id"] for r in results] == ["call-1"]
        assert events[-1][0] == "run_finished"
        assert events[-1][1]["text"] == "done: published 'News' x3"
        assert PUBLISHED == [{"title": "News", "copies": 3}]
        thread = client.get("/api/threads/t2").json()
        assert thread["pending"] is None
        assert [e["kind"] for e in thread["timeline"]] == ["run", "resume"]
        assert thread["timeline"][0]["label"] == "interrupted"


def test_edit_and_reject_decisions(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        accept = {"Accept": "application/json"}
        client.post("/api/threads/e1/runs", json={"prompt": "publish A"}, headers=accept)
        edited = client.post(
            "/api/threads/e1/resume",
            json={"decisions": {"publish": {"edit": {"title": "B", "copies": 1}}}},
            headers=accept,
        ).json()
        assert edited["status"] == "completed"
        assert PUBLISHED == [{"title": "B", "copies": 1}]
        client.post("/api/threads/r1/runs", json={"prompt": "publish C"}, headers=accept)
        rejected = client.post(
            "/api/threads/r1/resume",
            json={"decisions": {"call-1": {"reject": "not today"}}},
            headers=accept,
        ).json()
        assert rejected["status"] == "completed"
        assert "not today" in rejected["text"]
        assert PUBLISHED == [{"title": "B", "copies": 1}]


def test_bad_requests_get_codes_and_statuses(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        cases = [
            (client.get("/api/threads/..%2Fetc"), 404, "NOT_FOUND"),
            (client.get("/api/threads/a%00b"), 400, "THREAD_ID_INVALID"),
            (client.get("/api/threads/-rf"), 400, "THREAD_ID_INVALID"),
            (client.get("/api/threads/" + "x" * 129), 400, "THREAD_ID_INVALID"),
            (
                client.post("/api/threads/.hidden/runs", json={"prompt": "x"}),
                400,
                "THREAD_ID_INVALID",
            ),
            (client.get("/api/threads/nope"), 404, "CHECKPOINT_MISSING"),
            (
                client.post("/api/threads/a/runs", content=b"{not json", headers=JSON),
                400,
                "BAD_REQUEST",
            ),
            (client.post("/api/threads/a/runs", json={"prompt": 3}), 400, "BAD_REQUEST"),
            # Nested past the parser's depth (200 KB, under the size limit): was a 500.
            (
                client.post(
                    "/api/threads/a/runs", content=b"[" * 100_000 + b"]" * 100_000, headers=JSON
                ),
                400,
                "BAD_REQUEST",
            ),
            # A lone surrogate escape: valid JSON, no text (it cut the stream off).
            (
                client.post(
                    "/api/threads/a/runs", content=b'{"prompt": "hi \\ud800"}', headers=JSON
                ),
                400,
                "BAD_REQUEST",
            ),
            (client.post("/api/threads/a/runs", json={"prompt": " "}), 400, "INVALID_ARGUMENT"),
            (
                client.post("/api/threads/nope/resume", json={"decisions": {}}),
                404,
                "CHECKPOINT_MISSING",
            ),
            (client.get("/api/threads?limit=0"), 400, "INVALID_ARGUMENT"),
            (client.get("/api/threads?cursor=zzz"), 400, "INVALID_ARGUMENT"),
            (client.get("/nowhere"), 404, "NOT_FOUND"),
            (client.delete("/api/threads/nope"), 404, "CHECKPOINT_MISSING"),
        ]
        for response, status, code in cases:
            assert (response.status_code, response.json()["error"]["code"]) == (status, code)
            assert "Traceback" not in response.text
        client.post(
            "/api/threads/h1/runs", json={"prompt": "hi"}, headers={"Accept": "application/json"}
        )
        nothing = client.post("/api/threads/h1/resume", json={"decisions": {"x": "approve"}})
        assert (nothing.status_code, nothing.json()["error"]["code"]) == (422, "HITL_DECISION")
        # Edited arguments the tool refuses: refused before any stream, the approval open.
        client.post(
            "/api/threads/h2/runs",
            json={"prompt": "publish N"},
            headers={"Accept": "application/json"},
        )
        for edited in ({"title": 5}, {"title": "x", "zzz": 1}):
            bad = client.post(
                "/api/threads/h2/resume", json={"decisions": {"publish": {"edit": edited}}}
            )
            assert (bad.status_code, bad.json()["error"]["code"]) == (422, "HITL_DECISION")
        assert client.get("/api/threads/h2").json()["pending"]["tool"] == "publish"
        assert PUBLISHED == []


def test_delete_and_paging(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        accept = {"Accept": "application/json"}
        for i in range(5):
            client.post(f"/api/threads/p{i}/runs", json={"prompt": f"hi {i}"}, headers=accept)
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = client.get("/api/threads", params=params).json()
            seen += [t["thread_id"] for t in page["threads"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == [f"p{i}" for i in range(5)] and len(seen) == 5
        assert [
            t["thread_id"]
            for t in client.get("/api/threads", params={"q": "HI 3"}).json()["threads"]
        ] == ["p3"]
        assert client.delete("/api/threads/p0").status_code == 204
        assert client.get("/api/threads/p0").status_code == 404
        assert client.get("/healthz").json() == {"status": "ok"}


def test_edit_a_message_and_branch_a_thread(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        accept = {"Accept": "application/json"}
        client.post("/api/threads/b1/runs", json={"prompt": "first"}, headers=accept)
        client.post("/api/threads/b1/runs", json={"prompt": "shout hey"}, headers=accept)
        messages = client.get("/api/threads/b1").json()["messages"]
        assert [m["role"] for m in messages] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        edited = client.patch(
            f"/api/threads/b1/messages/{messages[0]['id']}", json={"content": "FIRST"}
        ).json()
        assert edited["messages"][0] == {**messages[0], "content": "FIRST"}
        assert edited["timeline"][-1]["kind"] == "edit"
        call_turn = messages[3]["id"]
        refused = client.patch(f"/api/threads/b1/messages/{call_turn}", json={"content": "x"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (
            409,
            "MESSAGE_NOT_EDITABLE",
        )
        missing = client.patch("/api/threads/b1/messages/nope", json={"content": "x"})
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "MESSAGE_NOT_FOUND")

        made = client.post("/api/threads/b1/branches", json={"message_id": call_turn, "label": "L"})
        assert made.status_code == 201
        branch_id = made.json()["thread_id"]
        branch = client.get(f"/api/threads/{branch_id}").json()
        assert [m["id"] for m in branch["messages"]] == [m["id"] for m in messages[:5]]
        assert branch["parent"] == {"thread_id": "b1", "message_id": call_turn}
        assert [(e["kind"], e["label"]) for e in branch["timeline"]] == [("branch", "L")]
        assert client.get("/api/threads/b1").json()["timeline"][-1]["kind"] == "branch"
        again = client.post(
            "/api/threads/b1/branches", json={"message_id": call_turn, "thread_id": branch_id}
        )
        assert again.json()["error"]["code"] == "INVALID_ARGUMENT"
        done = client.post(f"/api/threads/{branch_id}/runs", json={"prompt": "go"}, headers=accept)
        assert done.json()["text"] == "echo: go"


def test_an_approval_sent_twice_runs_the_call_once(served: Served) -> None:
    accept = {"Accept": "application/json"}
    with httpx.Client(base_url=served.url, timeout=30) as client:
        client.post("/api/threads/d1/runs", json={"prompt": "publish Once"}, headers=accept)
        body = {"decisions": {"call-1": "approve"}}
        first = client.post("/api/threads/d1/resume", json=body, headers=accept)
        second = client.post("/api/threads/d1/resume", json=body, headers=accept)
        assert first.json()["status"] == "completed"
        assert (second.status_code, second.json()["error"]["code"]) == (422, "HITL_DECISION")
    assert PUBLISHED == [{"title": "Once", "copies": 3}]


def test_concurrent_approvals_run_the_call_once(served: Served) -> None:
    from concurrent.futures import ThreadPoolExecutor

    accept = {"Accept": "application/json"}
    with httpx.Client(base_url=served.url, timeout=30) as client:
        client.post("/api/threads/d2/runs", json={"prompt": "publish Race"}, headers=accept)

    def approve(_: int) -> tuple[int, str]:
        with httpx.Client(base_url=served.url, timeout=30) as one:
            response = one.post(
                "/api/threads/d2/resume", json={"decisions": {"publish": "approve"}}, headers=accept
            )
            data = response.json()
            return response.status_code, data.get("status") or data["error"]["code"]

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(approve, range(8)))
    assert answers.count((200, "completed")) == 1, answers
    assert set(answers) <= {(200, "completed"), (409, "THREAD_BUSY"), (422, "HITL_DECISION")}
    assert PUBLISHED == [{"title": "Race", "copies": 3}]


def test_a_call_of_unknown_outcome_is_shown_and_settled_by_a_decision(
    served: Served, store_dir: Path
) -> None:
    import asyncio

    from framework_agents import FileCheckpointer, Message, ThreadCheckpoint, ToolCall

    call = ToolCall("call-9", "publish", {"title": "Maybe", "copies": 1})
    turn = Message(role="assistant", tool_calls=[call])
    user = Message(role="user", content="publish Maybe")
    checkpoint = ThreadCheckpoint(
        "u1", None, [user], {}, call, turn=turn, in_flight=[call], outcome_unknown=True
    )
    asyncio.run(FileCheckpointer(store_dir).save(checkpoint))  # a process died mid-call
    with httpx.Client(base_url=served.url, timeout=30) as client:
        pending = client.get("/api/threads/u1").json()["pending"]
        assert pending["outcome_unknown"] is True and pending["tool_call_id"] == "call-9"
        # Shown under an interrupt id of its own (the checkpoint had none).
        assert pending["interrupt_id"].startswith("interrupt-")
        # The approval given before the crash, replayed: it names the call, not the
        # interrupt, so it must not run the call again; it is shown the interrupt instead.
        replayed = client.post(
            "/api/threads/u1/resume",
            json={"decisions": {"call-9": "approve"}},
            headers={"Accept": "application/json"},
        )
        assert replayed.status_code == 200, replayed.text
        assert replayed.json()["status"] == "interrupted"
        assert replayed.json()["pending"] == pending
        assert PUBLISHED == []
        done = client.post(
            "/api/threads/u1/resume",
            json={"decisions": {pending["interrupt_id"]: "approve"}},
            headers={"Accept": "application/json"},
        ).json()
        assert done["status"] == "completed", done
        assert PUBLISHED == [{"title": "Maybe", "copies": 1}]
        roles = [m["role"] for m in client.get("/api/threads/u1").json()["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]


class _PlainResume:
    """An agent-shaped object whose ``resume`` has no ``reissue`` (a third party's)."""

    def __init__(self) -> None:
        from server_support import make_agent

        self._agent = make_agent()
        self.agent_id = self._agent.agent_id
        self.tools = self._agent.tools

    def stream(self, prompt: Any, **kwargs: Any) -> Any:
        return self._agent.stream(prompt, **kwargs)

    async def resume(self, thread_id: str, decisions: Any = None, *, checkpointer: Any) -> Any:
        return await self._agent.resume(thread_id, decisions, checkpointer=checkpointer)


def test_an_agent_without_the_reissue_mode_gets_the_older_resume(store_dir: Path) -> None:
    """Its events are rebuilt from what the resume stored; the call keeps the id shown."""
    from server_support import start_server

    from framework_agents.server import create_app

    PUBLISHED.clear()
    served = start_server(create_app(_PlainResume, store=str(store_dir), console=False))
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            accept = {"Accept": "application/json"}
            first = client.post(
                "/api/threads/p1/runs", json={"prompt": "publish Plain"}, headers=accept
            )
            pending = first.json()["pending"]
            resumed = client.post(
                "/api/threads/p1/resume",
                json={"decisions": {pending["tool_call_id"]: "approve"}},
            )
            events = sse_events(resumed)
            kinds = [kind for kind, _ in events]
            assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
            results = [data for kind, data in events if kind == "tool_result"]
            assert [r["call_id"] for r in results] == [pending["tool_call_id"]]
            assert events[-1][1]["text"] == "done: published 'Plain' x3"
            assert PUBLISHED == [{"title": "Plain", "copies": 3}]
            assert client.get("/api/threads/p1").json()["pending"] is None
    finally:
        served.stop()
