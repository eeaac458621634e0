"""Review pass over the agent loop: bad input is a clear AgentError, histories stay well formed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework_agents import (
    Agent,
    FunctionModel,
    HitlDecisionError,
    InvalidArgumentError,
    Message,
    ModelError,
    ScriptedModel,
    ToolCall,
    tool,
)


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


@tool(requires_approval=True)
def danger(x: int) -> str:
    """A tool that needs approval."""
    return f"ran {x}"


def _approval_agent() -> Agent:
    script = [Message("assistant", tool_calls=[ToolCall("c1", "danger", {"x": 1})]), "done"]
    return Agent(ScriptedModel(script), tools=[danger])


@pytest.mark.parametrize(
    "decisions",
    [
        pytest.param(["danger"], id="list"),
        pytest.param("danger", id="str"),
        pytest.param({1: "approve"}, id="int-key"),
        pytest.param({None: "approve"}, id="none-key"),
    ],
)
def test_decisions_that_are_not_a_str_keyed_mapping_are_hitl_decision(decisions: Any) -> None:
    agent = _approval_agent()
    with pytest.raises(HitlDecisionError) as info:
        arun(agent.run("go", decisions=decisions))
    assert info.value.code == "HITL_DECISION"
    assert not agent.running and agent.messages == []


def test_bad_decisions_in_a_stream_are_hitl_decision_too() -> None:
    agent = _approval_agent()

    async def consume() -> None:
        async for _ in agent.stream("go", decisions=[1, 2]):  # type: ignore[arg-type]
            pass

    with pytest.raises(HitlDecisionError):
        arun(consume())
    assert not agent.running


def test_resume_checks_the_decisions_container_too(tmp_path: Any) -> None:
    from framework_agents import FileCheckpointer

    agent = _approval_agent()
    with pytest.raises(HitlDecisionError):
        arun(agent.resume("t1", ["danger"], checkpointer=FileCheckpointer(tmp_path)))  # type: ignore[arg-type]


# -- test models: a wrong answer is a clear error -------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(None, id="none"),
        pytest.param(5, id="int"),
        pytest.param(Message("user", "nope"), id="user-message"),
        pytest.param({"role": "assistant"}, id="dict"),
    ],
)
def test_a_function_model_answer_of_the_wrong_shape_is_a_model_error(answer: Any) -> None:
    agent = Agent(FunctionModel(lambda m, t: answer))
    with pytest.raises(ModelError) as info:
        arun(agent.run("q"))
    assert info.value.code == "MODEL_ERROR"
    assert agent.messages == [] and not agent.running


def test_a_scripted_reply_of_an_unknown_kind_is_refused_when_built() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ScriptedModel(["ok", 5])  # type: ignore[list-item]
    assert "reply 1" in str(info.value)
    with pytest.raises(InvalidArgumentError):
        ScriptedModel("not a list")  # a bare string would be a script of characters
    # What a reply may be: text, a message, a function, an exception to raise.
    ScriptedModel(["ok", Message("assistant", "x"), lambda m, t: "y", ModelError("down")])


def test_a_scripted_function_reply_of_the_wrong_shape_is_a_model_error() -> None:
    agent = Agent(ScriptedModel([lambda m, t: None]))
    with pytest.raises(ModelError):
        arun(agent.run("q"))
