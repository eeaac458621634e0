"""``AnthropicModel``: Claude through the Anthropic Messages API.

Built on the official ``anthropic`` SDK (extra ``anthropic``), imported only when a model is
made. Mapping, both ways:

- **System text.** ``system_prompt`` and every ``role="system"`` message, wherever it stands
  in the history, are folded in order into the ``system`` parameter (the Messages API has no
  system role inside ``messages``), separated by blank lines.
- **Tools.** Assistant tool calls are ``tool_use`` blocks; tool results become
  ``tool_result`` blocks of a user turn, and consecutive results (and a user text that
  follows them) are folded into ONE user message, results first, as the API requires. A
  result whose ``metadata["kind"]`` is ``"tool_error"`` is sent with ``is_error: true``.
- **Thinking.** ``thinking`` blocks come back as ``ReasoningBlock(text, signature)`` and are
  sent back byte for byte. ``redacted_thinking`` blocks are kept opaquely as
  ``ReasoningBlock("", signature="anthropic-redacted-thinking:<data>")`` and sent back as
  ``redacted_thinking``. Reasoning without a signature (from another provider) is not sent.
- **Turn order.** Consecutive turns of one role are merged; a history that opens on an
  assistant turn (e.g. a summary) gets a short user turn first, since the API wants the
  conversation to start with the user. An assistant turn that opens on thinking is not
  merged into the assistant turn before it (the API wants thinking to open the turn): a
  short user turn goes between them. Empty text is never sent.
- ``metadata["usage"]``: ``input_tokens`` (uncached + cache writes + cache reads, the API's
  definition of the prompt size), ``output_tokens``, ``total_tokens``, the raw numbers under
  ``raw``; ``metadata["stop_reason"]`` as the API says it.
- Errors: "prompt is too long" -> ``ContextOverflowError``; everything else -> ``ModelError``
  with a ``MODEL_*`` code (see :mod:`framework_agents.models._common`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import AgentError, InvalidArgumentError, ModelAuthError
from ..messages import Message, ReasoningBlock, TextBlock, ToolCall
from ._base import ModelChunk, ReasoningDelta, TextDelta, ToolSpec
from ._common import parse_tool_arguments, require_module
from ._provider import ProviderModel

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = [
    "REDACTED_THINKING_PREFIX",
    "AnthropicModel",
    "from_anthropic_message",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

#: Signature prefix that marks a stored ``redacted_thinking`` block (its data follows).
REDACTED_THINKING_PREFIX = "anthropic-redacted-thinking:"

#: Text of the user turn put before a history that opens on an assistant turn.
OPENING_USER_TEXT = "(conversation continued)"


_THINKING_TYPES = ("thinking", "redacted_thinking")


def _continued() -> dict[str, Any]:
    return {"type": "text", "text": OPENING_USER_TEXT}


def _assistant_blocks(msg: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    parts = [msg.content] if isinstance(msg.content, str) else msg.content
    for part in parts:
        if isinstance(part, str):
            if part:
                blocks.append({"type": "text", "text": part})
        elif isinstance(part, ReasoningBlock):
            sig = part.signature
            if sig is None:
                continue
            if sig.startswith(REDACTED_THINKING_PREFIX):
                data = sig[len(REDACTED_THINKING_PREFIX) :]
                blocks.append({"type": "redacted_thinking", "data": data})
            else:
                blocks.append({"type": "thinking", "thinking": part.text, "signature": sig})
        elif isinstance(part, TextBlock) and part.text:
            blocks.append({"type": "text", "text": part.text})
    for call in msg.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    return blocks


def _turn_of(msg: Message) -> tuple[str, list[dict[str, Any]]]:
    """The role and content blocks a user, tool or assistant message sends."""
    if msg.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.tool_call_id}
        if msg.text:
            result["content"] = msg.text
        if msg.kind == "tool_error":
            result["is_error"] = True
        return "user", [result]
    if msg.role == "user":
        return "user", [{"type": "text", "text": msg.text}] if msg.text else []
    return "assistant", _assistant_blocks(msg)


def _add_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add ``blocks`` to ``turns``: to the last turn when it has ``role``, else as a new one."""
    if not turns or turns[-1]["role"] != role:
        turns.append({"role": role, "content": blocks})
    elif role == "assistant" and blocks[0]["type"] in _THINKING_TYPES:
        # Merged, the thinking would no longer open the turn, which the API
        # requires of the turn before the newest tool results: keep both apart.
        turns.append({"role": "user", "content": [_continued()]})
        turns.append({"role": role, "content": blocks})
    else:
        turns[-1]["content"].extend(blocks)


def to_anthropic_messages(
    messages: Sequence[Message], *, system_prompt: str | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """Our history as the Messages API's ``(system, messages)``."""
    system: list[str] = [system_prompt] if system_prompt else []
    turns: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "system":
            if msg.text:
                system.append(msg.text)
            continue
        role, blocks = _turn_of(msg)
        if blocks:
            _add_turn(turns, role, blocks)
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [_continued()]})
    return ("\n\n".join(system) if system else None), turns


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as the Messages API's ``tools``."""
    return [
        {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
        for spec in tools
    ]


def _usage(raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, Mapping):
        return None

    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) else 0

    prompt = (
        count("input_tokens")
        + count("cache_creation_input_tokens")
        + count("cache_read_input_tokens")
    )
    output = count("output_tokens")
    return {
        "input_tokens": prompt,
        "output_tokens": output,
        "total_tokens": prompt + output,
        "raw": {k: v for k, v in raw.items() if v is not None},
    }


class _Blocks:
    """The content, tool calls, argument errors and skipped kinds of response blocks."""

    def __init__(self) -> None:
        self.content: list[TextBlock | ReasoningBlock] = []
        self.calls: list[ToolCall] = []
        self.errors: dict[str, str] = {}
        self.skipped: list[str] = []

    def add(self, block: Mapping[str, Any]) -> None:
        """Take in one content block of a response."""
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                self.content.append(TextBlock(block["text"]))
        elif kind == "thinking":
            self.content.append(ReasoningBlock(block.get("thinking") or "", block.get("signature")))
        elif kind == "redacted_thinking":
            redacted = REDACTED_THINKING_PREFIX + (block.get("data") or "")
            self.content.append(ReasoningBlock("", redacted))
        elif kind == "tool_use":
            self._add_call(block)
        else:
            self.skipped.append(str(kind))

    def _add_call(self, block: Mapping[str, Any]) -> None:
        args, problem = parse_tool_arguments(block.get("input"))
        if problem is not None:
            self.errors[str(block.get("id"))] = problem
        self.calls.append(ToolCall(str(block.get("id")), str(block.get("name") or ""), args))


def _message_from_blocks(
    blocks: Sequence[Mapping[str, Any]],
    *,
    stop_reason: object,
    usage: object,
    model: object,
    response_id: object,
) -> Message:
    read = _Blocks()
    for block in blocks:
        read.add(block)
    content, calls, errors, skipped = read.content, read.calls, read.errors, read.skipped
    metadata: dict[str, Any] = {"model": model, "response_id": response_id}
    metadata = {k: v for k, v in metadata.items() if v is not None}
    if stop_reason is not None:
        metadata["stop_reason"] = stop_reason
    mapped = _usage(usage)
    if mapped is not None:
        metadata["usage"] = mapped
    if errors:
        metadata["tool_args_errors"] = errors
    if skipped:
        metadata["skipped_blocks"] = skipped
    plain = all(isinstance(b, TextBlock) for b in content)
    body: str | list[TextBlock | ReasoningBlock] = (
        "".join(b.text for b in content) if plain else content
    )
    return Message("assistant", body, tool_calls=calls, metadata=metadata)


def from_anthropic_message(response: Mapping[str, Any]) -> Message:
    """A Messages API response (as a dict) as our assistant message."""
    return _message_from_blocks(
        response.get("content") or [],
        stop_reason=response.get("stop_reason"),
        usage=response.get("usage"),
        model=response.get("model"),
        response_id=response.get("id"),
    )


class _StreamState:
    """Accumulates Messages API stream events into one message."""

    def __init__(self) -> None:
        self.events = 0
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: object = None
        self.model: object = None
        self.response_id: object = None

    def feed(self, event: Mapping[str, Any]) -> list[ModelChunk]:
        self.events += 1
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model, self.response_id = message.get("model"), message.get("id")
            self._add_usage(message.get("usage"))
        elif kind == "content_block_start":
            self.blocks[event.get("index", 0)] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(event.get("index", 0), event.get("delta") or {})
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self._add_usage(event.get("usage"))
        return []

    def _add_usage(self, usage: Mapping[str, Any] | None) -> None:
        """Take the set counts of a usage report (later reports update earlier ones)."""
        self.usage.update({k: v for k, v in (usage or {}).items() if v})

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ModelChunk]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            piece = delta.get("text") or ""
            block["text"] = (block.get("text") or "") + piece
            return [TextDelta(piece)] if piece else []
        if kind == "thinking_delta":
            piece = delta.get("thinking") or ""
            block["thinking"] = (block.get("thinking") or "") + piece
            return [ReasoningDelta(piece)] if piece else []
        if kind == "signature_delta":
            block["signature"] = (block.get("signature") or "") + (delta.get("signature") or "")
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.get("partial_json") or "")
        return []

    def message(self) -> Message:
        blocks = []
        for index, block in sorted(self.blocks.items()):
            if block.get("type") == "tool_use" and index in self.json_parts:
                raw = "".join(self.json_parts[index])
                block = {**block, "input": raw if raw.strip() else block.get("input") or {}}
            blocks.append(block)
        return _message_from_blocks(
            blocks,
            stop_reason=self.stop_reason,
            usage=self.usage or None,
            model=self.model,
            response_id=self.response_id,
        )


class AnthropicModel(ProviderModel["AsyncAnthropic"]):
    """Claude through the Anthropic Messages API."""

    _client_class = "AsyncAnthropic"
    _sdk_error = "AnthropicError"
    _provider = "Anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        client: AsyncAnthropic | None = None,
        base_url: str | None = None,
        max_tokens: int = 1024,
        temperature: float | None = None,
        thinking: int | Mapping[str, Any] | None = None,
        timeout: float | None = 600.0,
        max_retries: int = 2,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._sdk = require_module("anthropic", "anthropic")
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.thinking: dict[str, Any] | None = None
        if isinstance(thinking, bool):
            raise InvalidArgumentError("thinking takes a token budget (int) or a config dict")
        if isinstance(thinking, int):
            self.thinking = {"type": "enabled", "budget_tokens": thinking}
        elif thinking is not None:
            self.thinking = dict(thinking)
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self._open_clients(
            client, api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    def _params(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> dict[str, Any]:
        system, turns = to_anthropic_messages(messages, system_prompt=system_prompt)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": turns,
        }
        if system is not None:
            params["system"] = system
        if tools:
            params["tools"] = to_anthropic_tools(tools)
        if self.thinking is not None:
            params["thinking"] = self.thinking
        extra = dict(self.extra_body)
        if self.temperature is not None:
            # Recent SDKs no longer list sampling parameters; models that take one still do.
            extra.setdefault("temperature", self.temperature)
        if extra:
            params["extra_body"] = extra
        return params

    def _failures(self) -> tuple[type[Exception], ...]:
        # The SDK resolves credentials per request and says so with a TypeError.
        return (*super()._failures(), TypeError)

    def _error(self, exc: Exception) -> AgentError:
        if isinstance(exc, TypeError):
            if "authentication" not in str(exc).lower():
                raise exc  # a real bug, not a provider failure
            return ModelAuthError(f"no Anthropic credentials: {exc}")
        return super()._error(exc)

    def _create(self, client: AsyncAnthropic) -> Callable[..., Awaitable[Any]]:
        create: Callable[..., Awaitable[Any]] = client.messages.create
        return create

    def _read(self, answer: Mapping[str, Any]) -> Message:
        return from_anthropic_message(answer)

    def _reader(self) -> _StreamState:
        return _StreamState()
