"""The provider mappings: shapes real OpenAI-compatible servers send.

The SSE bodies below follow what public bug reports show servers sending (no recording
was possible here): Ollama labels every streamed tool call of a turn ``index: 0``, and
Gemini's OpenAI-compatible endpoint omits ``index``. Each goes through the real ``openai``
SDK behind an ``httpx2.MockTransport``; nothing leaves the process.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="needs the 'openai' extra")
httpx2 = pytest.importorskip("httpx2", reason="needs the 'openai' extra (httpx2 comes with it)")

from models_replay import Replay  # noqa: E402

from framework_agents.messages import Message, ToolCall  # noqa: E402
from framework_agents.models import ModelChunk, ModelDone, OpenAIModel  # noqa: E402


def _sse(*deltas: dict[str, Any], finish: str = "tool_calls") -> Any:
    lines = []
    for delta in deltas:
        chunk = {
            "id": "chatcmpl-r",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        lines.append(f"data: {json.dumps(chunk)}\n\n")
    last = {
        "id": "chatcmpl-r",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
    }
    lines.append(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n")
    return httpx2.Response(
        200, content="".join(lines).encode(), headers={"content-type": "text/event-stream"}
    )


def _call(index: int | None, cid: str | None, name: str | None, args: str) -> dict[str, Any]:
    call: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        call["index"] = index
    if cid is not None:
        call["id"] = cid
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return {"tool_calls": [call]}


def _streamed(response: Any) -> Message:
    replay = Replay(response)
    client = openai.AsyncOpenAI(
        api_key="sk-test", base_url="http://127.0.0.1:9/v1", http_client=replay.client()
    )
    model = OpenAIModel("m", client=client)

    async def collect(stream: AsyncIterator[ModelChunk]) -> list[ModelChunk]:
        return [chunk async for chunk in stream]

    chunks = asyncio.run(collect(model.stream([Message("user", "?")], [])))
    done = chunks[-1]
    assert isinstance(done, ModelDone)
    return done.message


PARIS = ToolCall("call_a", "get_weather", {"city": "Paris"})
TOKYO = ToolCall("call_b", "get_weather", {"city": "Tokyo"})


def test_parallel_calls_that_all_say_index_0_stay_apart() -> None:
    message = _streamed(
        _sse(
            _call(0, "call_a", "get_weather", '{"city": '),
            _call(0, None, None, '"Paris"}'),
            _call(0, "call_b", "get_weather", '{"city": "Tokyo"}'),
        )
    )
    assert message.tool_calls == [PARIS, TOKYO]
    assert "tool_args_errors" not in message.metadata


def test_calls_without_an_index_stay_apart_and_keep_their_order() -> None:
    message = _streamed(
        _sse(
            _call(None, "call_a", "get_weather", '{"city": '),
            _call(None, None, None, '"Paris"}'),
            _call(None, "call_b", "get_weather", '{"city": "Tokyo"}'),
        )
    )
    assert message.tool_calls == [PARIS, TOKYO]


def test_interleaved_indexed_calls_are_still_merged_by_index() -> None:
    message = _streamed(
        _sse(
            _call(0, "call_a", "get_weather", ""),
            _call(1, "call_b", "get_weather", '{"city": '),
            _call(0, None, None, '{"city": "Paris"}'),
            _call(1, None, None, '"Tokyo"}'),
        )
    )
    assert message.tool_calls == [PARIS, TOKYO]


@pytest.mark.parametrize("raw", [[1, 2], 5, True], ids=["list", "int", "bool"])
def test_tool_arguments_that_are_neither_text_nor_an_object_become_a_tool_error(raw: Any) -> None:
    from framework_agents.models.anthropic import from_anthropic_message
    from framework_agents.models.openai import from_openai_message

    openai_message = from_openai_message(
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "t", "arguments": raw},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    anthropic_message = from_anthropic_message(
        {"content": [{"type": "tool_use", "id": "c1", "name": "t", "input": raw}]}
    )
    for message in (openai_message, anthropic_message):
        assert message.tool_calls == [ToolCall("c1", "t", {"_raw": json.dumps(raw)})]
        assert "c1" in message.metadata["tool_args_errors"]
