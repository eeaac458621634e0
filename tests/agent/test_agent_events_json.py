"""Every stream event (agent and swarm) encodes itself to JSON; the server streams that JSON."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from async_helper import arun
from framework_agents import Agent, FunctionModel, Message, ScriptedModel, ToolCall, tool
from framework_agents.agent.events import (
    AgentEvent,
    InterruptEvent,
    MessageCompletedEvent,
    MessageStartedEvent,
    ReasoningDeltaEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StreamEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
)
from framework_agents.agent.result import RunResult
from framework_agents.errors import InvalidArgumentError
from framework_agents.hitl import HitlInterrupt
from framework_agents.server._api import event_json
from framework_agents.server._shapes import Pending
from framework_agents.swarm import (
    Handoff,
    HandoffEvent,
    MemberEvent,
    SwarmErrorEvent,
    SwarmEvent,
    SwarmFinishedEvent,
    SwarmInterruptEvent,
    SwarmResult,
    SwarmStartedEvent,
)

PROMPT = Message("user", "héllo", id="u1")
ANSWER = Message("assistant", "hi", id="a1")
CALL = ToolCall("c1", "publish", {"text": "x"})
RESULT = Message("tool", "done", tool_call_id="c1", name="publish", id="t1")
INTERRUPT = HitlInterrupt("publish", {"text": "x"}, "c1", thread_id="t", interrupt_id="i1")
RUN_RESULT = RunResult(text="hi", messages=[PROMPT, ANSWER], stop_reason="end_turn", run_id="r1")
HANDOFF = Handoff("a", "b", "over to you")
SWARM_RESULT = SwarmResult("hi", "completed", "b", [HANDOFF], [PROMPT, ANSWER], "end_turn")

#: One event of every type, with what its JSON must hold (besides ``type``).
EVENTS: list[tuple[StreamEvent, dict[str, Any]]] = [
    (
        RunStartedEvent(run_id="r1", agent_id="default", thread_id="t", prompt=PROMPT),
        {
            "run_id": "r1",
            "agent_id": "default",
            "thread_id": "t",
            "prompt": PROMPT.model_dump(mode="json"),
        },
    ),
    (
        MessageStartedEvent(message_id="a1", turn=1),
        {"message_id": "a1", "turn": 1, "role": "assistant"},
    ),
    (TextDeltaEvent(message_id="a1", delta="h"), {"message_id": "a1", "delta": "h"}),
    (ReasoningDeltaEvent(message_id="a1", delta="hm"), {"message_id": "a1", "delta": "hm"}),
    (
        MessageCompletedEvent(message=ANSWER, turn=1),
        {"message": ANSWER.model_dump(mode="json"), "turn": 1},
    ),
    (
        ToolCallEvent(call=CALL, message_id="a1", requires_approval=True),
        {"call": {"id": "c1", "name": "publish", "args": {"text": "x"}}, "message_id": "a1"},
    ),
    (
        ToolResultEvent(call_id="c1", tool="publish", message=RESULT),
        {
            "call_id": "c1",
            "tool": "publish",
            "message": RESULT.model_dump(mode="json"),
            "is_error": False,
        },
    ),
    (
        ToolProgressEvent(call_id="c1", tool="publish", progress=1.0, total=4.0, message="1/4"),
        {"call_id": "c1", "tool": "publish", "progress": 1.0, "total": 4.0, "message": "1/4"},
    ),
    (
        InterruptEvent(run_id="r1", interrupt=INTERRUPT),
        {"run_id": "r1", "interrupt": {"interrupt_id": "i1", "tool": "publish", "thread_id": "t"}},
    ),
    (
        RunFinishedEvent(run_id="r1", result=RUN_RESULT),
        {"run_id": "r1", "result": {"text": "hi", "stop_reason": "end_turn", "turns": 0}},
    ),
    (
        RunErrorEvent(run_id="r1", error=InvalidArgumentError("bad")),
        {"run_id": "r1", "error": {"code": "INVALID_ARGUMENT", "message": "bad"}},
    ),
    (
        SwarmStartedEvent(run_id="r1", swarm_id="s", agent="a", thread_id="t", prompt=PROMPT),
        {"run_id": "r1", "swarm_id": "s", "agent": "a", "prompt": PROMPT.model_dump(mode="json")},
    ),
    (
        MemberEvent(agent="a", event=TextDeltaEvent(message_id="a1", delta="h")),
        {"agent": "a", "event": {"type": "text_delta", "message_id": "a1", "delta": "h"}},
    ),
    (
        HandoffEvent(handoff=HANDOFF, context={"a": {"k": 1}}),
        {"from": "a", "to": "b", "message": "over to you", "context": {"a": {"k": 1}}},
    ),
    (
        SwarmFinishedEvent(run_id="r1", result=SWARM_RESULT),
        {"run_id": "r1", "result": {"status": "completed", "handoffs": [HANDOFF.to_dict()]}},
    ),
    (
        SwarmInterruptEvent(run_id="r1", agent="b", interrupt=INTERRUPT),
        {"agent": "b", "interrupt": {"call_id": "c1", "key": INTERRUPT.key}},
    ),
    (
        SwarmErrorEvent(run_id="r1", agent="b", error=RuntimeError("boom")),
        {"agent": "b", "error": {"code": "INTERNAL", "message": "boom"}},
    ),
]


def _holds(data: Any, expected: Any) -> bool:
    """Whether ``data`` holds ``expected`` (dicts: at least its keys, recursively)."""
    if isinstance(expected, dict):
        return isinstance(data, dict) and all(
            key in data and _holds(data[key], value) for key, value in expected.items()
        )
    return bool(data == expected)


def test_the_table_covers_every_event_type() -> None:
    types = {*typing.get_args(AgentEvent), *typing.get_args(SwarmEvent)}
    assert {type(event) for event, _ in EVENTS} == types


@pytest.mark.parametrize(("event", "expected"), EVENTS, ids=[e.type for e, _ in EVENTS])
def test_every_event_round_trips_through_json(event: StreamEvent, expected: dict[str, Any]) -> None:
    data = event.to_dict()
    assert next(iter(data)) == "type" and data["type"] == event.type
    assert _holds(data, expected), data
    assert json.loads(json.dumps(data)) == data  # JSON values only
    assert json.loads(event.to_json()) == data


def test_to_json_keeps_text_as_it_is() -> None:
    event = RunStartedEvent(run_id="r1", agent_id="default", prompt=PROMPT)
    assert '"héllo"' in event.to_json()


def test_the_events_of_a_real_run_interrupt_and_error_all_encode() -> None:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        return "done"

    async def collect(agent: Agent, prompt: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        try:
            async for event in agent.stream(prompt):
                events.append(event)
        except InvalidArgumentError:
            pass
        return events

    script: list[Any] = [Message("assistant", tool_calls=[CALL]), "ok"]
    interrupted = arun(collect(Agent(ScriptedModel(script), tools=[publish]), "go"))

    def fail(messages: list[Message], tools: list[Any]) -> str:
        raise InvalidArgumentError("no")

    failed = arun(collect(Agent(FunctionModel(fail)), "go"))
    finished = arun(collect(Agent(ScriptedModel(["fine"])), "go"))
    kinds = {e.type for e in [*interrupted, *failed, *finished]}
    assert {"run_started", "tool_call", "interrupt", "run_error", "run_finished"} <= kinds
    for event in [*interrupted, *failed, *finished]:
        assert json.loads(event.to_json())["type"] == event.type


PENDING = Pending("i1", "c1", "publish", {"text": "x"}, "publish:{}", ("approve",))

#: What the JSON API streams for each event: the fields ``docs/server.md`` lists, as the
#: server's own encoder made them before the events encoded themselves.
STREAMED: dict[str, dict[str, Any]] = {
    "run_started": {"run_id": "r1", "thread_id": "t"},
    "message_started": {"message_id": "a1", "turn": 1},
    "text_delta": {"message_id": "a1", "delta": "h"},
    "reasoning_delta": {"message_id": "a1", "delta": "hm"},
    "message_completed": {"message": ANSWER.model_dump(mode="json"), "turn": 1},
    "tool_call": {
        "message_id": "a1",
        "call": {"id": "c1", "name": "publish", "args": {"text": "x"}},
        "requires_approval": True,
    },
    "tool_result": {
        "call_id": "c1",
        "tool": "publish",
        "message": RESULT.model_dump(mode="json"),
        "is_error": False,
    },
    "interrupt": {"run_id": "r1", "pending": PENDING.to_json()},
    "run_finished": {"run_id": "r1", "text": "hi", "stop_reason": "end_turn"},
    "run_error": {"run_id": "r1", "code": "INVALID_ARGUMENT", "message": "bad"},
    "member_event": {"agent": "a", "phase": "finished"},
    "handoff": {"from": "a", "to": "b", "message": "over to you"},
}


@pytest.mark.parametrize("kind", sorted(STREAMED))
def test_the_api_streams_the_same_fields_as_before(kind: str) -> None:
    served = [e for e, _ in EVENTS if e.type == kind and not isinstance(e, MemberEvent)]
    event: Any = (
        MemberEvent(agent="a", event=RunFinishedEvent(run_id="m", result=RUN_RESULT))
        if kind == "member_event"
        else served[0]
    )
    name, data = event_json(event, PENDING)
    assert name == ("member_step" if kind == "member_event" else kind)
    assert data == STREAMED[kind]
