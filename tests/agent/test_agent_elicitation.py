"""A tool's question mid-call (``ElicitationRequired``) through the agent's one run/resume path.

The interrupt (``kind == "elicitation"``, the message and schema) is saved like an
approval, with the turn and the results of the turn's other calls; an answer, a decline or
a cancel keyed by the interrupt id runs the asking call again with it (the others are not
run again; a crash while it runs keeps the answer for the settled re-run), bad answers are
``HITL_DECISION`` with nothing run, an unanswered resume raises the same interrupt again,
and a question of a form the protocol does not allow is a tool error the model sees.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import (
    Agent,
    FileCheckpointer,
    HitlInterrupt,
    InMemoryCheckpointer,
    Message,
    ScriptedModel,
    ToolCall,
    ToolContext,
    tool,
)
from framework_agents.checkpoint import ThreadCheckpoint
from framework_agents.elicitation import Elicitation, ElicitationRequired
from framework_agents.errors import HitlDecisionError

SCHEMA = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "minimum": 1, "maximum": 30},
        "meal": {"type": "string", "enum": ["none", "breakfast"]},
        "when": {"type": "string", "format": "date"},
    },
    "required": ["nights"],
}


class Hotel:
    """Tools of one test: ``book`` asks before it books; ``note`` counts its runs."""

    def __init__(self, schema: dict[str, Any] = SCHEMA) -> None:
        self.booked: list[dict[str, Any]] = []
        self.notes = 0
        self.asked = 0
        outer = self

        @tool
        def book(city: str, ctx: ToolContext) -> str:
            """Book a room in a city."""
            answer = ctx.answer
            if answer is None:
                outer.asked += 1
                raise ElicitationRequired(
                    Elicitation(f"How many nights in {city}?", schema, {"city": city})
                )
            assert answer.elicitation.state == {"city": city}
            if answer.action != "accept":
                return f"not booked ({answer.action})"
            outer.booked.append(dict(answer.content or {}))
            return f"booked {answer.content}"

        @tool
        def note(text: str) -> str:
            """Note something."""
            outer.notes += 1
            return f"noted {text}"

        self.tools = [book, note]


def turn() -> Message:
    return Message(
        "assistant",
        "",
        tool_calls=[ToolCall("b", "book", {"city": "Oslo"}), ToolCall("n", "note", {"text": "x"})],
    )


def interrupted(hotel: Hotel, checkpointer: Any) -> HitlInterrupt:
    agent = Agent(ScriptedModel([turn()]), tools=hotel.tools)
    with pytest.raises(HitlInterrupt) as info:
        arun(agent.run("go", checkpointer=checkpointer, thread_id="t"))
    return info.value


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            {"answer": {"nights": 3, "meal": "breakfast"}},
            "booked {'nights': 3, 'meal': 'breakfast'}",
        ),
        ({"decline": True}, "not booked (decline)"),
        ({"cancel": True}, "not booked (cancel)"),
    ],
    ids=["answer", "decline", "cancel"],
)
def test_a_question_is_saved_like_an_approval_and_answered_by_resume(
    tmp_path: Path, decision: dict[str, Any], expected: str
) -> None:
    hotel = Hotel()
    checkpointer = FileCheckpointer(tmp_path)
    interrupt = interrupted(hotel, checkpointer)
    assert (interrupt.kind, interrupt.tool, interrupt.call_id) == ("elicitation", "book", "b")
    assert interrupt.message == "How many nights in Oslo?" and interrupt.schema == SCHEMA
    assert interrupt.to_dict()["kind"] == "elicitation"
    saved = some(arun(checkpointer.load("t")))
    assert saved.pending is not None and saved.pending.id == "b"
    assert saved.interrupt_id == interrupt.interrupt_id
    assert saved.elicitation is not None and saved.elicitation["schema"] == SCHEMA
    assert saved.turn is not None and [r.text for r in saved.results] == ["noted x"]
    assert [m.text for m in saved.messages] == ["go"]  # the turn is kept out of messages
    # A new agent (as after a restart) answers; the other call of the turn is not run again.
    second = Agent(ScriptedModel(["done"]), tools=hotel.tools)
    result = arun(second.resume("t", {interrupt.interrupt_id: decision}, checkpointer=checkpointer))
    tool_texts = [m.text for m in result.messages if m.role == "tool"]
    assert tool_texts == [expected, "noted x"]
    assert (hotel.notes, hotel.asked) == (1, 1)
    assert result.text == "done"
    final = some(arun(checkpointer.load("t")))
    assert final.pending is None and final.decisions == {} and final.finished


def test_bad_answers_are_hitl_decision_and_nothing_runs() -> None:
    hotel = Hotel()
    checkpointer = InMemoryCheckpointer()
    interrupt = interrupted(hotel, checkpointer)
    agent = Agent(ScriptedModel(["done"]), tools=hotel.tools)
    bad = [
        {"answer": {"nights": 0}},
        {"answer": {"nights": "3"}},
        {"answer": {"nights": True}},
        {"answer": {"meal": "none"}},
        {"answer": {"nights": 2, "pets": 1}},
        {"answer": {"nights": 2, "meal": "lunch"}},
        {"answer": {"nights": 2, "when": "soon"}},
        {"answer": {"nights": 2}, "decline": True},
        {"decline": "yes"},
        "approve",
        {"edit": {"city": "Rome"}},
    ]
    for value in bad:
        with pytest.raises(HitlDecisionError) as info:
            arun(agent.resume("t", {interrupt.interrupt_id: value}, checkpointer=checkpointer))
        assert info.value.code == "HITL_DECISION", value
    assert hotel.booked == [] and hotel.notes == 1
    saved = some(arun(checkpointer.load("t")))
    assert saved.interrupt_id == interrupt.interrupt_id and saved.elicitation is not None


def test_a_resume_without_an_answer_raises_the_same_question_again() -> None:
    hotel = Hotel()
    checkpointer = InMemoryCheckpointer()
    interrupt = interrupted(hotel, checkpointer)
    agent = Agent(ScriptedModel(["done"]), tools=hotel.tools)
    for decisions in (None, {"interrupt-0123456789abcdef0123456789abcdef": {"decline": True}}):
        with pytest.raises(HitlInterrupt) as again:
            arun(agent.resume("t", decisions, checkpointer=checkpointer))
        assert again.value.interrupt_id == interrupt.interrupt_id
        assert (again.value.kind, again.value.message) == ("elicitation", interrupt.message)
    assert hotel.asked == 1 and hotel.notes == 1
    result = arun(
        agent.resume(
            "t", {interrupt.interrupt_id: {"answer": {"nights": 2}}}, checkpointer=checkpointer
        )
    )
    assert hotel.booked == [{"nights": 2}] and result.text == "done"


def test_a_question_outside_the_allowed_forms_is_a_tool_error_the_model_sees() -> None:
    nested = {"type": "object", "properties": {"address": {"type": "object"}}}
    hotel = Hotel(schema=nested)
    agent = Agent(ScriptedModel([turn(), "done"]), tools=hotel.tools)
    result = arun(agent.run("go", checkpointer=InMemoryCheckpointer(), thread_id="t"))
    asked = next(m for m in result.messages if m.role == "tool" and m.name == "book")
    assert asked.kind == "tool_error" and "may not ask" in asked.text and "'address'" in asked.text


def test_two_questions_of_one_turn_are_asked_one_interrupt_at_a_time() -> None:
    hotel = Hotel()
    checkpointer = InMemoryCheckpointer()
    both = Message(
        "assistant",
        "",
        tool_calls=[
            ToolCall("1", "book", {"city": "Oslo"}),
            ToolCall("2", "book", {"city": "Rome"}),
        ],
    )
    agent = Agent(ScriptedModel([both, "done"]), tools=hotel.tools)
    with pytest.raises(HitlInterrupt) as first:
        arun(agent.run("go", checkpointer=checkpointer, thread_id="t"))
    assert first.value.call_id == "1"
    with pytest.raises(HitlInterrupt) as second:
        arun(
            agent.resume(
                "t",
                {first.value.interrupt_id: {"answer": {"nights": 1}}},
                checkpointer=checkpointer,
            )
        )
    assert second.value.call_id == "2" and second.value.message == "How many nights in Rome?"
    assert some(arun(checkpointer.load("t"))).results[0].text == "booked {'nights': 1}"
    result = arun(
        agent.resume(
            "t", {second.value.interrupt_id: {"answer": {"nights": 2}}}, checkpointer=checkpointer
        )
    )
    assert hotel.booked == [{"nights": 1}, {"nights": 2}] and result.text == "done"


def test_an_approval_interrupt_is_of_kind_tool_call_and_both_kinds_pickle() -> None:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        return text

    agent = Agent(
        ScriptedModel(
            [Message("assistant", "", tool_calls=[ToolCall("p", "publish", {"text": "a"})])]
        ),
        tools=[publish],
    )
    with pytest.raises(HitlInterrupt) as approval:
        arun(agent.run("go", checkpointer=InMemoryCheckpointer(), thread_id="t"))
    assert approval.value.kind == "tool_call" and approval.value.message is None
    asked = interrupted(Hotel(), InMemoryCheckpointer())
    for interrupt in (approval.value, asked):
        copy = pickle.loads(pickle.dumps(interrupt))
        assert copy.to_dict() == interrupt.to_dict()


def test_a_checkpoint_written_before_elicitations_loads_and_one_with_a_question_round_trips(
    tmp_path: Path,
) -> None:
    old = {
        "version": 1,
        "thread_id": "t",
        "saved_at": "2026-01-01T00:00:00Z",
        "messages": [{"role": "user", "content": "go", "id": "m1"}],
        "state": {},
        "pending": {"id": "c", "name": "publish", "args": {}},
        "interrupt_id": "interrupt-0123456789abcdef0123456789abcdef",
    }
    loaded = ThreadCheckpoint.model_validate_json(json.dumps(old))
    assert loaded.elicitation is None and loaded.pending is not None
    checkpointer = FileCheckpointer(tmp_path)
    interrupted(Hotel(), checkpointer)
    saved = some(arun(checkpointer.load("t")))
    again = ThreadCheckpoint.model_validate_json(saved.model_dump_json())
    assert again.elicitation == saved.elicitation and again.turn == saved.turn
    with pytest.raises(ValueError, match="pending call among the calls of the turn"):
        ThreadCheckpoint("t", None, [], {}, saved.pending, elicitation=saved.elicitation)


class Crash(BaseException):
    """Stands in for a process dying: nothing in the framework catches it."""


def test_a_crash_while_the_answered_call_runs_keeps_the_answer_and_the_landed_results() -> None:
    hotel = Hotel()
    checkpointer = InMemoryCheckpointer()
    interrupt = interrupted(hotel, checkpointer)
    runs: list[Any] = []

    @tool(name="book")
    def crashing_book(city: str, ctx: ToolContext) -> str:
        """Book a room in a city."""
        runs.append(ctx.answer)
        if len(runs) == 1:
            raise Crash  # the process dies while the answered call runs
        assert ctx.answer is not None
        return f"booked {ctx.answer.content} in {city}"

    tools = [crashing_book, hotel.tools[1]]
    agent = Agent(ScriptedModel(["done"]), tools=tools)
    answer = {interrupt.interrupt_id: {"answer": {"nights": 6}}}
    with pytest.raises(Crash):
        arun(agent.resume("t", answer, checkpointer=checkpointer))
    saved = some(arun(checkpointer.load("t")))
    assert [c.id for c in saved.in_flight] == ["b"] and [r.text for r in saved.results] == [
        "noted x"
    ]
    assert saved.elicitation is not None and saved.elicitation["answer"]["content"] == {"nights": 6}
    # Its outcome is unknown: it runs again only on a decision for that interrupt, and
    # then with the answer it ran with.
    with pytest.raises(HitlInterrupt) as unknown:
        arun(Agent(ScriptedModel([]), tools=tools).resume("t", None, checkpointer=checkpointer))
    assert unknown.value.outcome_unknown and unknown.value.kind == "tool_call"
    result = arun(
        Agent(ScriptedModel(["done"]), tools=tools).resume(
            "t", {unknown.value.key: "approve"}, checkpointer=checkpointer
        )
    )
    assert [m.text for m in result.messages if m.role == "tool"] == [
        "booked {'nights': 6} in Oslo",
        "noted x",
    ]
    assert len(runs) == 2 and runs[1] is not None and runs[1].content == {"nights": 6}
    assert hotel.notes == 1


def test_an_answer_that_leaves_out_a_property_takes_its_default() -> None:
    """SEP-1034: the schema's defaults fill what the answer leaves out; given values win."""
    with_defaults = {
        "type": "object",
        "properties": {
            "nights": {"type": "integer", "minimum": 1, "default": 2},
            "meal": {"type": "string", "enum": ["none", "breakfast"], "default": "none"},
            "late": {"type": "boolean", "default": True},
            "note": {"type": "string"},
        },
        "required": ["nights"],
    }
    for answer, booked in (
        ({}, {"nights": 2, "meal": "none", "late": True}),
        ({"nights": 5, "late": False}, {"nights": 5, "meal": "none", "late": False}),
    ):
        hotel = Hotel(with_defaults)
        checkpointer = InMemoryCheckpointer()
        interrupt = interrupted(hotel, checkpointer)
        agent = Agent(ScriptedModel(["ok"]), tools=hotel.tools)
        arun(
            agent.resume(
                "t", {interrupt.interrupt_id: {"answer": answer}}, checkpointer=checkpointer
            )
        )
        assert hotel.booked == [booked]
