"""The model seam: what the agent needs from an LLM, and nothing more."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..messages import Message

__all__ = [
    "ClosingModel",
    "Model",
    "ModelChunk",
    "ModelDone",
    "ReasoningDelta",
    "StreamingModel",
    "StreamingModelBase",
    "TextDelta",
    "ToolSpec",
]


class ToolSpec(BaseModel):
    """What a model is told about a tool: its name, description and JSON-schema parameters."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text streamed by a model."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of thinking streamed by a model."""

    text: str


@dataclass(frozen=True, slots=True)
class ModelDone:
    """The end of a model stream: the complete assistant message."""

    message: Message


ModelChunk = TextDelta | ReasoningDelta | ModelDone


@runtime_checkable
class Model(Protocol):
    """An LLM: given a history and tools, return one assistant message."""

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> Message:
        """The next assistant message (possibly with tool calls and reasoning blocks)."""
        ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its answer; the last chunk is a :class:`ModelDone`."""

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> AsyncIterator[ModelChunk]:
        """Yield deltas as they arrive, then one :class:`ModelDone`."""
        ...


class StreamingModelBase(ABC):
    """A base of the shipped models: ``complete()`` and ``stream()`` are written here once.

    A subclass writes ``_complete()`` and ``_stream()``, which take the same arguments,
    ``system_prompt`` positionally.
    """

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> Message:
        """The next assistant message."""
        return await self._complete(messages, tools, system_prompt)

    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> AsyncIterator[ModelChunk]:
        """Deltas as they arrive, then one :class:`ModelDone`."""
        return self._stream(messages, tools, system_prompt)

    @abstractmethod
    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """The next assistant message."""

    @abstractmethod
    def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """The chunks of one answer (an async generator)."""


class ClosingModel(StreamingModelBase):
    """A shipped model that holds clients: ``aclose()`` frees them, and so does ``async with``."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close what this model opened."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
