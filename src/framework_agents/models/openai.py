"""``OpenAIModel``: the OpenAI Chat Completions API, and every server that speaks it.

Built on the official ``openai`` SDK (extra ``openai``), imported only when a model is made,
so ``import framework_agents`` never loads it. Any OpenAI-compatible server (llama.cpp,
vLLM, Ollama, LM Studio, DeepSeek, ...) works through ``base_url``.

Mapping, both ways:

- ``system_prompt`` becomes a leading system message; system messages inside the history
  are sent where they stand (Chat Completions accepts them anywhere).
- Assistant tool calls are sent as ``tool_calls`` with JSON argument strings; the model's
  argument strings are parsed back into dicts. Text that is not a JSON object is kept as
  ``{"_raw": text}`` and the reason in ``metadata["tool_args_errors"][call_id]``: no tool
  accepts ``_raw``, so the agent answers the call with a tool error and the run goes on.
- ``reasoning_content`` (llama.cpp, DeepSeek, vLLM; ``reasoning`` on some servers) becomes a
  :class:`ReasoningBlock`. Reasoning is not sent back unless ``send_reasoning=True``.
- ``metadata["usage"]`` holds ``input_tokens``, ``output_tokens``, ``total_tokens`` and the
  provider's own numbers under ``raw``; ``metadata["stop_reason"]`` the normalised finish
  reason (``end_turn``, ``max_tokens``, ``tool_use``, ...), ``metadata["finish_reason"]``
  the provider's.
- Errors: see :mod:`framework_agents.models._common` (context overflow ->
  ``ContextOverflowError``, everything else -> ``ModelError`` with a ``MODEL_*`` code).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ModelError
from ..messages import Message, ReasoningBlock, TextBlock, ToolCall, new_id
from ._base import ModelChunk, ReasoningDelta, TextDelta, ToolSpec
from ._common import parse_tool_arguments, require_module
from ._provider import ProviderModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel", "from_openai_message", "to_openai_messages", "to_openai_tools"]

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}


def to_openai_messages(
    messages: Sequence[Message],
    *,
    system_prompt: str | None = None,
    send_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Our history as Chat Completions ``messages``."""
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    for msg in messages:
        if msg.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.text}
            )
        elif msg.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": msg.text}
            if msg.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.args)},
                    }
                    for call in msg.tool_calls
                ]
                if not msg.text:
                    entry["content"] = None
            if send_reasoning and msg.reasoning:
                entry["reasoning_content"] = "".join(b.text for b in msg.reasoning)
            out.append(entry)
        else:
            out.append({"role": msg.role, "content": msg.text})
    return out


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Chat Completions ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in tools
    ]


def _usage(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    usage: dict[str, Any] = {
        "input_tokens": prompt if isinstance(prompt, int) else 0,
        "output_tokens": completion if isinstance(completion, int) else 0,
    }
    total = raw.get("total_tokens")
    usage["total_tokens"] = (
        total if isinstance(total, int) else usage["input_tokens"] + usage["output_tokens"]
    )
    usage["raw"] = {k: v for k, v in raw.items() if v is not None}
    return usage


def _build_message(
    *,
    text: str,
    reasoning: str,
    calls: Sequence[tuple[str | None, str, str | Mapping[str, Any] | None]],
    finish_reason: str | None,
    usage: object,
    extra: Mapping[str, Any],
) -> Message:
    tool_calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for call_id, name, raw_args in calls:
        cid = call_id if call_id and call_id not in seen else new_id()
        seen.add(cid)
        args, problem = parse_tool_arguments(raw_args)
        if problem is not None:
            errors[cid] = problem
        tool_calls.append(ToolCall(cid, name, args))
    metadata: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if finish_reason is not None:
        metadata["finish_reason"] = finish_reason
        metadata["stop_reason"] = _STOP_REASONS.get(finish_reason, finish_reason)
    mapped_usage = _usage(usage)
    if mapped_usage is not None:
        metadata["usage"] = mapped_usage
    if errors:
        metadata["tool_args_errors"] = errors
    content: str | list[TextBlock | ReasoningBlock] = text
    if reasoning:
        content = [ReasoningBlock(reasoning)] + ([TextBlock(text)] if text else [])
    return Message("assistant", content, tool_calls=tool_calls, metadata=metadata)


def _reasoning_of(part: Mapping[str, Any]) -> str:
    value = part.get("reasoning_content")
    if value is None:
        value = part.get("reasoning")
    return value if isinstance(value, str) else ""


def from_openai_message(completion: Mapping[str, Any]) -> Message:
    """A Chat Completions response (as a dict) as our assistant message."""
    choices = completion.get("choices") or []
    if not choices:
        raise ModelError("the server returned a completion without choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    calls = []
    for call in msg.get("tool_calls") or []:
        function = call.get("function") or {}
        calls.append((call.get("id"), function.get("name") or "", function.get("arguments")))
    text = msg.get("content") or ""
    refusal = msg.get("refusal")
    if not text and isinstance(refusal, str):
        text = refusal
    return _build_message(
        text=text,
        reasoning=_reasoning_of(msg),
        calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=completion.get("usage"),
        extra={
            "model": completion.get("model"),
            "response_id": completion.get("id"),
            "refusal": refusal,
        },
    )


class _StreamState:
    """Accumulates Chat Completions stream chunks into one message."""

    def __init__(self) -> None:
        self.events = 0
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[list[Any]] = []  # [id, name, [argument pieces]], in order opened
        self._by_index: dict[int, list[Any]] = {}
        self.finish_reason: str | None = None
        self.usage: object = None
        self.model: str | None = None
        self.response_id: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[ModelChunk]:
        self.events += 1
        out: list[ModelChunk] = []
        self.model = chunk.get("model") or self.model
        self.response_id = chunk.get("id") or self.response_id
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) == 0:
                self._feed_choice(choice, out)
        return out

    def _feed_choice(self, choice: Mapping[str, Any], out: list[ModelChunk]) -> None:
        """Take in the first choice of a chunk; its text and reasoning pieces go to ``out``."""
        delta = choice.get("delta") or {}
        thinking = _reasoning_of(delta)
        if thinking:
            self.reasoning.append(thinking)
            out.append(ReasoningDelta(thinking))
        content = delta.get("content")
        if content:
            self.text.append(content)
            out.append(TextDelta(content))
        for call in delta.get("tool_calls") or []:
            self._feed_call(call)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def _feed_call(self, call: Mapping[str, Any]) -> None:
        """Take in a tool-call delta: an id, a name, a piece of the arguments."""
        slot = self._slot(call)
        function = call.get("function") or {}
        slot[0] = slot[0] or call.get("id")
        slot[1] = slot[1] or function.get("name") or ""
        if function.get("arguments"):
            slot[2].append(function["arguments"])

    def _slot(self, call: Mapping[str, Any]) -> list[Any]:
        """The call a tool-call delta continues, or a new one.

        Deltas are matched by ``index``; a delta that brings a different ``id`` starts a new
        call even under a known index (Ollama labels every call of a turn ``index: 0``), and
        a delta without an index (Gemini) continues the last call unless it brings an id.
        """
        index, call_id = call.get("index"), call.get("id")
        slot = self._by_index.get(index) if isinstance(index, int) else None
        if slot is None and not isinstance(index, int) and self.calls:
            slot = self.calls[-1]
        if slot is None or (call_id and slot[0] and call_id != slot[0]):
            slot = [None, "", []]
            self.calls.append(slot)
        if isinstance(index, int):
            self._by_index[index] = slot
        return slot

    def message(self) -> Message:
        calls = [(c[0], c[1], "".join(c[2])) for c in self.calls]
        return _build_message(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            extra={"model": self.model, "response_id": self.response_id},
        )


def _is_official(base_url: str | None) -> bool:
    return base_url is None or "api.openai.com" in base_url


class OpenAIModel(ProviderModel["AsyncOpenAI"]):
    """A model behind the OpenAI Chat Completions API (OpenAI or any compatible server)."""

    _client_class = "AsyncOpenAI"
    _sdk_error = "OpenAIError"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = 120.0,
        max_retries: int = 2,
        extra_body: Mapping[str, Any] | None = None,
        send_reasoning: bool = False,
        stream_usage: bool = True,
    ) -> None:
        self._sdk = require_module("openai", "openai")
        self.model = model
        if base_url is None and client is not None:
            base_url = str(client.base_url).rstrip("/")  # the endpoint a given client talks to
        self.base_url = base_url
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self.send_reasoning = send_reasoning
        self.stream_usage = stream_usage
        official = _is_official(base_url)
        self._provider = "OpenAI" if official else f"the server at {base_url}"
        if api_key is None and not official and not os.environ.get("OPENAI_API_KEY"):
            api_key = "unused"  # local servers need no key, but the SDK insists on one
        self._open_clients(
            client, api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIModel({self.model!r}{where})"

    def _params(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(
                messages, system_prompt=system_prompt, send_reasoning=self.send_reasoning
            ),
        }
        if tools:
            params["tools"] = to_openai_tools(tools)
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            # OpenAI's own API deprecated ``max_tokens``; compatible servers know only it.
            field = "max_completion_tokens" if _is_official(self.base_url) else "max_tokens"
            params[field] = self.max_tokens
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    def _stream_params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = super()._stream_params(params)
        if self.stream_usage:
            params["stream_options"] = {"include_usage": True}
        return params

    def _create(self, client: AsyncOpenAI) -> Callable[..., Awaitable[Any]]:
        create: Callable[..., Awaitable[Any]] = client.chat.completions.create
        return create

    def _read(self, answer: Mapping[str, Any]) -> Message:
        return from_openai_message(answer)

    def _reader(self) -> _StreamState:
        return _StreamState()
