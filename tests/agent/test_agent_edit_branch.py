"""edit_message and branch: history editing, independent forks, timeline entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from async_helper import arun
from framework_agents import (
    Agent,
    FileMemory,
    FunctionModel,
    InMemoryMemory,
    InMemoryStorage,
    Message,
    ScriptedModel,
    SessionManager,
    Snapshot,
    SnapshotData,
    TextBlock,
    ToolCall,
    is_well_formed,
    tool,
)
from framework_agents.errors import (
    InvalidArgumentError,
    MessageNotEditableError,
    MessageNotFoundError,
)


def echo_model() -> FunctionModel:
    return FunctionModel(lambda messages, tools: f"re: {messages[-1].text}")


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def tool_agent(**kwargs: Any) -> Agent:
    """An agent whose history is: user, assistant(call add), tool, assistant."""
    model = ScriptedModel(
        [
            Message("assistant", "", tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})]),
            "it is 3",
            *[lambda messages, tools: f"re: {messages[-1].text}"] * 5,
        ]
    )
    agent = Agent(model, tools=[add], memory=InMemoryMemory(), **kwargs)
    arun(agent.run("what is 1+2?"))
    return agent


# -- edit_message ---------------------------------------------------------------------------


def test_edit_by_id_index_and_negative_index() -> None:
    agent = tool_agent()
    msgs = agent.messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    edited = arun(agent.edit_message(msgs[0].id, "what is 2+2?"))
    assert edited.id == msgs[0].id and edited.role == "user"
    assert agent.messages[0].text == "what is 2+2?"
    arun(agent.edit_message(-1, "it is 4"))
    assert agent.messages[3].text == "it is 4"
    arun(agent.edit_message(2, "4"))  # a tool result keeps its pairing
    assert agent.messages[2].tool_call_id == "c1"
    assert is_well_formed(agent.messages)
    assert [m.id for m in agent.messages] == [m.id for m in msgs]
    edits = [e for e in agent.timeline if e.kind == "edit"]
    assert [e.label for e in edits] == [msgs[0].id, msgs[3].id, msgs[2].id]


def test_edit_keeps_memory_in_sync_and_the_model_sees_it() -> None:
    agent = tool_agent()
    arun(agent.edit_message(0, "what is 5+5?"))
    assert arun(agent.memory.load()) == agent.messages
    arun(agent.run("and?"))
    model = agent.model
    assert isinstance(model, ScriptedModel)
    assert model.calls[-1].messages[0].text == "what is 5+5?"


def test_edit_accepts_content_blocks() -> None:
    agent = tool_agent()
    arun(agent.edit_message(0, [TextBlock("block text")]))
    assert agent.messages[0].text == "block text"


def test_tool_call_message_is_not_editable() -> None:
    agent = tool_agent()
    before = agent.messages
    with pytest.raises(MessageNotEditableError) as info:
        arun(agent.edit_message(1, "changed"))
    assert info.value.code == "MESSAGE_NOT_EDITABLE"
    with pytest.raises(MessageNotEditableError):
        arun(agent.edit_message(before[1].id, "changed"))
    assert agent.messages == before
    assert all(e.kind != "edit" for e in agent.timeline)


@pytest.mark.parametrize("key", ["no-such-id", 4, -5, 100, -100], ids=str)
def test_unknown_message_is_not_found(key: str | int) -> None:
    agent = tool_agent()
    with pytest.raises(MessageNotFoundError) as info:
        arun(agent.edit_message(key, "x"))
    assert info.value.code == "MESSAGE_NOT_FOUND"


def test_edit_on_an_empty_history_is_not_found() -> None:
    with pytest.raises(MessageNotFoundError):
        arun(Agent(echo_model()).edit_message(0, "x"))


@pytest.mark.parametrize("key", [True, 1.0, None, b"id"], ids=["bool", "float", "none", "bytes"])
def test_bad_key_types_are_invalid(key: object) -> None:
    agent = tool_agent()
    with pytest.raises(InvalidArgumentError):
        arun(agent.edit_message(key, "x"))  # type: ignore[arg-type]


def test_bad_content_is_invalid_and_changes_nothing() -> None:
    agent = tool_agent()
    before = agent.messages
    with pytest.raises(InvalidArgumentError):
        arun(agent.edit_message(0, 42))
    with pytest.raises(InvalidArgumentError):
        arun(agent.edit_message(0, [{"type": "image"}]))
    assert agent.messages == before


def test_edit_saves_the_session() -> None:
    sm = SessionManager("s", InMemoryStorage())
    agent = tool_agent(session_manager=sm)
    arun(agent.edit_message(0, "edited"))
    latest = arun(sm.load_latest())
    assert latest is not None and latest.data.messages is not None
    assert latest.data.messages[0].text == "edited"


def test_edit_before_the_first_run_edits_the_restored_session() -> None:
    sm = SessionManager("s", InMemoryStorage())
    old = [Message("user", "old q", id="q"), Message("assistant", "old a", id="a")]
    arun(sm.save_latest(Snapshot(SnapshotData(messages=old))))
    model = echo_model()
    agent = Agent(model, session_manager=sm, initial_messages=[Message("user", "seed")])
    arun(agent.edit_message("q", "new q"))
    arun(agent.run("go"))
    assert texts(model.calls[0].messages) == ["new q", "old a", "go"]


# -- branch ---------------------------------------------------------------------------------


class Answer(BaseModel):
    value: int


def test_branch_shares_model_tools_middleware_and_format() -> None:
    class Mw:
        pass

    mw = Mw()
    agent = tool_agent(middleware=[mw])
    child = agent.branch("alt")
    assert child is not agent
    assert child.model is agent.model
    assert child.tools == agent.tools and child.tools[0] is agent.tools[0]
    assert child.middleware[0] is mw
    assert child.response_format is agent.response_format
    assert child.session_manager is None
    assert isinstance(child.memory, InMemoryMemory) and child.memory is not agent.memory
    assert child.messages == agent.messages


def test_branch_response_format_is_shared() -> None:
    agent = Agent(echo_model(), response_format=Answer)
    assert agent.branch("b").response_format is Answer


def test_branch_is_independent() -> None:
    agent = Agent(echo_model(), memory=InMemoryMemory())
    agent.state["nested"] = {"list": [1]}
    arun(agent.run("shared"))
    child = agent.branch("alt")
    child.state["nested"]["list"].append(2)
    child.state["only_child"] = True
    assert dict(agent.state) == {"nested": {"list": [1]}}
    arun(child.run("child turn"))
    arun(agent.run("parent turn"))
    assert texts(child.messages) == ["shared", "re: shared", "child turn", "re: child turn"]
    assert texts(agent.messages) == ["shared", "re: shared", "parent turn", "re: parent turn"]
    assert texts(arun(child.memory.load())) == texts(child.messages)
    assert texts(arun(agent.memory.load())) == texts(agent.messages)
    child.messages[0].metadata["x"] = 1  # the history copy is deep
    assert "x" not in agent.messages[0].metadata


def test_branch_never_writes_the_session() -> None:
    storage = InMemoryStorage()
    sm = SessionManager("s", storage)
    agent = Agent(echo_model(), session_manager=sm)
    arun(agent.run("one"))
    child = agent.branch("alt")
    arun(child.run("branch only"))
    latest = arun(sm.load_latest())
    assert latest is not None and texts(latest.data.messages or []) == ["one", "re: one"]


def test_branch_timelines() -> None:
    agent = Agent(echo_model())
    arun(agent.run("x"))
    child = agent.branch("try-b")
    parent_kinds = [(e.kind, e.label) for e in agent.timeline]
    child_kinds = [(e.kind, e.label) for e in child.timeline]
    assert parent_kinds[-1] == ("branch", "try-b")
    assert child_kinds[-1] == ("branch", "try-b")
    assert child_kinds[0] == parent_kinds[0]  # the branch remembers where it came from
    arun(child.run("y"))
    revs = [e.rev for e in child.timeline]
    assert revs == sorted(set(revs)) and revs[0] == 1


def test_branch_overrides(tmp_path: Path) -> None:
    agent = Agent(echo_model(), system_prompt="parent")
    arun(agent.run("x"))
    memory = FileMemory(tmp_path)
    other_model = echo_model()
    child = agent.branch(
        "terse", {"system_prompt": "Be terse.", "memory": memory, "model": other_model}
    )
    assert child.system_prompt == "Be terse."
    assert child.memory is memory
    assert child.model is other_model
    arun(child.run("y"))
    assert other_model.calls[0].system_prompt == "Be terse."
    assert texts(other_model.calls[0].messages) == ["x", "re: x", "y"]
    assert agent.system_prompt == "parent"


@pytest.mark.parametrize(
    "overrides",
    [{"not_an_arg": 1}, {"sessionManager": None}, "system_prompt"],
    ids=["unknown", "camel", "not-a-dict"],
)
def test_bad_branch_overrides_raise(overrides: Any) -> None:
    agent = Agent(echo_model())
    before = len(agent.timeline)
    with pytest.raises(InvalidArgumentError):
        agent.branch("b", overrides)
    assert len(agent.timeline) == before


def test_branch_label_must_be_a_string() -> None:
    with pytest.raises(InvalidArgumentError):
        Agent(echo_model()).branch(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("at", [1, -3], ids=["index", "negative-index"])
def test_branch_at_a_message_ends_its_history_there(at: int) -> None:
    agent = Agent(echo_model())
    arun(agent.run("first"))
    arun(agent.run("second"))
    child = agent.branch("from-first", at=at)
    assert texts(child.messages) == ["first", "re: first"]
    assert texts(agent.messages) == ["first", "re: first", "second", "re: second"]
    arun(child.run("other"))
    assert texts(child.messages) == ["first", "re: first", "other", "re: other"]
    assert texts(agent.messages)[-1] == "re: second"  # the parent is untouched


def test_branch_at_a_message_id_and_the_errors_of_a_bad_one() -> None:
    agent = Agent(echo_model())
    arun(agent.run("first"))
    first_id = agent.messages[0].id
    assert texts(agent.branch("b", at=first_id).messages) == ["first"]
    with pytest.raises(MessageNotFoundError):
        agent.branch("b", at="no-such-id")
    with pytest.raises(MessageNotFoundError):
        agent.branch("b", at=7)
    with pytest.raises(InvalidArgumentError, match="branch"):
        agent.branch("b", at=1.5)  # type: ignore[arg-type]
    assert [e.kind for e in agent.timeline].count("branch") == 1  # refusals record nothing


def test_a_branch_at_a_call_is_repaired_when_it_runs() -> None:
    call = Message("assistant", "", tool_calls=[ToolCall("c1", "lookup", {})])
    seed = [Message("user", "look"), call, Message("tool", "found", tool_call_id="c1")]
    agent = Agent(echo_model(), initial_messages=seed)
    child = agent.branch("cut", at=1)  # ends on the call, whose result is cut away
    result = arun(child.run("go on"))
    assert is_well_formed(result.messages)
    assert result.messages[2].metadata.get("kind") == "interrupted"
