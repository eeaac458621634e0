"""Handoffs: the tool's schema, self/unknown targets, the mixed-calls turn, shared context,
each member's own prompt and tools, and the constructor's checks."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel
from swarm_scenario import handoff, last_user, since_my_turn

from async_helper import arun
from framework_agents import (
    Agent,
    FunctionModel,
    Handoff,
    Message,
    ScriptedModel,
    Swarm,
    ToolCall,
    is_well_formed,
    tool,
)
from framework_agents.errors import AgentError
from framework_agents.swarm import HANDOFF_KIND, HANDOFF_MESSAGE_KIND, HANDOFF_TOOL


def text_model(text: str) -> FunctionModel:
    return FunctionModel(lambda messages, tools: text)


def three(**kwargs: Any) -> tuple[Swarm, dict[str, Any]]:
    """Members a, b, c whose models are given by name (default: answer with their name)."""
    models = {name: kwargs.get(name, text_model(f"{name} answers")) for name in "abc"}
    agents = [Agent(models[n], agent_id=n, system_prompt=f"you are {n}") for n in "abc"]
    return Swarm(agents), models


def test_the_handoff_tool_enumerates_the_other_members_only() -> None:
    swarm, _ = three()
    for me in "abc":
        specs = {t.name: t.spec for t in swarm.member(me).tools}
        schema = specs[HANDOFF_TOOL].parameters
        assert schema["properties"]["agent_name"]["enum"] == [n for n in "abc" if n != me]
        assert schema["required"] == ["agent_name", "message"]
        assert "$defs" not in schema and schema["properties"]["context"]["type"] == "object"


def test_a_swarm_of_one_has_no_handoff_tool() -> None:
    swarm = Swarm([Agent(text_model("solo"), agent_id="solo")])
    assert [t.name for t in swarm.member("solo").tools] == []
    result = arun(swarm.run("hi"))
    assert (result.status, result.agent, result.text) == ("completed", "solo", "solo")


def test_a_handoff_passes_the_turn_with_its_message_and_is_recorded() -> None:
    swarm, models = three(a=ScriptedModel([handoff("b", "please take it")]))
    result = arun(swarm.run("hello"))
    assert (result.status, result.agent, result.text) == ("completed", "b", "b answers")
    assert result.handoffs == [Handoff("a", "b", "please take it")]
    assert result.stop_reason == "end_turn" and result.iterations == 2
    kinds = [(m.role, m.metadata.get("kind")) for m in result.messages]
    assert kinds == [
        ("user", None),
        ("assistant", None),
        ("tool", None),
        ("assistant", HANDOFF_KIND),
        ("user", HANDOFF_MESSAGE_KIND),
        ("assistant", None),
    ]
    given = result.messages[4]
    assert "please take it" in given.text and given.metadata["to_agent"] == "b"
    assert result.messages[2].text == "Handed off to b."
    # b saw the whole conversation, ending with the handoff message, under its own prompt.
    call = models["b"].calls[0]
    assert call.system_prompt == "you are b" and call.messages[-1].text == given.text
    assert is_well_formed(result.messages)


@pytest.mark.parametrize("target", ["a", "zed"], ids=["self", "unknown"])
def test_a_handoff_to_itself_or_an_unknown_member_is_a_tool_error_the_model_sees(
    target: str,
) -> None:
    seen: list[Message] = []

    def a(messages: list[Message], tools: Any) -> Message | str:
        recent = since_my_turn(messages)
        if not recent:
            return handoff(target)
        seen.extend(recent)
        return "a stays"

    swarm, _ = three(a=FunctionModel(a))
    result = arun(swarm.run("hi"))
    assert (result.status, result.agent, result.text, result.handoffs) == (
        "completed",
        "a",
        "a stays",
        [],
    )
    error = seen[-1]
    assert error.role == "tool" and error.kind == "tool_error"
    assert "agent_name" in error.text
    assert is_well_formed(result.messages)


def test_a_turn_with_a_handoff_and_other_calls_answers_every_call_and_the_first_wins() -> None:
    ran: list[str] = []

    @tool
    def lookup(order: int) -> str:
        """Look an order up."""
        ran.append(f"lookup {order}")
        return "order 7: shipped"

    turn = Message(
        "assistant",
        "",
        tool_calls=[
            ToolCall("c1", "lookup", {"order": 7}),
            ToolCall("c2", HANDOFF_TOOL, {"agent_name": "zed", "message": "invalid"}),
            ToolCall("c3", HANDOFF_TOOL, {"agent_name": "b", "message": "to b"}),
            ToolCall("c4", HANDOFF_TOOL, {"agent_name": "c", "message": "to c"}),
        ],
    )
    agents = [
        Agent(ScriptedModel([turn]), agent_id="a", tools=[lookup]),
        Agent(text_model("b answers"), agent_id="b"),
        Agent(text_model("c answers"), agent_id="c"),
    ]
    result = arun(Swarm(agents).run("go"))
    assert (result.agent, result.handoffs) == ("b", [Handoff("a", "b", "to b")])
    assert ran == ["lookup 7"]
    answers = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert set(answers) == {"c1", "c2", "c3", "c4"}
    assert answers["c1"].text == "order 7: shipped"
    assert answers["c2"].kind == "tool_error"
    assert answers["c3"].text == "Handed off to b."
    assert answers["c4"].text.startswith("Ignored") and "b" in answers["c4"].text
    assert is_well_formed(result.messages)


def test_shared_context_is_kept_per_member_and_given_to_the_next_member() -> None:
    given: list[str] = []

    def b(messages: list[Message], tools: Any) -> Message:
        given.append(messages[-1].text)
        return handoff("c", "finish", {"refund": True, "order": 43})

    def c(messages: list[Message], tools: Any) -> str:
        given.append(messages[-1].text)
        return "c done"

    swarm, _ = three(
        a=ScriptedModel([handoff("b", "check", {"order": 42, "tags": ["vip"]})]),
        b=FunctionModel(b),
        c=FunctionModel(c),
    )
    result = arun(swarm.run("hi"))
    expected = {"a": {"order": 42, "tags": ["vip"]}, "b": {"order": 43, "refund": True}}
    assert result.context == expected
    assert json.loads(given[0].split("Shared context:\n")[1]) == {"a": expected["a"]}
    assert json.loads(given[1].split("Shared context:\n")[1]) == expected
    assert [h.to_agent for h in result.handoffs] == ["b", "c"]


def test_each_member_keeps_its_own_system_prompt_and_tools() -> None:
    @tool
    def only_b() -> str:
        """Only b has this."""
        return "b's"

    a = FunctionModel(lambda messages, tools: handoff("b") if len(messages) == 1 else "a")
    b = FunctionModel(lambda messages, tools: "b")
    swarm = Swarm(
        [
            Agent(a, agent_id="a", system_prompt="A prompt"),
            Agent(b, agent_id="b", system_prompt="B prompt", tools=[only_b]),
        ]
    )
    arun(swarm.run("hi"))
    assert a.calls[0].system_prompt == "A prompt"
    assert [t.name for t in a.calls[0].tools] == [HANDOFF_TOOL]
    assert b.calls[0].system_prompt == "B prompt"
    assert [t.name for t in b.calls[0].tools] == ["only_b", HANDOFF_TOOL]
    assert len(a.calls) == 1  # the gate closed a's run: its model was not asked again


def test_the_original_agents_are_left_as_they_were() -> None:
    original = Agent(text_model("x"), agent_id="x")
    swarm = Swarm([original, Agent(text_model("y"), agent_id="y")])
    arun(swarm.run("hi"))
    assert original.tools == () and original.messages == []
    assert swarm.member("x") is not original


def test_a_new_prompt_without_a_handoff_message_goes_to_the_active_member() -> None:
    def a(messages: list[Message], tools: Any) -> Message | str:
        user = last_user(messages)
        assert user is not None
        return handoff("b") if user.text == "first" else "a again"

    swarm, _ = three(a=FunctionModel(a))
    assert arun(swarm.run("first")).agent == "b"
    second = arun(swarm.run("second"))
    assert (second.agent, second.handoffs) == ("b", [])
    assert [m.text for m in second.messages if m.role == "user"][-1] == "second"


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda a, b: Swarm([]), "at least one"),
        (lambda a, b: Swarm([a, Agent(text_model("z"), agent_id="a")]), "unique"),
        (lambda a, b: Swarm([a, b], entry="zed"), "entry"),
        (lambda a, b: Swarm([a, "b"]), "Agent"),  # type: ignore[list-item]
        (lambda a, b: Swarm(a), "list"),
        (lambda a, b: Swarm([a, b], max_handoffs=-1), "max_handoffs"),
        (lambda a, b: Swarm([a, b], max_iterations=0), "max_iterations"),
        (lambda a, b: Swarm([a, b], node_timeout=0), "node_timeout"),
        (lambda a, b: Swarm([a, b], execution_timeout=True), "execution_timeout"),
        (lambda a, b: Swarm([a, b], repetition_min_agents=1), "repetition_min_agents"),
        (lambda a, b: Swarm([a, b], swarm_id=""), "swarm_id"),
    ],
    ids=[
        "empty",
        "duplicate-ids",
        "unknown-entry",
        "not-an-agent",
        "not-a-list",
        "negative-handoffs",
        "zero-iterations",
        "zero-timeout",
        "bool-timeout",
        "min-agents",
        "empty-id",
    ],
)
def test_bad_constructor_arguments_are_invalid_argument(build: Any, fragment: str) -> None:
    a, b = Agent(text_model("a"), agent_id="a"), Agent(text_model("b"), agent_id="b")
    with pytest.raises(AgentError) as caught:
        build(a, b)
    assert caught.value.code == "INVALID_ARGUMENT"
    assert fragment in str(caught.value)


def test_a_member_tool_named_like_the_handoff_tool_is_refused() -> None:
    @tool(name=HANDOFF_TOOL)
    def mine(agent_name: str) -> str:
        """A clashing tool."""
        return agent_name

    with pytest.raises(AgentError) as caught:
        Swarm([Agent(text_model("a"), agent_id="a", tools=[mine]), Agent(text_model("b"))])
    assert caught.value.code == "INVALID_ARGUMENT" and HANDOFF_TOOL in str(caught.value)


def test_a_member_with_structured_output_is_refused() -> None:
    class Out(BaseModel):
        answer: str

    with pytest.raises(AgentError) as caught:
        Swarm([Agent(text_model("a"), agent_id="a", response_format=Out)])
    assert caught.value.code == "INVALID_ARGUMENT" and "response_format" in str(caught.value)


def test_bad_run_arguments_are_refused_with_codes() -> None:
    swarm, _ = three()
    for call, code in [
        (swarm.run(Message("assistant", "x")), "INVALID_ARGUMENT"),
        (swarm.run("x", checkpointer=object(), thread_id="t"), "INVALID_ARGUMENT"),
        (swarm.run("x", thread_id="../up"), "THREAD_ID_INVALID"),
        (swarm.run("x", decisions=["approve"]), "HITL_DECISION"),  # type: ignore[arg-type]
        (swarm.run("x", checkpointer=swarm._own_checkpointer), "INVALID_ARGUMENT"),
    ]:
        with pytest.raises(AgentError) as caught:
            arun(call)
        assert caught.value.code == code


def test_one_run_at_a_time_per_swarm_instance() -> None:
    async def scenario() -> str:
        started, release = asyncio.Event(), asyncio.Event()

        async def slow(messages: list[Message], tools: Any) -> str:
            started.set()
            await release.wait()
            return "slow done"

        swarm = Swarm([Agent(FunctionModel(slow), agent_id="s")])
        first = asyncio.create_task(swarm.run("one"))
        await started.wait()
        with pytest.raises(AgentError) as caught:
            await swarm.run("two")
        release.set()
        assert caught.value.code == "AGENT_BUSY"
        return (await first).text

    assert arun(scenario()) == "slow done"
