"""Human in the loop inside the run loop: decisions, keys, wildcard, interrupts, seams."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    AgentError,
    HitlDecisionError,
    HitlInterrupt,
    InMemoryMemory,
    Message,
    ScriptedModel,
    ToolCall,
    ToolRejection,
    hitl_key,
    is_well_formed,
    tool,
)
from framework_agents.agent._loop import RunHooks, ToolProgress
from framework_agents.checkpoint import InMemoryCheckpointer
from framework_agents.history import CheckedHistory
from framework_agents.hitl import find_decision, parse_decision

published: list[str] = []


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text."""
    published.append(text)
    return f"published {text}"


@tool(requires_approval=True, allowed_decisions=("approve", "reject"))
def delete(path: str) -> str:
    """Delete a file (approve or reject only)."""
    published.append(f"deleted {path}")
    return "deleted"


@tool
def note(text: str) -> str:
    """A tool that needs no approval."""
    published.append(f"note {text}")
    return "noted"


@pytest.fixture(autouse=True)
def _reset() -> None:
    published.clear()


def turn(*calls: ToolCall) -> Message:
    return Message("assistant", "", tool_calls=list(calls))


def publish_turn(text: str = "hello", cid: str = "c1") -> Message:
    return turn(ToolCall(cid, "publish", {"text": text}))


# -- keys and decisions -------------------------------------------------------------


def test_hitl_key_is_tool_colon_json_dumps() -> None:
    args = {"text": "hi", "n": [1, 2]}
    assert hitl_key("publish", args) == f"publish:{json.dumps(args)}"
    assert hitl_key("t", {}) == "t:{}"


def test_find_decision_exact_then_json_equal_then_wildcard() -> None:
    args = {"a": 1, "b": 2}
    exact = {hitl_key("t", args): "approve", "t": {"reject": "no"}}
    assert find_decision(exact, "t", args) == ("approve", "exact")
    reordered = {'t:{"b": 2, "a": 1}': "approve", "t": {"reject": "no"}}
    assert find_decision(reordered, "t", args) == ("approve", "exact")
    assert find_decision({"t": "approve"}, "t", {"a": 9}) == ("approve", "wildcard")
    assert find_decision({"other": "approve", "t:{bad json": "approve"}, "t", args) is None
    assert find_decision(None, "t", args) is None


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("approve", "approve"),
        ({"edit": {"text": "x"}}, "edit"),
        ({"reject": "because"}, "reject"),
        ("reject", "reject"),
        ({"suspend": True}, "suspend"),
        ("suspend", "suspend"),
    ],
)
def test_parse_decision_kinds(value: Any, kind: str) -> None:
    decision = parse_decision(value, tool=publish, source="exact")
    assert decision.kind == kind
    if kind == "reject":
        assert decision.reason


@pytest.mark.parametrize(
    "value",
    [
        "maybe",
        "edit",
        {"edit": "not a dict"},
        {"reject": ""},
        {"reject": 3},
        {"suspend": False},
        {"approve": "yes"},
        {"approve": True},
        {"approve": True, "reject": "x"},
        {},
        None,
        42,
        ["approve"],
    ],
)
def test_malformed_decisions_raise_hitl_decision(value: Any) -> None:
    with pytest.raises(HitlDecisionError) as info:
        parse_decision(value, tool=publish, source="callback")
    assert info.value.code == "HITL_DECISION"


def test_interrupt_and_rejection_are_signals_not_errors() -> None:
    assert not issubclass(HitlInterrupt, AgentError)
    assert not issubclass(ToolRejection, AgentError)
    interrupt = HitlInterrupt("publish", {"text": "x"}, "c1", thread_id="t1")
    assert interrupt.code == HitlInterrupt.code == "HITL_INTERRUPT"
    assert interrupt.key == hitl_key("publish", {"text": "x"})
    copy = pickle.loads(pickle.dumps(interrupt))
    assert (copy.tool, copy.arguments, copy.call_id, copy.key, copy.thread_id) == (
        "publish",
        {"text": "x"},
        "c1",
        interrupt.key,
        "t1",
    )


# -- decisions in the loop ----------------------------------------------------------


def test_no_decision_and_no_callback_suspends() -> None:
    memory = InMemoryMemory()
    model = ScriptedModel(["first answer", publish_turn()])
    agent = Agent(model, tools=[publish], memory=memory)
    arun(agent.run("warm up"))
    with pytest.raises(HitlInterrupt) as info:
        arun(agent.run("publish it", checkpointer=InMemoryCheckpointer(), thread_id="t1"))
    interrupt = info.value
    assert (interrupt.tool, interrupt.arguments, interrupt.call_id) == (
        "publish",
        {"text": "hello"},
        "c1",
    )
    assert interrupt.key == 'publish:{"text": "hello"}'
    assert interrupt.thread_id == "t1"
    assert published == []
    # History and memory keep everything up to, and excluding, the interrupted turn.
    expected = [("user", "warm up"), ("assistant", "first answer"), ("user", "publish it")]
    assert [(m.role, m.text) for m in agent.messages] == expected
    stored = arun(memory.load())
    assert [(m.role, m.text) for m in stored] == expected
    assert is_well_formed(stored)
    assert agent.timeline[-1].label == "interrupted"
    assert not agent.running


def test_callback_approve_sync_and_async() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def decide(name: str, args: dict[str, Any]) -> str:
        asked.append((name, args))
        return "approve"

    async def adecide(name: str, args: dict[str, Any]) -> str:
        return "approve"

    for callback in (decide, adecide):
        model = ScriptedModel([publish_turn(), "done"])
        result = arun(Agent(model, tools=[publish], decide=callback).run("go"))
        assert result.messages[2].text == "published hello"
    assert asked == [("publish", {"text": "hello"})]
    assert published == ["hello", "hello"]


def test_edit_runs_the_tool_with_the_new_arguments() -> None:
    model = ScriptedModel([publish_turn("draft"), "done"])
    agent = Agent(model, tools=[publish], decide=lambda n, a: {"edit": {"text": "final"}})
    messages = arun(agent.run("go")).messages
    assert published == ["final"]
    assert messages[2].text == "published final"
    assert messages[2].metadata["edited_args"] == {"text": "final"}
    assert messages[1].tool_calls[0].args == {"text": "draft"}  # what the model said stays


def test_edit_with_invalid_arguments_is_a_decision_error_and_nothing_runs() -> None:
    model = ScriptedModel(
        [turn(ToolCall("n", "note", {"text": "x"}), ToolCall("p", "publish", {"text": "a"}))]
    )
    agent = Agent(model, tools=[publish, note], decide=lambda n, a: {"edit": {"wrong": 1}})
    with pytest.raises(HitlDecisionError):
        arun(agent.run("go"))
    assert published == []


def test_reject_feeds_a_rejection_to_the_model_and_the_run_goes_on() -> None:
    model = ScriptedModel([publish_turn(), "ok, I will not publish"])
    agent = Agent(model, tools=[publish], decide=lambda n, a: {"reject": "not today"})
    result = arun(agent.run("go"))
    assert published == []
    rejection = result.messages[2]
    assert rejection.role == "tool" and rejection.tool_call_id == "c1"
    assert rejection.kind == "rejected" and rejection.metadata["reason"] == "not today"
    assert "not today" in rejection.text
    assert model.calls[1].messages[-1].id == rejection.id
    assert result.text == "ok, I will not publish"


def test_suspend_decision_raises_the_interrupt() -> None:
    agent = Agent(
        ScriptedModel([publish_turn()]), tools=[publish], decide=lambda n, a: {"suspend": True}
    )
    with pytest.raises(HitlInterrupt):
        arun(agent.run("go"))
    assert published == []


def test_a_decision_the_tool_does_not_allow_is_refused() -> None:
    model = ScriptedModel([turn(ToolCall("d", "delete", {"path": "/x"}))])
    agent = Agent(model, tools=[delete], decide=lambda n, a: {"edit": {"path": "/y"}})
    with pytest.raises(HitlDecisionError) as info:
        arun(agent.run("go"))
    assert info.value.code == "HITL_DECISION" and "not allowed" in str(info.value)
    assert published == []
    assert agent.messages == []


def test_the_default_suspend_applies_even_when_suspend_is_not_allowed() -> None:
    agent = Agent(ScriptedModel([turn(ToolCall("d", "delete", {"path": "/x"}))]), tools=[delete])
    with pytest.raises(HitlInterrupt):
        arun(agent.run("go"))


def test_tools_without_approval_never_ask() -> None:
    asked: list[str] = []
    model = ScriptedModel([turn(ToolCall("n", "note", {"text": "x"})), "ok"])

    def decide(name: str, args: Any) -> str:
        asked.append(name)
        return "approve"

    arun(Agent(model, tools=[note], decide=decide).run("go"))
    assert asked == [] and published == ["note x"]


# -- stored decisions: exact keys and the wildcard -----------------------------------


def test_stored_decisions_win_over_the_callback() -> None:
    model = ScriptedModel([publish_turn(), "done"])
    agent = Agent(model, tools=[publish], decide=lambda n, a: {"reject": "callback"})
    arun(agent.run("go", decisions={hitl_key("publish", {"text": "hello"}): "approve"}))
    assert published == ["hello"]


def test_an_exact_key_does_not_match_regenerated_arguments_but_the_wildcard_does() -> None:
    exact = {hitl_key("publish", {"text": "hello"}): "approve"}
    model = ScriptedModel([publish_turn("hello!")])
    with pytest.raises(HitlInterrupt):
        arun(Agent(model, tools=[publish]).run("go", decisions=exact))
    model = ScriptedModel([publish_turn("hello!"), "done"])
    arun(Agent(model, tools=[publish]).run("go", decisions={"publish": "approve"}))
    assert published == ["hello!"]


def test_exact_key_beats_the_wildcard() -> None:
    decisions = {hitl_key("publish", {"text": "a"}): "approve", "publish": {"reject": "no"}}
    model = ScriptedModel(
        [
            turn(ToolCall("1", "publish", {"text": "a"}), ToolCall("2", "publish", {"text": "b"})),
            "done",
        ]
    )
    messages = arun(Agent(model, tools=[publish]).run("go", decisions=decisions)).messages
    assert published == ["a"]
    assert [m.kind for m in messages if m.role == "tool"] == [None, "rejected"]


def test_a_malformed_stored_decision_raises() -> None:
    agent = Agent(ScriptedModel([publish_turn()]), tools=[publish])
    with pytest.raises(HitlDecisionError):
        arun(agent.run("go", decisions={"publish": "sure"}))


def test_interrupt_then_continue_with_the_wildcard() -> None:
    """Resume without a checkpoint: a run with no prompt re-enters the loop."""
    model = ScriptedModel([publish_turn("v1"), publish_turn("v2 regenerated"), "done"])
    agent = Agent(model, tools=[publish])
    with pytest.raises(HitlInterrupt) as info:
        arun(agent.run("publish it"))
    tool_name = info.value.tool
    result = arun(agent.run(None, decisions={tool_name: "approve"}))
    assert published == ["v2 regenerated"]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert [m.text for m in model.calls[1].messages] == ["publish it"]
    assert is_well_formed(result.messages)


# -- several approval calls in one turn ----------------------------------------------


def test_calls_in_one_turn_are_decided_one_by_one_before_any_runs() -> None:
    asked: list[str] = []

    def decide(name: str, args: dict[str, Any]) -> Any:
        asked.append(args["text"])
        return "approve" if args["text"] == "a" else {"suspend": True}

    model = ScriptedModel(
        [
            turn(
                ToolCall("1", "publish", {"text": "a"}),
                ToolCall("2", "note", {"text": "free"}),
                ToolCall("3", "publish", {"text": "b"}),
                ToolCall("4", "publish", {"text": "c"}),
            )
        ]
    )
    agent = Agent(model, tools=[publish, note], decide=decide)
    with pytest.raises(HitlInterrupt) as info:
        arun(agent.run("go"))
    assert info.value.call_id == "3"
    assert asked == ["a", "b"]  # "c" is not asked once "b" suspends
    assert published == []  # not even the approved call or the no-approval call ran
    assert [m.role for m in agent.messages] == ["user"]


def test_decisions_for_every_call_of_a_turn_in_one_go() -> None:
    model = ScriptedModel(
        [
            turn(
                ToolCall("1", "publish", {"text": "a"}),
                ToolCall("2", "delete", {"path": "/tmp/x"}),
                ToolCall("3", "publish", {"text": "b"}),
            ),
            "done",
        ]
    )
    decisions = {
        hitl_key("publish", {"text": "a"}): "approve",
        hitl_key("publish", {"text": "b"}): {"edit": {"text": "B"}},
        "delete": {"reject": "keep it"},
    }
    messages = arun(Agent(model, tools=[publish, delete]).run("go", decisions=decisions)).messages
    assert sorted(published) == ["B", "a"]
    assert [m.text for m in messages if m.role == "tool"] == [
        "published a",
        "Rejected: keep it",
        "published B",
    ]


# -- seams for checkpointing ----------------------------------------------------------


def test_hooks_see_interrupts_and_each_tool_result_before_the_loop_goes_on() -> None:
    log: list[Any] = []

    async def on_interrupt(
        interrupt: HitlInterrupt, messages: list[Message], turn: Message
    ) -> None:
        assert any(c.id == interrupt.call_id for c in turn.tool_calls)
        log.append(("interrupt", interrupt.call_id, [m.text for m in messages]))

    async def on_tool_start(call: ToolCall, decision: Any) -> None:
        log.append(("start", call.id, decision.kind if decision else None))

    async def on_tool_result(progress: ToolProgress) -> None:
        log.append(("result", progress.call.id, progress.result.text, len(progress.messages())))

    async def on_commit(history: CheckedHistory, finished: bool) -> None:
        log.append(("commit", len(history), finished))

    async def prepare() -> list[Message]:
        return [Message("user", "from a checkpoint")]

    hooks = RunHooks(
        prepare=prepare,
        on_interrupt=on_interrupt,
        on_tool_start=on_tool_start,
        on_tool_result=on_tool_result,
        on_commit=on_commit,
    )
    model = ScriptedModel([turn(ToolCall("n", "note", {"text": "x"})), publish_turn(), "done"])
    agent = Agent(model, tools=[publish, note])

    async def drive(decisions: Any) -> None:
        async for _ in agent._busy_run(None, decisions, None, hooks, "resume"):
            pass

    with pytest.raises(HitlInterrupt):
        arun(drive(None))
    assert log == [
        ("start", "n", None),
        ("result", "n", "noted", 3),
        ("interrupt", "c1", ["from a checkpoint", "", "noted"]),
        ("commit", 3, False),  # what the interrupted run keeps
    ]
    assert agent.timeline[-1].kind == "resume"
    log.clear()
    model2 = ScriptedModel([publish_turn(), "done"])
    agent.model = model2
    arun(drive({"publish": "approve"}))
    assert log == [
        ("start", "c1", "approve"),
        ("result", "c1", "published hello", 3),
        ("commit", 4, True),
    ]
    assert model2.calls[0].messages[0].text == "from a checkpoint"


def test_an_interrupt_keeps_its_member_and_id_across_pickling() -> None:
    interrupt = HitlInterrupt("publish", {"text": "x"}, "c1", thread_id="t1", agent="billing")
    copy = pickle.loads(pickle.dumps(interrupt))
    assert (copy.agent, copy.interrupt_id) == ("billing", interrupt.interrupt_id)
    assert HitlInterrupt("publish", {}, "c2").agent is None  # outside a swarm
