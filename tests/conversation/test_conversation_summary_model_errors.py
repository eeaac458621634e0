"""The conversation managers: a summary model's bad answer is a clear error."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from framework_agents import Message, ModelError, SummarizingConversationManager, ToolSpec


class _Answering:
    """A model (by protocol) whose ``complete`` returns ``value`` as it is."""

    def __init__(self, value: Any) -> None:
        self.value = value

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], *, system_prompt: Any = None
    ) -> Any:
        return self.value


def _chat(n: int) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)]


@pytest.mark.parametrize(
    "value",
    [None, "plain text", Message("user", "not the model's turn")],
    ids=["none", "str", "user-message"],
)
def test_a_summary_model_that_answers_no_assistant_message_is_a_model_error(value: Any) -> None:
    manager = SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent=0, model=_Answering(value)
    )
    with pytest.raises(ModelError, match="summary model"):
        asyncio.run(manager.reduce(_chat(6)))
    assert manager.last_summary is None
