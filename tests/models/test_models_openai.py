"""OpenAIModel mapping, streaming and error mapping, on recorded responses.

The real ``openai`` SDK sends every request; an ``httpx2.MockTransport`` behind its
``http_client=`` hook answers with bodies from ``fixtures/`` (see its README: the llama.cpp
ones are recordings of the local server, the others follow the documented wire format).
The real round trip against a running server is in ``test_models_local.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="needs the 'openai' extra")
httpx2 = pytest.importorskip("httpx2", reason="needs the 'openai' extra (httpx2 comes with it)")

from models_replay import Replay, json_response, sse_response  # noqa: E402

from framework_agents.errors import ContextOverflowError, ModelError  # noqa: E402
from framework_agents.messages import Message, ReasoningBlock, TextBlock, ToolCall  # noqa: E402
from framework_agents.models import (  # noqa: E402
    ModelChunk,
    ModelDone,
    OpenAIModel,
    ReasoningDelta,
    TextDelta,
    ToolSpec,
)
from framework_agents.models.openai import from_openai_message, to_openai_messages  # noqa: E402

WEATHER = ToolSpec(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def make_model(
    replay: Replay, base_url: str = "https://api.openai.com/v1", **kwargs: Any
) -> OpenAIModel:
    # The transport answers every request: nothing leaves this process, whatever the URL.
    client = openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=base_url,
        max_retries=0,
        http_client=replay.client(),
    )
    return OpenAIModel("test-model", client=client, **kwargs)


async def collect(stream: AsyncIterator[ModelChunk]) -> list[ModelChunk]:
    return [chunk async for chunk in stream]


HISTORY = [
    Message("user", "Weather in Paris?"),
    Message(
        "assistant",
        [ReasoningBlock("need the tool"), TextBlock("Checking.")],
        tool_calls=[ToolCall("c1", "get_weather", {"city": "Paris"})],
    ),
    Message("tool", "sunny", tool_call_id="c1", name="get_weather"),
    Message("system", "Answer in French."),
    Message("assistant", "Il fait beau."),
    Message("user", "Merci"),
]


def test_request_maps_history_tools_and_options() -> None:
    replay = Replay(json_response("llamacpp_completion.json"))
    model = make_model(replay, temperature=0.1, max_tokens=32)
    asyncio.run(model.complete(HISTORY, [WEATHER], system_prompt="Be brief."))
    body = replay.body()
    assert replay.requests[0].url.path == "/v1/chat/completions"
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.1
    # OpenAI's own endpoint wants max_completion_tokens (max_tokens is deprecated there).
    assert body["max_completion_tokens"] == 32
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "system", "content": "Answer in French."},
        {"role": "assistant", "content": "Il fait beau."},
        {"role": "user", "content": "Merci"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]


def test_compatible_server_gets_max_tokens_and_reasoning_when_asked() -> None:
    replay = Replay(json_response("llamacpp_completion.json"))
    client = openai.AsyncOpenAI(
        api_key="x", base_url="http://replay.invalid/v1", http_client=replay.client()
    )
    model = OpenAIModel(
        "m",
        client=client,  # its base_url says which server this is
        max_tokens=7,
        send_reasoning=True,
        extra_body={"cache_prompt": True},
    )
    asyncio.run(model.complete(HISTORY[:3], []))
    body = replay.body()
    assert body["max_tokens"] == 7 and "max_completion_tokens" not in body
    assert body["cache_prompt"] is True
    assert "tools" not in body
    assert body["messages"][1]["reasoning_content"] == "need the tool"


def test_tool_only_assistant_turn_sends_null_content() -> None:
    msgs = [Message("assistant", "", tool_calls=[ToolCall("c", "t", {})])]
    assert to_openai_messages(msgs)[0]["content"] is None


def test_recorded_llamacpp_completion_maps_text_usage_and_stop_reason() -> None:
    replay = Replay(json_response("llamacpp_completion.json"))
    message = asyncio.run(make_model(replay).complete([Message("user", "Say hello.")], []))
    assert message.role == "assistant"
    assert message.content == "I'm here to help with any math or science-related"
    assert message.tool_calls == []
    usage = message.metadata["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (23, 12, 35)
    assert message.metadata["stop_reason"] == "max_tokens"
    assert message.metadata["finish_reason"] == "length"
    assert message.metadata["response_id"] == "chatcmpl-lEs1QdARrbsPf5PmJkCbdU7idgrxO9Cs"


def test_tool_calls_reasoning_and_invalid_arguments() -> None:
    replay = Replay(json_response("openai_tool_calls.json"))
    message = asyncio.run(make_model(replay).complete([Message("user", "Paris, Rome?")], [WEATHER]))
    assert message.reasoning == [ReasoningBlock("The user wants two cities; call the tool twice.")]
    assert message.text == "Checking both cities."
    paris, rome = message.tool_calls
    assert paris == ToolCall("call_paris", "get_weather", {"city": "Paris"})
    # Broken JSON from the model is kept verbatim, and the reason recorded: no crash.
    assert rome.id == "call_rome"
    assert rome.args == {"_raw": '{"city": "Rome"'}
    assert "not valid JSON" in message.metadata["tool_args_errors"]["call_rome"]
    assert message.metadata["stop_reason"] == "tool_use"
    assert message.metadata["usage"]["input_tokens"] == 41


def test_mapped_tool_calls_round_trip_to_the_wire() -> None:
    completion = json.loads(json_response("openai_tool_calls.json").content)
    message = from_openai_message(completion)
    sent = to_openai_messages([message])[0]
    assert [c["id"] for c in sent["tool_calls"]] == ["call_paris", "call_rome"]
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    # Unparseable arguments go back as valid JSON, so the next request is never rejected.
    assert json.loads(sent["tool_calls"][1]["function"]["arguments"]) == {"_raw": '{"city": "Rome"'}


@pytest.mark.parametrize(
    ("raw", "args", "problem"),
    [
        ("", {}, False),
        ("{}", {}, False),
        ('{"a": 1}', {"a": 1}, False),
        ("[1, 2]", {"_raw": "[1, 2]"}, True),
        ('"text"', {"_raw": '"text"'}, True),
        ("{oops", {"_raw": "{oops"}, True),
    ],
    ids=["empty", "empty-object", "object", "list", "string", "broken"],
)
def test_argument_parsing(raw: str, args: dict[str, Any], problem: bool) -> None:
    completion = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "x", "function": {"name": "t", "arguments": raw}}],
                },
            }
        ]
    }
    message = from_openai_message(completion)
    assert message.tool_calls[0].args == args
    assert ("tool_args_errors" in message.metadata) is problem


def test_missing_or_duplicate_call_ids_are_replaced() -> None:
    completion = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "same", "function": {"name": "a", "arguments": "{}"}},
                        {"id": "same", "function": {"name": "b", "arguments": "{}"}},
                        {"function": {"name": "c", "arguments": "{}"}},
                    ],
                }
            }
        ]
    }
    ids = [c.id for c in from_openai_message(completion).tool_calls]
    assert ids[0] == "same" and len(set(ids)) == 3 and all(ids)


def test_completion_without_choices_is_a_model_error() -> None:
    with pytest.raises(ModelError) as info:
        from_openai_message({"choices": []})
    assert info.value.code == "MODEL_ERROR"


def test_stream_of_recorded_llamacpp_text() -> None:
    replay = Replay(sse_response("llamacpp_stream.sse"))
    chunks = asyncio.run(collect(make_model(replay).stream([Message("user", "Say hello.")], [])))
    assert replay.body()["stream"] is True
    assert replay.body()["stream_options"] == {"include_usage": True}
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    done = chunks[-1]
    assert isinstance(done, ModelDone)
    assert len(deltas) >= 2
    assert "".join(d.text for d in deltas) == done.message.text != ""
    assert done.message.metadata["usage"]["output_tokens"] == 6
    assert done.message.metadata["stop_reason"] == "max_tokens"
    assert sum(isinstance(c, ModelDone) for c in chunks) == 1


def test_stream_assembles_reasoning_text_and_tool_calls() -> None:
    replay = Replay(sse_response("openai_stream_tool_calls.sse"))
    chunks = asyncio.run(collect(make_model(replay).stream([Message("user", "?")], [WEATHER])))
    assert [type(c).__name__ for c in chunks] == [
        "ReasoningDelta",
        "ReasoningDelta",
        "TextDelta",
        "TextDelta",
        "ModelDone",
    ]
    assert "".join(c.text for c in chunks if isinstance(c, ReasoningDelta)) == (
        "Need the weather tool."
    )
    done = chunks[-1]
    assert isinstance(done, ModelDone)
    message = done.message
    assert message.reasoning == [ReasoningBlock("Need the weather tool.")]
    assert message.text == "Let me check."
    assert message.tool_calls[0] == ToolCall("call_a", "get_weather", {"city": "Paris"})
    assert message.tool_calls[1].name == "get_time"
    assert message.tool_calls[1].args == {"_raw": "not json"}
    assert set(message.metadata["tool_args_errors"]) == {"call_b"}
    assert message.metadata["stop_reason"] == "tool_use"
    assert message.metadata["usage"]["total_tokens"] == 83


def test_stream_error_event_is_a_model_error() -> None:
    replay = Replay(sse_response("openai_stream_error.sse"))
    with pytest.raises(ModelError) as info:
        asyncio.run(collect(make_model(replay).stream([Message("user", "?")], [])))
    assert "overloaded" in str(info.value)
    assert info.value.code == "MODEL_SERVER"  # from the error's type, the stream began 200
    assert type(info.value).default_code == info.value.code  # the class of its code
    assert isinstance(info.value.__cause__, openai.APIError)


@pytest.mark.parametrize(
    ("status", "fixture", "error_type", "code"),
    [
        (400, "openai_context_length_error.json", ContextOverflowError, "CONTEXT_OVERFLOW"),
        (400, "llamacpp_overflow_error.json", ContextOverflowError, "CONTEXT_OVERFLOW"),
        (400, "openai_bad_request_error.json", ModelError, "MODEL_BAD_REQUEST"),
        (401, "openai_auth_error.json", ModelError, "MODEL_AUTH"),
        (429, "openai_rate_limit_error.json", ModelError, "MODEL_RATE_LIMIT"),
        (404, "openai_bad_request_error.json", ModelError, "MODEL_NOT_FOUND"),
        (500, "openai_bad_request_error.json", ModelError, "MODEL_SERVER"),
    ],
    ids=["overflow", "llamacpp-overflow", "bad-request", "auth", "rate-limit", "404", "500"],
)
def test_http_errors_are_mapped(
    status: int, fixture: str, error_type: type[Exception], code: str
) -> None:
    replay = Replay(json_response(fixture, status))
    with pytest.raises(error_type) as info:
        asyncio.run(make_model(replay).complete([Message("user", "hi")], []))
    assert getattr(info.value, "code", None) == code
    assert getattr(type(info.value), "default_code", None) == code  # the class of its code
    assert isinstance(info.value.__cause__, openai.APIStatusError)
    assert info.value.__cause__.status_code == status


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx2.ConnectError("connection refused"), "MODEL_CONNECTION"),
        (httpx2.ReadTimeout("read timed out"), "MODEL_TIMEOUT"),
    ],
    ids=["connect", "timeout"],
)
def test_transport_errors_are_mapped(exc: Exception, code: str) -> None:
    replay = Replay(exc)
    with pytest.raises(ModelError) as info:
        asyncio.run(make_model(replay).complete([Message("user", "hi")], []))
    assert info.value.code == code
    assert type(info.value).default_code == info.value.code  # the class of its code
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


def test_stream_http_error_is_mapped_too() -> None:
    replay = Replay(json_response("llamacpp_overflow_error.json", 400))
    with pytest.raises(ContextOverflowError):
        asyncio.run(collect(make_model(replay).stream([Message("user", "hi")], [])))


def test_missing_api_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelError) as info:
        OpenAIModel("gpt-4o-mini")
    assert info.value.code == "MODEL_AUTH"
    assert type(info.value).default_code == info.value.code  # the class of its code


def test_local_base_url_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1")
    assert "127.0.0.1:9" in repr(model)


def test_invalid_arguments_reach_the_agent_as_a_tool_error() -> None:
    from framework_agents import Agent, tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @tool
    def get_time(zone: str = "UTC") -> str:
        """The time in a zone."""
        return f"noon {zone}"

    # The agent streams from models that can; the second turn answers in plain text.
    replay = Replay(
        sse_response("openai_stream_tool_calls.sse"), sse_response("llamacpp_stream.sse")
    )
    agent = Agent(make_model(replay), tools=[get_weather, get_time])
    result = asyncio.run(agent.run("Weather and time?"))
    results = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert results["call_a"].text == "sunny in Paris"
    # get_time got {"_raw": "not json"}: validation failed, the model is told, the run went on.
    assert results["call_b"].kind == "tool_error"
    sent = replay.body(1)["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["call_a", "call_b"]
    assert json.loads(sent[1]["tool_calls"][1]["function"]["arguments"]) == {"_raw": "not json"}
    assert result.text == json_text_of_recorded_stream()


def json_text_of_recorded_stream() -> str:
    text = []
    for line in sse_response("llamacpp_stream.sse").content.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text.append(choice["delta"].get("content") or "")
    return "".join(text)


def test_a_json_body_to_a_stream_request_is_an_error_not_an_empty_answer() -> None:
    replay = Replay(json_response("llamacpp_completion.json"))
    with pytest.raises(ModelError) as info:
        asyncio.run(collect(make_model(replay).stream([Message("user", "hi")], [])))
    assert "no stream events" in str(info.value)
