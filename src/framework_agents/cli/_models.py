"""Which model the command line talks to: ``--model local|echo|openai:NAME|anthropic:NAME``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from ..errors import InvalidArgumentError
from ..messages import Message
from ..models import AnthropicModel, LocalModel, Model, OpenAIModel
from ..models._base import ModelChunk, ModelDone, StreamingModelBase, TextDelta, ToolSpec

__all__ = ["MODEL_HELP", "EchoModel", "describe_model", "make_model"]

MODEL_HELP = (
    "local (offline SmolLM2, the default), openai:NAME (with --base-url for any "
    "OpenAI-compatible server), anthropic:NAME, or echo (a deterministic testing aid)"
)


class EchoModel(StreamingModelBase):
    """A testing aid: answers ``echo #N: <last user text> (saw M messages)``.

    ``N`` counts the user turns and ``M`` the messages the model was sent, so a transcript
    shows that a restored session really reached the model. It goes through the whole
    agent (loop, conversation manager, memory, sessions); only the LLM is replaced.
    """

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """The echo of the last user message."""
        users = [m for m in messages if m.role == "user"]
        last = users[-1].text if users else ""
        text = f"echo #{len(users)}: {last} (saw {len(messages)} messages)"
        words = sum(len(m.text.split()) for m in messages)
        return Message(
            "assistant",
            text,
            metadata={
                "usage": {
                    "input_tokens": words,
                    "output_tokens": len(text.split()),
                    "total_tokens": words + len(text.split()),
                },
                "stop_reason": "end_turn",
            },
        )

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """The echo, streamed word by word."""
        message = await self.complete(messages, tools, system_prompt=system_prompt)
        words = message.text.split(" ")
        for i, word in enumerate(words):
            yield TextDelta(word if i == 0 else " " + word)
        yield ModelDone(message)


def make_model(
    spec: str,
    *,
    base_url: str | None = None,
    max_tokens: int | None = None,
    n_ctx: int = 4096,
) -> Model:
    """The model a ``--model`` value names (``INVALID_ARGUMENT`` for an unknown one).

    ``max_tokens=None`` keeps the model's own default; ``base_url`` applies to ``openai:``
    and ``anthropic:`` models only (``INVALID_ARGUMENT`` for the others).
    """
    kind, _, name = spec.partition(":")
    kind = kind.strip().lower()
    if base_url is not None and kind in ("local", "echo"):
        raise InvalidArgumentError(
            f"--base-url applies to openai:NAME and anthropic:NAME models, not {spec!r}"
        )
    if kind == "local" and not name:
        if max_tokens is None:
            return LocalModel(n_ctx=n_ctx)
        return LocalModel(max_tokens=max_tokens, n_ctx=n_ctx)
    if kind == "echo" and not name:
        return EchoModel()
    if kind == "openai" and name:
        return OpenAIModel(name, base_url=base_url, max_tokens=max_tokens)
    if kind == "anthropic" and name:
        if max_tokens is None:
            return AnthropicModel(name, base_url=base_url)
        return AnthropicModel(name, base_url=base_url, max_tokens=max_tokens)
    raise InvalidArgumentError(f"unknown model {spec!r}; use {MODEL_HELP}")


def describe_model(model: Model) -> str:
    """A short human name for a model."""
    if isinstance(model, LocalModel):
        return "SmolLM2-135M-Instruct (local, offline: llama.cpp in this process)"
    if isinstance(model, EchoModel):
        return "echo (testing aid: repeats the last user message)"
    if isinstance(model, OpenAIModel):
        where = model.base_url or "api.openai.com"
        return f"{model.model} (OpenAI protocol, {where})"
    if isinstance(model, AnthropicModel):
        return f"{model.model} (Anthropic)"
    return repr(model)
