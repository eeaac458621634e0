"""A tool's question (an MCP server's elicitation) shown and answered over every protocol.

The test agent's ``book`` tool asks how to book (``server_support.BOOKING``, a schema of
every field kind) before it books. The JSON API shows the question as the thread's
``pending`` (``kind == "elicitation"``, message, schema) and its resume takes the answer;
A2A puts the task in ``input-required`` with an ``elicitation`` data part, answered by an
``{"action", "content"}`` data part (the official a2a-sdk client); AG-UI ends the run with
an interrupt of reason ``elicitation``, resumed with the same payload. A bad answer is
``HITL_DECISION`` before anything runs, and the question stays open. The question
survives a server restart; and a real MCP server's question (tests/mcp/server.py, the
stateless protocol) is shown over A2A and answered by a new server process (``slow``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types import a2a_pb2
from server_support import BOOKING, Served, make_agent, start_server
from test_a2a import read_thread, send, user_message
from test_agui import agui, kinds, run_input, user
from test_api import sse_events

from framework_agents import (
    Agent,
    FunctionModel,
    HitlInterrupt,
    InMemoryCheckpointer,
    InMemoryStorage,
    Message,
    ToolCall,
    ToolContext,
    tool,
)
from framework_agents.elicitation import Elicitation, ElicitationRequired
from framework_agents.server import create_app
from framework_agents.server._questions import question_of
from framework_agents.server._runner import ThreadRunner
from framework_agents.server._store import ServerStore

State = a2a_pb2.TaskState
ACCEPT = {"Accept": "application/json"}
QUESTION = "How should I book Oslo?"
ANSWER = {"nights": 3, "meal": "breakfast", "pets": False, "budget": 120.5}
BOOKED = 'booked Oslo: {"budget": 120.5, "meal": "breakfast", "nights": 3, "pets": false}'


def _asked(pending: dict[str, Any]) -> None:
    """``pending`` is book's question as the JSON API shows it."""
    assert pending["kind"] == "elicitation"
    assert pending["message"] == QUESTION and pending["schema"] == BOOKING
    assert pending["tool"] == "book" and pending["args"] == {"city": "Oslo"}
    assert pending["allowed_decisions"] == ["answer", "decline", "cancel"]
    assert "state" not in pending  # the tool's own state stays in the checkpoint


def test_the_json_api_shows_the_question_and_its_resume_takes_the_answer(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        streamed = sse_events(client.post("/api/threads/e1/runs", json={"prompt": "book Oslo"}))
        kind, interrupt = streamed[-1]
        assert kind == "interrupt"
        _asked(interrupt["pending"])
        thread = client.get("/api/threads/e1").json()
        _asked(thread["pending"])
        assert thread["pending"]["interrupt_id"] == interrupt["pending"]["interrupt_id"]
        listed = client.get("/api/threads").json()["threads"]
        assert [t["pending"] for t in listed if t["thread_id"] == "e1"] == [True]
        # an approval's decision is no answer: 422 before anything runs
        wrong = client.post("/api/threads/e1/resume", json={"decisions": {"book": "approve"}})
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "HITL_DECISION"
        bad = {"answer": {"nights": 0, "meal": "breakfast"}}  # below the minimum
        refused = client.post("/api/threads/e1/resume", json={"decisions": {"book": bad}})
        assert refused.status_code == 422
        assert "nights" in refused.json()["error"]["message"]
        assert client.get("/api/threads/e1").json()["pending"] == thread["pending"]
        key = thread["pending"]["interrupt_id"]
        resumed = client.post(
            "/api/threads/e1/resume", json={"decisions": {key: {"answer": ANSWER}}}
        )
        events = sse_events(resumed)
        results = [data for kind, data in events if kind == "tool_result"]
        assert [r["call_id"] for r in results] == [thread["pending"]["tool_call_id"]]
        assert results[0]["message"]["content"] == BOOKED
        assert events[-1] == ("run_finished", events[-1][1])
        assert events[-1][1]["text"] == f"done: {BOOKED}"
        after = client.get("/api/threads/e1").json()
        assert after["pending"] is None
        assert [e["kind"] for e in after["timeline"]] == ["run", "resume"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_the_json_api_declines_or_cancels_a_question(served: Served, action: str) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        summary = client.post(
            "/api/threads/e2/runs", json={"prompt": "book Oslo"}, headers=ACCEPT
        ).json()
        assert summary["status"] == "interrupted"
        _asked(summary["pending"])
        done = client.post(
            "/api/threads/e2/resume",
            json={"decisions": {summary["pending"]["tool_call_id"]: {action: True}}},
            headers=ACCEPT,
        ).json()
        assert done["status"] == "completed" and done["text"] == f"done: not booked ({action})"


def _elicitation_of(task: a2a_pb2.Task) -> dict[str, Any]:
    """The elicitation data part of an input-required task."""
    assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
    parts = list(task.status.message.parts)
    assert get_text_parts(parts) == [f"The tool book asks: {QUESTION}"]
    (data,) = get_data_parts(parts)
    assert data["type"] == "elicitation"
    asked: dict[str, Any] = data
    return asked


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "blocking"])
def test_a2a_asks_with_an_elicitation_part_and_takes_the_answer(
    served: Served, streaming: bool
) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="book Oslo"), streaming=streaming)
        asked = _elicitation_of(task)
        assert asked["message"] == QUESTION and asked["schema"] == BOOKING
        assert asked["tool"] == "book" and asked["allowedActions"] == [
            "accept",
            "decline",
            "cancel",
        ]
        thread = await read_thread(served.url, task.context_id)
        assert asked["interruptId"] == thread["pending"]["interrupt_id"]
        # an approval's decision does not answer a question: the task fails, the question stays
        wrong = user_message(
            data={"decision": "approve"}, task_id=task.id, context_id=task.context_id
        )
        failed = await send(served.url, wrong, streaming=False)
        assert failed.status.state == State.TASK_STATE_FAILED
        (error,) = get_data_parts(list(failed.status.message.parts))
        assert error["error"]["code"] == "HITL_DECISION"
        assert (await read_thread(served.url, task.context_id))["pending"] == thread["pending"]
        # the answer, in a new task of the context (the first one failed)
        again = await send(
            served.url, user_message(text="book Oslo", context_id=task.context_id), streaming=False
        )
        assert again.status.state == State.TASK_STATE_FAILED  # still waiting for the answer
        answer = user_message(
            data={"action": "accept", "content": ANSWER, "interruptId": asked["interruptId"]},
            context_id=task.context_id,
        )
        done = await send(served.url, answer, streaming=streaming)
        assert done.status.state == State.TASK_STATE_COMPLETED
        assert get_text_parts(list(done.status.message.parts)) == [f"done: {BOOKED}"]

    asyncio.run(scenario())


def test_a2a_answer_on_the_same_task_declines_and_a_bad_one_fails(served: Served) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="book Oslo"), streaming=True)
        asked = _elicitation_of(task)
        ids = {"task_id": task.id, "context_id": task.context_id}
        bad = user_message(data={"action": "accept", "content": {"nights": 2}}, **ids)
        failed = await send(served.url, bad, streaming=False)  # meal is required
        assert failed.status.state == State.TASK_STATE_FAILED
        (error,) = get_data_parts(list(failed.status.message.parts))
        assert error["error"]["code"] == "HITL_DECISION" and "meal" in error["error"]["message"]
        # an answer to another question than the one waiting is refused
        stale = user_message(
            data={"action": "decline", "interruptId": "an-older-one"}, context_id=task.context_id
        )
        failed = await send(served.url, stale, streaming=False)
        (error,) = get_data_parts(list(failed.status.message.parts))
        assert error["error"]["code"] == "HITL_DECISION"
        assert "no longer open" in error["error"]["message"]
        assert (await read_thread(served.url, task.context_id))["pending"]["kind"] == "elicitation"
        second = await send(served.url, user_message(text="book Oslo"), streaming=True)
        asked = _elicitation_of(second)
        ids = {"task_id": second.id, "context_id": second.context_id}
        decline = user_message(data={"action": "decline", "toolCallId": asked["toolCallId"]}, **ids)
        done = await send(served.url, decline, streaming=True)
        assert done.id == second.id and done.status.state == State.TASK_STATE_COMPLETED
        assert get_text_parts(list(done.status.message.parts)) == ["done: not booked (decline)"]

    asyncio.run(scenario())


def test_cancelling_an_a2a_task_cancels_its_question(served: Served) -> None:
    async def scenario() -> None:
        task = await send(served.url, user_message(text="book Oslo"), streaming=False)
        _elicitation_of(task)
        client = await create_client(served.url, client_config=ClientConfig(streaming=False))
        try:
            cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        finally:
            await client.close()
        assert cancelled.status.state == State.TASK_STATE_CANCELED
        thread = await read_thread(served.url, task.context_id)
        assert thread["pending"] is None
        assert thread["messages"][-1]["content"] == "done: not booked (cancel)"

    asyncio.run(scenario())


def _agui_interrupt(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert kinds(events)[-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    found: dict[str, Any] = interrupt
    return found


def test_agui_interrupts_with_reason_elicitation_and_resumes_with_the_answer(
    served: Served,
) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        interrupt = _agui_interrupt(agui(client, run_input("g-e1", [user("book Oslo")])))
        assert interrupt["reason"] == "elicitation" and interrupt["message"] == QUESTION
        assert interrupt["metadata"]["requestedSchema"] == BOOKING
        assert interrupt["metadata"]["args"] == {"city": "Oslo"}
        schema = interrupt["responseSchema"]
        assert schema["properties"]["content"] == BOOKING
        assert schema["properties"]["action"]["enum"] == ["accept", "decline", "cancel"]
        thread = client.get("/api/threads/g-e1").json()
        assert interrupt["id"] == thread["pending"]["interrupt_id"]
        assert interrupt["toolCallId"] == thread["pending"]["tool_call_id"]

        def resume(entry: dict[str, Any]) -> list[dict[str, Any]]:
            return agui(
                client, run_input("g-e1", [], resume=[{"interruptId": interrupt["id"], **entry}])
            )

        # an approval's payload is no answer: RUN_ERROR with the code, the question stays
        refused = resume({"status": "resolved", "payload": {"approved": True}})
        assert kinds(refused) == ["RUN_STARTED", "RUN_ERROR"]
        assert refused[-1]["code"] == "HITL_DECISION"
        bad = resume({"status": "resolved", "payload": {"action": "accept", "content": {}}})
        assert bad[-1]["code"] == "HITL_DECISION"
        events = resume({"status": "resolved", "payload": {"action": "accept", "content": ANSWER}})
        (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert result["toolCallId"] == interrupt["toolCallId"] and result["content"] == BOOKED
        assert events[-1]["type"] == "RUN_FINISHED" and "outcome" not in events[-1]
        assert events[-1]["result"] == {"text": f"done: {BOOKED}"}


def test_agui_cancelled_entry_cancels_the_question(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        interrupt = _agui_interrupt(agui(client, run_input("g-e2", [user("book Oslo")])))
        entry = {"interruptId": interrupt["id"], "status": "cancelled"}
        events = agui(client, run_input("g-e2", [], resume=[entry]))
        assert events[-1]["result"] == {"text": "done: not booked (cancel)"}


def test_a_question_is_answered_over_a2a_after_a_server_restart(store_dir: Path) -> None:
    first = start_server(create_app(make_agent, store=str(store_dir), console=False))
    try:
        task = asyncio.run(send(first.url, user_message(text="book Oslo"), streaming=True))
        asked = _elicitation_of(task)
    finally:
        first.stop()
    second = start_server(create_app(make_agent, store=str(store_dir), console=False))
    try:
        thread = asyncio.run(read_thread(second.url, task.context_id))
        _asked(thread["pending"])  # the question came back from the store
        assert thread["pending"]["interrupt_id"] == asked["interruptId"]
        answer = user_message(
            data={"action": "accept", "content": ANSWER},
            task_id=task.id,
            context_id=task.context_id,
        )
        done = asyncio.run(send(second.url, answer, streaming=True))
        assert done.id == task.id and done.status.state == State.TASK_STATE_COMPLETED
        assert get_text_parts(list(done.status.message.parts)) == [f"done: {BOOKED}"]
    finally:
        second.stop()


MCP_SERVER = str(Path(__file__).resolve().parents[1] / "mcp" / "server.py")


def _mcp_booking(messages: list[Message], tools: list[Any]) -> Message:
    """A model that books a room in Oslo with the MCP server's ``book``, then reports."""
    if messages[-1].role == "tool":
        return Message("assistant", f"done: {messages[-1].text}")
    return Message("assistant", "", tool_calls=[ToolCall("m1", "book", {"city": "Oslo"})])


def _serving_mcp_tools(store: Path, record: Path) -> Served:
    """A server whose agent takes its tools from tests/mcp/server.py (stateless, over stdio).

    The MCP client lives in the app's lifespan (opened before startup, closed after
    shutdown, in the one task uvicorn runs it in).
    """
    from framework_agents.mcp import MCPClient

    tools: list[Any] = []
    app = create_app(
        lambda: Agent(FunctionModel(_mcp_booking), tools=tools), store=str(store), console=False
    )

    async def with_mcp(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        env = {"MCP_TEST_RECORD": str(record)}
        async with MCPClient.stdio(sys.executable, [MCP_SERVER], env=env) as client:
            tools[:] = await client.tools(include=["book"])
            await app(scope, receive, send)

    return start_server(with_mcp)


@pytest.mark.slow  # two servers, each with an MCP server process (5 s each)
def test_an_mcp_servers_question_is_shown_over_a2a_and_answered_after_a_restart(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")
    store, record = tmp_path / "store", tmp_path / "booked.jsonl"
    first = _serving_mcp_tools(store, record)
    try:
        task = asyncio.run(send(first.url, user_message(text="book a room"), streaming=True))
    finally:
        first.stop()
    assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
    (asked,) = get_data_parts(list(task.status.message.parts))
    assert asked["type"] == "elicitation" and asked["message"] == "How many nights in Oslo?"
    assert asked["schema"]["properties"]["nights"]["maximum"] == 30
    assert not record.exists()  # nothing booked before the answer
    second = _serving_mcp_tools(store, record)  # a new process's server and MCP server
    try:
        answer = user_message(
            data={"action": "accept", "content": {"nights": 3}},
            task_id=task.id,
            context_id=task.context_id,
        )
        done = asyncio.run(send(second.url, answer, streaming=True))
    finally:
        second.stop()
    assert done.status.state == State.TASK_STATE_COMPLETED
    (text,) = get_text_parts(list(done.status.message.parts))
    assert text.startswith("done: booked 3 nights in Oslo")
    assert [json.loads(line) for line in record.read_text().splitlines()] == [
        {"tool": "book", "city": "Oslo", "nights": 3}
    ]


class _Crash(BaseException):
    """Stands in for a process dying while the answered call runs (nothing catches it)."""


def test_an_answered_call_cut_short_is_an_approval_of_unknown_outcome() -> None:
    """After a crash mid-call the question is settled: the runner shows an approval.

    The checkpoint still holds the question with its answer (so a re-run gets it), but
    what waits is a decision on a call of unknown outcome, answered by "approve".
    """
    runs: list[Any] = []

    @tool(name="book")
    def crashing_book(city: str, context: ToolContext) -> str:
        """Book a room: asks first; its first answered run dies."""
        if context.answer is None:
            raise ElicitationRequired(Elicitation(f"How should I book {city}?", BOOKING))
        runs.append(context.answer.content)
        if len(runs) == 1:
            raise _Crash
        return f"booked {city}: {json.dumps(context.answer.content, sort_keys=True)}"

    checkpointer = InMemoryCheckpointer()
    runner = ThreadRunner(
        lambda: Agent(FunctionModel(_mcp_booking), tools=[crashing_book]),
        ServerStore(checkpointer, InMemoryStorage()),
    )

    async def scenario() -> None:
        handle = await runner.start_run("t", "book a room")
        await handle.wait()
        asked = await runner.pending_of(await runner.require("t"))
        assert asked is not None and asked.kind == "elicitation"
        agent = Agent(FunctionModel(_mcp_booking), tools=[crashing_book])
        with pytest.raises(_Crash):
            await agent.resume(
                "t", {asked.interrupt_id: {"answer": ANSWER}}, checkpointer=checkpointer
            )
        cut = await runner.require("t")
        assert cut.elicitation is not None and cut.in_flight  # the answer kept for a re-run
        assert question_of(cut) is None
        with pytest.raises(HitlInterrupt) as unknown:
            await Agent(FunctionModel(_mcp_booking), tools=[crashing_book]).resume(
                "t", None, checkpointer=checkpointer
            )
        assert unknown.value.kind == "tool_call" and unknown.value.outcome_unknown
        pending = await runner.pending_of(await runner.require("t"))
        assert pending is not None and pending.kind == "tool_call" and pending.outcome_unknown
        assert pending.message is None and pending.schema is None
        assert "approve" in pending.allowed_decisions
        done = await runner.start_resume("t", {pending.interrupt_id: "approve"})
        await done.wait()
        assert (await runner.require("t")).messages[-1].text == f"done: {BOOKED}"
        assert runs == [ANSWER, ANSWER]  # the re-run got the answer it first ran with

    asyncio.run(scenario())
