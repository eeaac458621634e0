"""AnthropicModel mapping, streaming and error mapping, on recorded responses.

No Anthropic server runs here (and no network is reachable), so these tests drive the real
``anthropic`` SDK through its own HTTP hook: ``http_client=httpx2.AsyncClient(transport=
httpx2.MockTransport(...))`` answers with bodies written in the Messages API's documented
wire format (``fixtures/anthropic_*``). The SDK itself builds each request and parses each
response and event stream; only the server is replaced.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="needs the 'anthropic' extra")
httpx2 = pytest.importorskip("httpx2", reason="needs the 'anthropic' extra (httpx2 comes with it)")

from models_replay import Replay, json_response, sse_response  # noqa: E402

from framework_agents.errors import ContextOverflowError, InvalidArgumentError, ModelError  # noqa: E402
from framework_agents.messages import Message, ReasoningBlock, TextBlock, ToolCall  # noqa: E402
from framework_agents.models import (  # noqa: E402
    AnthropicModel,
    ModelChunk,
    ModelDone,
    ReasoningDelta,
    TextDelta,
    ToolSpec,
)
from framework_agents.models.anthropic import (  # noqa: E402
    OPENING_USER_TEXT,
    REDACTED_THINKING_PREFIX,
    from_anthropic_message,
    to_anthropic_messages,
)

WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def make_model(replay: Replay, **kwargs: Any) -> AnthropicModel:
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test",
        base_url="http://replay.invalid",
        max_retries=0,
        http_client=replay.client(),
    )
    return AnthropicModel("claude-test", client=client, **kwargs)


async def collect(stream: AsyncIterator[ModelChunk]) -> list[ModelChunk]:
    return [chunk async for chunk in stream]


def test_request_folds_system_and_tool_results() -> None:
    history = [
        Message("system", "You are terse."),
        Message("user", "Weather in Paris and Rome?"),
        Message(
            "assistant",
            [ReasoningBlock("two calls", "sig-1"), TextBlock("Checking.")],
            tool_calls=[
                ToolCall("t1", "get_weather", {"city": "Paris"}),
                ToolCall("t2", "get_weather", {"city": "Rome"}),
            ],
        ),
        Message("tool", "sunny", tool_call_id="t1", name="get_weather"),
        Message(
            "tool",
            "boom",
            tool_call_id="t2",
            name="get_weather",
            metadata={"kind": "tool_error"},
        ),
        Message("system", "Mention the temperature."),
        Message("user", "And?"),
    ]
    replay = Replay(json_response("anthropic_text.json"))
    model = make_model(replay, max_tokens=256, temperature=0.5)
    asyncio.run(model.complete(history, [WEATHER], system_prompt="Be kind."))
    body = replay.body()
    assert replay.requests[0].url.path == "/v1/messages"
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.5
    # Every system text, wherever it stood, folded in order into `system`.
    assert body["system"] == "Be kind.\n\nYou are terse.\n\nMention the temperature."
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": WEATHER.parameters,
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "two calls", "signature": "sig-1"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        # Both results and the user's next text in ONE user message, results first.
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": True},
                {"type": "text", "text": "And?"},
            ],
        },
    ]


def test_history_opening_on_assistant_gets_a_user_turn_and_empty_text_is_dropped() -> None:
    system, turns = to_anthropic_messages(
        [
            Message("assistant", "Summary of earlier talk.", metadata={"kind": "summary"}),
            Message("user", ""),
            Message("assistant", [ReasoningBlock("unsigned, from another provider")]),
            Message("user", "Go on."),
        ]
    )
    assert system is None
    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Summary of earlier talk."}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
    ]


def test_thinking_budget_becomes_a_config() -> None:
    replay = Replay(json_response("anthropic_text.json"))
    asyncio.run(make_model(replay, thinking=2048).complete([Message("user", "hi")], []))
    assert replay.body()["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(InvalidArgumentError):
        make_model(Replay(), thinking=True)


def test_response_keeps_thinking_redacted_text_and_tool_use() -> None:
    replay = Replay(json_response("anthropic_tool_use.json"))
    message = asyncio.run(make_model(replay).complete([Message("user", "Paris?")], [WEATHER]))
    assert message.reasoning == [
        ReasoningBlock(
            "The user asks for the weather; I should call the tool.",
            "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDQmjSfA==",
        ),
        ReasoningBlock(
            "",
            REDACTED_THINKING_PREFIX
            + "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
        ),
    ]
    assert message.text == "I'll look that up."
    assert message.tool_calls == [
        ToolCall(
            "toolu_01A09q90qw90lq917835lq9", "get_weather", {"city": "Paris", "unit": "celsius"}
        )
    ]
    assert message.metadata["stop_reason"] == "tool_use"
    usage = message.metadata["usage"]
    assert usage["input_tokens"] == 472 + 0 + 128  # uncached + cache writes + cache reads
    assert usage["output_tokens"] == 91
    assert usage["raw"]["cache_read_input_tokens"] == 128


def test_thinking_goes_back_byte_for_byte() -> None:
    recorded = json.loads(json_response("anthropic_tool_use.json").content)
    message = Message.from_json(from_anthropic_message(recorded).to_json())  # stored and loaded
    _, turns = to_anthropic_messages([Message("user", "Paris?"), message])
    assert turns[1] == {"role": "assistant", "content": recorded["content"]}


def test_plain_text_response_is_a_string() -> None:
    replay = Replay(json_response("anthropic_text.json"))
    message = asyncio.run(make_model(replay).complete([Message("user", "Paris?")], []))
    assert message.content == "It is sunny in Paris, 21 °C."
    assert message.metadata["stop_reason"] == "end_turn"
    assert message.metadata["usage"]["total_tokens"] == 624


def test_stream_assembles_thinking_signature_text_and_tool_input() -> None:
    replay = Replay(sse_response("anthropic_stream.sse"))
    chunks = asyncio.run(collect(make_model(replay).stream([Message("user", "Paris?")], [WEATHER])))
    assert replay.body()["stream"] is True
    assert [type(c) for c in chunks] == [
        ReasoningDelta,
        ReasoningDelta,
        TextDelta,
        TextDelta,
        ModelDone,
    ]
    done = chunks[-1]
    assert isinstance(done, ModelDone)
    message = done.message
    assert message.reasoning == [
        ReasoningBlock("Weather question, use the tool.", "EqQBCgIYAhIMsig==")
    ]
    assert message.text == "Checking now."
    assert message.tool_calls == [ToolCall("toolu_stream_1", "get_weather", {"city": "Paris"})]
    assert message.metadata["stop_reason"] == "tool_use"
    assert message.metadata["usage"]["input_tokens"] == 380
    assert message.metadata["usage"]["output_tokens"] == 58
    assert message.metadata["response_id"] == "msg_01Stream"


def test_stream_error_event_is_mapped() -> None:
    replay = Replay(sse_response("anthropic_stream_error.sse"))
    with pytest.raises(ModelError) as info:
        asyncio.run(collect(make_model(replay).stream([Message("user", "hi")], [])))
    assert info.value.code == "MODEL_SERVER"
    assert type(info.value).default_code == info.value.code  # the class of its code
    assert isinstance(info.value.__cause__, anthropic.APIStatusError)


@pytest.mark.parametrize(
    ("status", "fixture", "error_type", "code"),
    [
        (400, "anthropic_prompt_too_long_error.json", ContextOverflowError, "CONTEXT_OVERFLOW"),
        (401, "anthropic_auth_error.json", ModelError, "MODEL_AUTH"),
        (429, "anthropic_rate_limit_error.json", ModelError, "MODEL_RATE_LIMIT"),
        (529, "anthropic_overloaded_error.json", ModelError, "MODEL_SERVER"),
    ],
    ids=["prompt-too-long", "auth", "rate-limit", "overloaded"],
)
def test_http_errors_are_mapped(
    status: int, fixture: str, error_type: type[Exception], code: str
) -> None:
    for streaming in (False, True):
        replay = Replay(json_response(fixture, status))
        model = make_model(replay)
        history = [Message("user", "hi")]
        with pytest.raises(error_type) as info:
            if streaming:
                asyncio.run(collect(model.stream(history, [])))
            else:
                asyncio.run(model.complete(history, []))
        assert getattr(info.value, "code", None) == code
        assert getattr(type(info.value), "default_code", None) == code  # the class of its code
        assert isinstance(info.value.__cause__, anthropic.APIStatusError)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx2.ConnectError("connection refused"), "MODEL_CONNECTION"),
        (httpx2.ReadTimeout("read timed out"), "MODEL_TIMEOUT"),
    ],
    ids=["connect", "timeout"],
)
def test_transport_errors_are_mapped(exc: Exception, code: str) -> None:
    with pytest.raises(ModelError) as info:
        asyncio.run(make_model(Replay(exc)).complete([Message("user", "hi")], []))
    assert info.value.code == code
    assert type(info.value).default_code == info.value.code  # the class of its code


def test_missing_credentials_are_an_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    replay = Replay()
    client = anthropic.AsyncAnthropic(base_url="http://replay.invalid", http_client=replay.client())
    with pytest.raises(ModelError) as info:
        asyncio.run(AnthropicModel("c", client=client).complete([Message("user", "hi")], []))
    assert info.value.code == "MODEL_AUTH"
    assert type(info.value).default_code == info.value.code  # the class of its code
    assert replay.requests == []


def test_a_json_body_to_a_stream_request_is_an_error_not_an_empty_answer() -> None:
    replay = Replay(json_response("anthropic_text.json"))
    with pytest.raises(ModelError) as info:
        asyncio.run(collect(make_model(replay).stream([Message("user", "hi")], [])))
    assert "no stream events" in str(info.value)
