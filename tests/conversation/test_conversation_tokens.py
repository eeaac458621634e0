"""SlidingWindowConversationManager(max_tokens=...): a window bounded in tokens too."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from async_helper import arun
from framework_agents import (
    Agent,
    AgentError,
    Message,
    ScriptedModel,
    SlidingWindowConversationManager,
    ToolCall,
    is_well_formed,
    repair_history,
)
from framework_agents.conversation import TokenCounter, estimate_tokens
from framework_agents.conversation._cut import pinned_end
from history_strategies import histories
from property_budget import examples


class WordCounter:
    """A tokenizer of the test: words, plus 3 a tool call and 2 a message; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        self.calls += 1
        return sum(len(m.text.split()) + 3 * len(m.tool_calls) + 2 for m in messages)


def _count(counter: TokenCounter | None, messages: list[Message]) -> int:
    if counter is None:
        return estimate_tokens(messages)
    return asyncio.run(counter.count_tokens(messages))


def test_the_estimate_is_characters_over_four_rounded_up_plus_four_a_message() -> None:
    assert estimate_tokens([]) == 0
    assert estimate_tokens([Message("user", "")]) == 4
    assert estimate_tokens([Message("user", "abcde")]) == 2 + 4
    call = ToolCall("c1", "add", {"a": 1})  # "add" + '{"a": 1}': 3 + 8 characters
    assert estimate_tokens([Message("assistant", "", tool_calls=[call])]) == 3 + 4
    assert estimate_tokens([Message("user", "abcd"), Message("user", "abcd")]) == 2 * (1 + 4)


def test_a_counting_model_is_a_token_counter_and_others_are_refused() -> None:
    assert isinstance(WordCounter(), TokenCounter)
    with pytest.raises(AgentError) as info:
        SlidingWindowConversationManager(max_tokens=10, tokenizer=ScriptedModel([]))  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "max_tokens", [0, -1, "100", 1.5, True], ids=["zero", "negative", "str", "float", "bool"]
)
def test_bad_max_tokens(max_tokens: Any) -> None:
    with pytest.raises(AgentError) as info:
        SlidingWindowConversationManager(max_tokens=max_tokens)
    assert info.value.code == "INVALID_ARGUMENT"


def test_the_oldest_messages_go_until_the_rest_fits() -> None:
    history = [
        Message("user" if i % 2 == 0 else "assistant", "word " * 10, id=f"m{i}") for i in range(8)
    ]
    counter = WordCounter()
    manager = SlidingWindowConversationManager(max_tokens=40, tokenizer=counter)
    out = asyncio.run(manager.apply(history))
    assert [m.id for m in out] == ["m5", "m6", "m7"]  # 12 tokens each
    assert counter.calls <= 5  # a bisection, not one count a cut
    assert "max_tokens=40" in repr(manager)
    estimated = SlidingWindowConversationManager(max_tokens=51)  # 17 a message: 50 characters
    assert asyncio.run(estimated.apply(history)) == out


def test_pins_and_the_newest_user_turn_stay_even_over_the_bound() -> None:
    history = [
        Message("system", "rules " * 50, id="sys"),
        Message("user", "old", id="u0"),
        Message("assistant", "old answer", id="a0"),
        Message("user", "question " * 50, id="u1"),
    ]
    out = asyncio.run(SlidingWindowConversationManager(pin_first=1, max_tokens=10).apply(history))
    assert [m.id for m in out] == ["sys", "u1"]


def test_an_agent_commits_a_history_within_the_bound() -> None:
    manager = SlidingWindowConversationManager(max_tokens=40)
    answer = "a fairly long answer " * 4  # 84 characters: 25 tokens with a prompt's 6
    agent = Agent(ScriptedModel([answer] * 3), conversation_manager=manager)
    for prompt in ("one", "two", "three"):
        arun(agent.run(prompt))
        assert estimate_tokens(agent.messages) <= 40
    assert [m.text for m in agent.messages] == ["three", answer]


@settings(max_examples=examples(150), deadline=None)
@given(
    history=histories(well_formed=False, max_groups=16),
    window=st.integers(1, 40),
    pin=st.integers(0, 4),
    max_tokens=st.integers(1, 120),
    counted=st.booleans(),
)
def test_the_window_is_well_formed_in_order_and_within_the_bound(
    history: list[Message], window: int, pin: int, max_tokens: int, counted: bool
) -> None:
    counter = WordCounter() if counted else None
    manager = SlidingWindowConversationManager(
        window_size=window, pin_first=pin, per_turn=True, max_tokens=max_tokens, tokenizer=counter
    )
    repaired = repair_history(history)
    pinned = pinned_end(repaired, pin)
    newest = next((m for m in reversed(repaired[pinned:]) if m.role == "user"), None)
    floor = [*repaired[:pinned], *([newest] if newest is not None else [])]
    for name in ("apply", "before_model", "reduce"):
        out = asyncio.run(getattr(manager, name)(history))
        assert is_well_formed(out)
        assert out[:pinned] == repaired[:pinned], "a pinned message was lost"
        position = {m.id: i for i, m in enumerate(repaired)}
        assert [position[m.id] for m in out] == sorted(position[m.id] for m in out), "order"
        if newest is not None:
            assert newest in out, "the newest user turn was cut"
        if _count(counter, floor) <= max_tokens:
            assert _count(counter, out) <= max_tokens, name
        else:
            assert out == floor  # over the bound: only the pins and the newest user turn
