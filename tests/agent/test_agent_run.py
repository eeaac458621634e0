"""The run loop: memory, repair, seeding, managers, overflow, busy, limits, results."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from async_helper import arun
from framework_agents import (
    Agent,
    AgentBusyError,
    ContextOverflowError,
    FunctionModel,
    InMemoryMemory,
    InMemoryStorage,
    InvalidArgumentError,
    MaxTurnsError,
    Message,
    ModelError,
    NullConversationManager,
    ReasoningBlock,
    ScriptedModel,
    SessionManager,
    SlidingWindowConversationManager,
    TextBlock,
    ToolCall,
    is_well_formed,
    tool,
)
from framework_agents.agent._loop import MAX_OVERFLOW_RETRIES


def call(name: str, args: dict[str, Any] | None = None, cid: str = "c1") -> Message:
    return Message("assistant", "", tool_calls=[ToolCall(cid, name, args or {})])


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


class SpyManager:
    """A NullConversationManager that records how it was used."""

    def __init__(self, *, shrink: bool = True) -> None:
        self.shrink = shrink
        self.calls: list[tuple[str, int]] = []

    async def apply(self, messages: Sequence[Message]) -> list[Message]:
        self.calls.append(("apply", len(messages)))
        return list(messages)

    async def before_model(self, messages: Sequence[Message]) -> list[Message]:
        self.calls.append(("before_model", len(messages)))
        return list(messages)

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        self.calls.append(("reduce", len(messages)))
        return list(messages[1:]) if self.shrink else list(messages)


def test_defaults_are_filled_in() -> None:
    model = ScriptedModel([])
    agent = Agent(model)
    assert isinstance(agent.memory, InMemoryMemory)
    assert isinstance(agent.conversation_manager, SlidingWindowConversationManager)
    assert agent.model is model
    assert agent.tools == ()
    assert agent.session_manager is None
    assert agent.system_prompt is None
    assert agent.agent_id == "default"
    assert agent.output_version == "v0"
    assert agent.messages == []
    assert agent.timeline == []
    assert dict(agent.state) == {}


def test_three_runs_leave_exactly_six_messages() -> None:
    memory = InMemoryMemory()
    agent = Agent(ScriptedModel(["one", "two", "three"]), memory=memory)

    async def go() -> list[Message]:
        for prompt in ("a", "b", "c"):
            await agent.run(prompt)
        return await memory.load()

    stored = arun(go())
    assert [(m.role, m.text) for m in stored] == [
        ("user", "a"),
        ("assistant", "one"),
        ("user", "b"),
        ("assistant", "two"),
        ("user", "c"),
        ("assistant", "three"),
    ]
    assert [m.id for m in agent.messages] == [m.id for m in stored]


def test_each_run_sees_the_previous_history() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model)
    arun(agent.run("a"))
    arun(agent.run("b"))
    assert [m.text for m in model.calls[1].messages] == ["a", "one", "b"]
    model.assert_complete()


def test_unanswered_call_is_repaired_before_the_model_sees_it() -> None:
    memory = InMemoryMemory()
    broken = [Message("user", "do it"), call("echo", {"text": "x"}, cid="lost")]
    model = ScriptedModel(["done"])
    agent = Agent(model, memory=memory, tools=[echo])

    async def go() -> list[Message]:
        # Bypass load-time repair to prove the agent repairs on its own.
        await memory.save(broken)
        return (await agent.run("again")).messages

    stored = arun(go())
    sent = model.calls[0].messages
    assert is_well_formed(sent)
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].tool_call_id == "lost" and sent[2].kind == "interrupted"
    assert is_well_formed(stored)


class RawMemory:
    """A memory that returns exactly what it was given (no repair of its own)."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = list(messages)

    async def load(self) -> list[Message]:
        return list(self.messages)

    async def save(self, messages: Sequence[Message]) -> None:
        self.messages.extend(messages)

    async def clear(self) -> None:
        self.messages = []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_history_sent_and_stored_is_well_formed(history_strategy: Any, data: Any) -> None:
    history = data.draw(history_strategy(well_formed=False))
    memory = RawMemory(history)
    model = ScriptedModel([call("echo", {"text": "t"}, cid="fresh"), "ok"])
    agent = Agent(
        model, memory=memory, tools=[echo], conversation_manager=NullConversationManager()
    )
    arun(agent.run("go"))
    assert all(is_well_formed(c.messages) for c in model.calls)
    assert is_well_formed(memory.messages)


def test_initial_messages_seed_only_an_empty_memory_on_the_first_run() -> None:
    seed = [Message("user", "hi"), Message("assistant", "hello")]
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, initial_messages=seed)
    assert [m.text for m in agent.messages] == ["hi", "hello"]
    arun(agent.run("a"))
    arun(agent.run("b"))
    assert [m.text for m in model.calls[0].messages] == ["hi", "hello", "a"]
    assert [m.text for m in agent.messages] == ["hi", "hello", "a", "one", "b", "two"]


def test_initial_messages_are_ignored_when_memory_has_history() -> None:
    memory = InMemoryMemory()
    arun(memory.save([Message("user", "old"), Message("assistant", "reply")]))
    model = ScriptedModel(["new"])
    agent = Agent(model, memory=memory, initial_messages=[Message("user", "seed")])
    arun(agent.run("q"))
    assert [m.text for m in model.calls[0].messages] == ["old", "reply", "q"]


def test_manager_before_model_every_turn_and_apply_after_the_run() -> None:
    manager = SpyManager()
    model = ScriptedModel([call("echo", {"text": "x"}), "done"])
    agent = Agent(model, tools=[echo], conversation_manager=manager)
    arun(agent.run("go"))
    assert [name for name, _ in manager.calls] == ["before_model", "before_model", "apply"]
    assert manager.calls[-1] == ("apply", 4)


def test_context_overflow_triggers_reduce_and_a_retry() -> None:
    memory = InMemoryMemory()
    old = [
        Message("user", f"old {i}") if i % 2 == 0 else Message("assistant", "r") for i in range(6)
    ]
    arun(memory.save(old))
    model = ScriptedModel([ContextOverflowError("too long"), "fits now"])
    manager = SlidingWindowConversationManager(window_size=40)
    agent = Agent(model, memory=memory, conversation_manager=manager)
    result = arun(agent.run("new question"))
    assert result.text == "fits now"
    first, second = model.calls
    assert len(first.messages) == 7
    assert len(second.messages) < len(first.messages)
    assert second.messages[-1].text == "new question"
    assert [m.text for m in result.messages][-2:] == ["new question", "fits now"]
    model.assert_complete()


def test_context_overflow_uses_the_managers_reduce() -> None:
    manager = SpyManager()
    model = ScriptedModel([ContextOverflowError("x"), "ok"])
    agent = Agent(model, conversation_manager=manager, initial_messages=[Message("user", "a")])
    arun(agent.run("b"))
    assert ("reduce", 2) in manager.calls


def test_context_overflow_reraised_when_reduce_cannot_shrink() -> None:
    memory = InMemoryMemory()
    agent = Agent(
        ScriptedModel([ContextOverflowError("too long")]),
        memory=memory,
        conversation_manager=NullConversationManager(),
    )
    with pytest.raises(ContextOverflowError):
        arun(agent.run("q"))
    assert arun(memory.load()) == []


def test_context_overflow_retries_are_bounded() -> None:
    overflow = ContextOverflowError("still too long")
    model = ScriptedModel([overflow] * (MAX_OVERFLOW_RETRIES + 2))
    seed = [Message("user", str(i)) for i in range(20)]
    agent = Agent(model, conversation_manager=SpyManager(), initial_messages=seed)
    with pytest.raises(ContextOverflowError):
        arun(agent.run("q"))
    assert len(model.calls) == MAX_OVERFLOW_RETRIES + 1


def test_concurrent_run_is_refused_immediately() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message], tools: list[Any]) -> str:
        entered.set()
        await release.wait()
        return "slow done"

    agent = Agent(FunctionModel(slow))

    async def go() -> None:
        first = asyncio.create_task(agent.run("one"))
        await entered.wait()
        assert agent.running
        with pytest.raises(AgentBusyError) as info:
            await agent.run("two")
        assert info.value.code == "AGENT_BUSY"
        with pytest.raises(AgentBusyError):
            async for _ in agent.stream("three"):
                pass
        release.set()
        assert (await first).text == "slow done"
        assert not agent.running
        assert (await agent.run("four")).text == "slow done"

    arun(go())
    assert [m.text for m in agent.messages] == ["one", "slow done", "four", "slow done"]


def test_max_turns_stops_a_tool_loop_and_commits_nothing() -> None:
    def always_call(messages: list[Message], tools: list[Any]) -> Message:
        return call("echo", {"text": "again"}, cid=f"c{len(messages)}")

    model = FunctionModel(always_call)
    agent = Agent(model, tools=[echo], max_turns=3)
    with pytest.raises(MaxTurnsError) as info:
        arun(agent.run("loop"))
    assert info.value.code == "MAX_TURNS"
    assert len(model.calls) == 3
    assert agent.messages == []
    assert arun(agent.memory.load()) == []
    assert agent.timeline[-1].label == "error:MAX_TURNS"


def test_a_failed_run_leaves_history_untouched_and_the_agent_usable() -> None:
    model = ScriptedModel(["first", ModelError("provider down"), "third"])
    agent = Agent(model)
    arun(agent.run("a"))
    before = agent.messages
    with pytest.raises(ModelError):
        arun(agent.run("b"))
    assert agent.messages == before
    assert arun(agent.run("c")).text == "third"
    assert [m.text for m in agent.messages] == ["a", "first", "c", "third"]


def test_a_model_returning_a_non_assistant_message_is_a_model_error() -> None:
    agent = Agent(FunctionModel(lambda m, t: Message("user", "nope")))
    with pytest.raises((ModelError, TypeError)):
        arun(agent.run("q"))


def test_system_prompt_and_tool_specs_reach_the_model() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, tools=[echo], system_prompt="Be brief.")
    arun(agent.run("q"))
    assert model.calls[0].system_prompt == "Be brief."
    assert model.calls[0].tools == [echo.spec]


def test_result_fields() -> None:
    model = ScriptedModel(
        [
            call("echo", {"text": "x"}),
            Message(
                "assistant", "final", metadata={"usage": {"input_tokens": 7, "output_tokens": 3}}
            ),
        ]
    )
    agent = Agent(model, tools=[echo], initial_messages=[Message("user", "earlier")])
    result = arun(agent.run("go"))
    assert result.text == "final"
    assert result.stop_reason == "end_turn"
    assert result.turns == 2
    assert result.usage.requests == 2
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 3)
    assert result.usage.total_tokens == 10
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages == agent.messages
    assert result.run_id


def test_stop_reason_comes_from_the_model_when_given() -> None:
    model = ScriptedModel([Message("assistant", "cut", metadata={"stop_reason": "max_tokens"})])
    assert arun(Agent(model).run("q")).stop_reason == "max_tokens"


def test_prompt_may_be_a_user_message_or_none() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model)
    prompt = Message("user", [TextBlock("blocks")])
    arun(agent.run(prompt))
    assert agent.messages[0].id == prompt.id
    arun(agent.run(None))  # continue without a new user turn
    assert [m.text for m in model.calls[1].messages] == ["blocks", "one"]
    with pytest.raises(InvalidArgumentError):
        arun(agent.run(Message("assistant", "not a prompt")))
    with pytest.raises(InvalidArgumentError):
        arun(agent.run(42))  # type: ignore[arg-type]


def test_output_version_v0_stores_plain_text_final_turns() -> None:
    thinking = Message(
        "assistant", [ReasoningBlock("hmm", "sig"), TextBlock("answer")], metadata={"x": 1}
    )
    tool_turn = Message(
        "assistant",
        [ReasoningBlock("need a tool", "sig2")],
        tool_calls=[ToolCall("c1", "echo", {"text": "a"})],
    )
    agent = Agent(ScriptedModel([tool_turn, thinking]), tools=[echo])
    result = arun(agent.run("q"))
    final = result.messages[-1]
    assert final.content == "answer" and final.metadata == {"x": 1}
    # Tool-calling turns keep their (signed) reasoning in both versions.
    assert result.messages[1].reasoning == [ReasoningBlock("need a tool", "sig2")]


def test_output_version_v1_keeps_reasoning_on_final_turns() -> None:
    thinking = Message("assistant", [ReasoningBlock("hmm", "sig"), TextBlock("answer")])
    agent = Agent(ScriptedModel([thinking]), output_version="v1")
    final = arun(agent.run("q")).messages[-1]
    assert final.reasoning == [ReasoningBlock("hmm", "sig")]
    assert final.text == "answer"


def test_with_tools_clones_with_fresh_memory_state_and_no_session() -> None:
    @tool
    def extra() -> str:
        """An extra tool."""
        return "x"

    model = ScriptedModel(["one", "two"])
    agent = Agent(model, tools=[echo], state={"k": 1}, system_prompt="sp", agent_id="a1")
    agent.session_manager = SessionManager("s", InMemoryStorage())  # a clone never carries it
    clone = agent.with_tools(extra)
    assert [t.name for t in clone.tools] == ["echo", "extra"]
    assert [t.name for t in agent.tools] == ["echo"]
    assert clone.memory is not agent.memory
    assert clone.session_manager is None
    assert dict(clone.state) == {}
    assert clone.model is agent.model
    assert (clone.system_prompt, clone.agent_id) == ("sp", "a1")
    agent.session_manager = None
    arun(agent.run("a"))
    arun(clone.run("b"))
    assert [m.text for m in clone.messages] == ["b", "two"]


def test_timeline_records_every_run() -> None:
    agent = Agent(ScriptedModel(["one", ModelError("x"), "three"]))
    arun(agent.run("a"))
    with pytest.raises(ModelError):
        arun(agent.run("b"))
    arun(agent.run("c"))
    entries = agent.timeline
    assert [e.rev for e in entries] == [1, 2, 3]
    assert [e.kind for e in entries] == ["run", "run", "run"]
    assert [e.label for e in entries] == [None, "error:MODEL_ERROR", None]
    assert all(e.at.utcoffset() == timedelta(0) for e in entries)
    assert entries[0].at <= entries[1].at <= entries[2].at
    entry = agent._history.record("edit", "fixed a typo")
    assert (entry.rev, entry.kind, entry.label) == (4, "edit", "fixed a typo")


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"output_version": "v2"}, id="output-version"),
        pytest.param({"tools": [echo, echo]}, id="duplicate-tools"),
        pytest.param({"response_format": dict}, id="response-format"),
        pytest.param({"max_turns": 0}, id="max-turns"),
        pytest.param({"output_retries": -1}, id="output-retries"),
        pytest.param({"agent_id": ""}, id="agent-id"),
        pytest.param({"decide": "approve"}, id="decide"),
        pytest.param({"initial_messages": ["hi"]}, id="initial-messages"),
        pytest.param({"system_prompt": 3}, id="system-prompt"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        Agent(ScriptedModel([]), **kwargs)
    assert info.value.code == "INVALID_ARGUMENT"


def test_a_model_without_complete_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        Agent(object())  # type: ignore[arg-type]


def test_plain_functions_are_accepted_as_tools() -> None:
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    model = ScriptedModel([call("shout", {"text": "hi"}), "ok"])
    result = arun(Agent(model, tools=[shout]).run("q"))
    assert result.messages[2].text == "HI"


def test_a_checkpointer_that_is_not_one_is_not_silently_ignored() -> None:
    agent = Agent(ScriptedModel(["x"]))
    with pytest.raises(InvalidArgumentError, match="Checkpointer"):
        arun(agent.run("q", checkpointer=object(), thread_id="t1"))  # type: ignore[arg-type]
    assert not agent.running


def test_a_grounding_memory_is_grounded_on_the_incoming_prompt() -> None:
    class Grounding(RawMemory):
        async def ground(self, messages: Sequence[Message], prompt: str) -> list[Message]:
            return [Message("system", f"facts about {prompt}"), *messages]

    model = ScriptedModel(["ok"])
    arun(Agent(model, memory=Grounding([])).run("Alice"))
    assert [m.text for m in model.calls[0].messages] == ["facts about Alice", "Alice"]


@pytest.mark.parametrize("prompt", ["", "   \n", Message("user", ""), Message("user", " ")])
def test_a_blank_prompt_is_refused_and_stores_nothing(prompt: Any) -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model)
    with pytest.raises(InvalidArgumentError, match="empty"):
        arun(agent.run(prompt))
    assert agent.messages == [] and arun(agent.memory.load()) == []
    assert model.calls == []


def test_run_sync_runs_without_an_event_loop_and_refuses_inside_one() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))
    result = agent.run_sync("hello")
    assert result.text == "one"
    assert [m.text for m in agent.messages] == ["hello", "one"]

    async def inside() -> None:
        with pytest.raises(InvalidArgumentError, match="await agent"):
            agent.run_sync("again")

    asyncio.run(inside())
    assert agent.run_sync("again").text == "two"
