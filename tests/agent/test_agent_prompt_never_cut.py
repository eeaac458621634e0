"""Property: nothing the user said last is ever cut to fit the context window."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import (
    Agent,
    FunctionModel,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from framework_agents.errors import ContextOverflowError
from framework_agents.models._base import ToolSpec

MANAGERS = st.sampled_from(["sliding", "sliding-pinned", "summarizing"])


def manager(kind: str) -> Any:
    if kind == "sliding":
        return SlidingWindowConversationManager(window_size=40)
    if kind == "sliding-pinned":
        return SlidingWindowConversationManager(window_size=40, pin_first=1, per_turn=True)
    return SummarizingConversationManager(summary_ratio=0.5, preserve_recent=0)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    kind=MANAGERS,
    earlier=st.lists(st.integers(1, 60), min_size=0, max_size=8),
    prompt=st.integers(1, 200),
    limit=st.integers(20, 250),
)
def test_the_newest_prompt_is_sent_whole_or_the_run_fails_and_commits_nothing(
    kind: str, earlier: list[int], prompt: int, limit: int
) -> None:
    sent: list[list[Message]] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        sent.append(list(messages))
        if sum(len(m.text) for m in messages) > limit:
            raise ContextOverflowError("too long")
        return "ok"

    agent = Agent(FunctionModel(answer), conversation_manager=manager(kind))
    for size in earlier:
        with contextlib.suppress(ContextOverflowError):
            asyncio.run(agent.run("e" * size))
    before = agent.messages
    sent.clear()
    text = "p" * prompt
    try:
        result = asyncio.run(agent.run(text))
    except ContextOverflowError:
        assert agent.messages == before  # nothing committed
    else:
        assert any(m.role == "user" and m.text == text for m in result.messages)
    assert sent and all(sent)  # the model was called, never with no message
    for messages in sent:  # every call carried the prompt, uncut
        assert [m.text for m in messages if m.role == "user"][-1] == text
