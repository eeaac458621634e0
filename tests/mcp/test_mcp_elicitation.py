"""A server's questions during a tool call (elicitation), against tests/mcp/server.py.

On the stateless protocol (the server answers ``input_required``) and on a stateful
session (``--legacy``: the server asks mid-call and waits): the question is a
``HitlInterrupt`` of kind ``"elicitation"`` saved in the checkpoint, answered, declined
or cancelled by ``resume``; two questions of one round come one interrupt at a time; a
question of a form the protocol does not allow is a tool error the model sees; and with
either server a process killed (SIGKILL) between the question and the answer leaves a
thread that a new process answers, the server booking exactly once. Each test starts a
server (a second or two): the quick cases run in ``make test``, the rest are ``slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from processes import close_process

pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")

from framework_agents import Agent, HitlInterrupt, Message, ScriptedModel, ToolCall
from framework_agents.checkpoint import FileCheckpointer, InMemoryCheckpointer
from framework_agents.errors import HitlDecisionError
from framework_agents.mcp import MCPClient

SERVER = str(Path(__file__).with_name("server.py"))
CHILD = str(Path(__file__).with_name("elicit_child.py"))
ERAS = pytest.mark.parametrize("era", ["stateless", "stateful"])


def client(era: str, record: Path) -> MCPClient:
    flags = ["--legacy"] if era == "stateful" else []
    return MCPClient.stdio(sys.executable, [SERVER, *flags], env={"MCP_TEST_RECORD": str(record)})


def calls(*made: tuple[str, dict[str, Any]]) -> Message:
    return Message(
        "assistant",
        "",
        tool_calls=[ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(made)],
    )


def bookings(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def tool_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.role == "tool"]


ANSWER = ({"answer": {"nights": 2, "breakfast": True}}, "booked 2 nights in Oslo")
DECLINE = ({"decline": True}, "not booked (decline)")
CANCEL = ({"cancel": True}, "not booked (cancel)")
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("era", "decision", "expected"),
    [
        pytest.param("stateless", *ANSWER, id="stateless-answer"),
        pytest.param("stateless", *DECLINE, id="stateless-decline", marks=SLOW),
        pytest.param("stateless", *CANCEL, id="stateless-cancel", marks=SLOW),
        pytest.param("stateful", *ANSWER, id="stateful-answer"),
        pytest.param("stateful", *DECLINE, id="stateful-decline", marks=SLOW),
        pytest.param("stateful", *CANCEL, id="stateful-cancel", marks=SLOW),
    ],
)
def test_a_question_interrupts_the_run_and_resume_completes_the_call(
    tmp_path: Path, era: str, decision: dict[str, Any], expected: str
) -> None:
    record = tmp_path / "bookings"

    async def main() -> None:
        async with client(era, record) as server:
            tools = await server.tools(include=["book", "shout"])
            checkpointer = FileCheckpointer(tmp_path / "threads")
            turn = calls(("book", {"city": "Oslo"}), ("shout", {"text": "hi"}))
            agent = Agent(ScriptedModel([turn, "done"]), tools=tools)
            with pytest.raises(HitlInterrupt) as asked:
                await agent.run("book", checkpointer=checkpointer, thread_id="t")
            interrupt = asked.value
            assert (interrupt.kind, interrupt.tool) == ("elicitation", "book")
            assert interrupt.message == "How many nights in Oslo?"
            assert interrupt.schema is not None and interrupt.schema["required"] == ["nights"]
            saved = some(await checkpointer.load("t"))
            assert saved.elicitation is not None and saved.pending is not None
            assert tool_texts(saved.results) == ["HI"]
            with pytest.raises(HitlDecisionError):  # nights is 1 to 30
                await agent.resume(
                    "t",
                    {interrupt.interrupt_id: {"answer": {"nights": 99}}},
                    checkpointer=checkpointer,
                )
            result = await agent.resume(
                "t", {interrupt.interrupt_id: decision}, checkpointer=checkpointer
            )
            booked, shouted = tool_texts(result.messages)
            assert booked.startswith(expected) and shouted == "HI"
            assert result.text == "done"

    arun(main(), timeout=60)
    assert len(bookings(record)) == (1 if "answer" in decision else 0)


@pytest.mark.slow
def test_two_questions_of_one_round_are_asked_one_at_a_time_then_the_call_goes_out(
    tmp_path: Path,
) -> None:
    record = tmp_path / "bookings"

    async def main() -> None:
        async with client("stateless", record) as server:
            tools = await server.tools(include=["book_twice"])
            checkpointer = InMemoryCheckpointer()
            agent = Agent(
                ScriptedModel([calls(("book_twice", {"city": "Rome"})), "done"]), tools=tools
            )
            with pytest.raises(HitlInterrupt) as first:
                await agent.run("book", checkpointer=checkpointer, thread_id="t")
            assert first.value.message == "How many nights in Rome?"
            with pytest.raises(HitlInterrupt) as second:
                await agent.resume(
                    "t",
                    {first.value.interrupt_id: {"answer": {"nights": 4}}},
                    checkpointer=checkpointer,
                )
            assert second.value.message == "Who is the guest?"
            assert bookings(record) == []  # nothing sent before every question is answered
            result = await agent.resume(
                "t",
                {second.value.interrupt_id: {"answer": {"guest": "Ada"}}},
                checkpointer=checkpointer,
            )
            assert tool_texts(result.messages)[0].startswith("booked 4 nights in Rome")

    arun(main(), timeout=60)
    assert bookings(record) == [{"tool": "book_twice", "city": "Rome", "nights": 4, "guest": "Ada"}]


@pytest.mark.slow
@ERAS
def test_a_question_outside_the_allowed_forms_is_a_tool_error_the_model_sees(
    tmp_path: Path, era: str
) -> None:
    async def main() -> None:
        async with client(era, tmp_path / "bookings") as server:
            tools = await server.tools(include=["odd_ask"])
            agent = Agent(ScriptedModel([calls(("odd_ask", {})), "done"]), tools=tools)
            result = await agent.run("go", checkpointer=InMemoryCheckpointer(), thread_id="t")
            (answer,) = [m for m in result.messages if m.role == "tool"]
            assert answer.kind == "tool_error" and "address" in answer.text, answer.text
            assert result.text == "done"

    arun(main(), timeout=60)


@pytest.mark.slow
def test_a_stateful_call_whose_client_is_gone_is_sent_again_with_the_answer(
    tmp_path: Path,
) -> None:
    """The client that holds the waiting call closes (as in a restart): the call is sent
    again and the server's same question answered at once; it books once."""
    record = tmp_path / "bookings"

    async def main() -> None:
        checkpointer = InMemoryCheckpointer()
        async with client("stateful", record) as first:
            tools = await first.tools(include=["book"])
            agent = Agent(ScriptedModel([calls(("book", {"city": "Oslo"}))]), tools=tools)
            with pytest.raises(HitlInterrupt) as asked:
                await agent.run("book", checkpointer=checkpointer, thread_id="t")
        async with client("stateful", record) as second:
            tools = await second.tools(include=["book"])
            agent = Agent(ScriptedModel(["done"]), tools=tools)
            answer = {asked.value.interrupt_id: {"answer": {"nights": 5}}}
            result = await agent.resume("t", answer, checkpointer=checkpointer)
            assert tool_texts(result.messages)[0].startswith("booked 5 nights in Oslo")

    arun(main(), timeout=60)
    assert [b["nights"] for b in bookings(record)] == [5]


def _child(*args: str, record: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MCP_TEST_RECORD": str(record)}
    return subprocess.Popen(
        [sys.executable, CHILD, *args], stdout=subprocess.PIPE, text=True, env=env
    )


@pytest.mark.slow
@ERAS
def test_a_process_killed_between_question_and_answer_is_answered_by_a_new_one(
    tmp_path: Path, era: str
) -> None:
    record, root = tmp_path / "bookings", str(tmp_path / "threads")
    flags = ["--legacy"] if era == "stateful" else []
    asking = _child("ask", root, *flags, record=record)
    try:
        assert asking.stdout is not None
        interrupt = json.loads(asking.stdout.readline())
        assert interrupt["kind"] == "elicitation" and interrupt["tool"] == "book"
        os.kill(asking.pid, signal.SIGKILL)  # the checkpoint holds the question already
        assert asking.wait(timeout=30) == -signal.SIGKILL
    finally:
        close_process(asking)
    assert bookings(record) == []
    answering = _child("answer", root, *flags, interrupt["interrupt_id"], record=record)
    try:
        out, _ = answering.communicate(timeout=120)
    finally:
        close_process(answering)
    assert answering.returncode == 0, out
    done = json.loads(out.strip().splitlines()[-1])
    assert done["text"] == "done" and done["tools"][0].startswith("booked 3 nights in Oslo")
    assert bookings(record) == [{"tool": "book", "city": "Oslo", "nights": 3, "breakfast": True}]
    saved = some(arun(FileCheckpointer(root).load("t")))
    assert saved.pending is None and saved.finished
