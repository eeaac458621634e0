"""Deterministic models for tests and demos: no network, no randomness."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from .._util import maybe_await
from ..errors import InvalidArgumentError, ModelError, ScriptExhaustedError
from ..messages import Message
from ..models._base import (
    ModelChunk,
    ModelDone,
    ReasoningDelta,
    StreamingModelBase,
    TextDelta,
    ToolSpec,
)

__all__ = ["FunctionModel", "ModelCall", "ModelFunction", "Reply", "ScriptedModel"]

#: ``fn(messages, tools)`` returning an assistant message or its text (sync or async).
ModelFunction = Callable[
    [list[Message], list[ToolSpec]], "Message | str | Awaitable[Message | str]"
]

#: One scripted reply: text, a message, a function like FunctionModel's, or an exception to raise.
Reply = str | Message | ModelFunction | BaseException


@dataclass(frozen=True)
class ModelCall:
    """What a test model was asked: the history, the tools and the system prompt."""

    messages: list[Message]
    tools: list[ToolSpec]
    system_prompt: str | None = None


def _as_assistant(value: object) -> Message:
    if isinstance(value, str):
        return Message("assistant", value)
    if not isinstance(value, Message):
        raise ModelError(
            "a test model's function must return an assistant Message or a str, "
            f"not {type(value).__name__}: {value!r:.100}"
        )
    if value.role != "assistant":
        raise ModelError(f"a model must return an assistant message, not role={value.role!r}")
    return value


def _check_replies(replies: object) -> list[Reply]:
    if isinstance(replies, str | Message) or not isinstance(replies, Sequence):
        raise InvalidArgumentError(
            f"ScriptedModel takes a list of replies, not {type(replies).__name__}"
        )
    for i, reply in enumerate(replies):
        if not (isinstance(reply, str | Message | BaseException) or callable(reply)):
            raise InvalidArgumentError(
                f"ScriptedModel reply {i} must be a str, a Message, a function or an "
                f"exception, not {type(reply).__name__}: {reply!r:.100}"
            )
    return list(replies)


async def _stream_message(message: Message) -> AsyncIterator[ModelChunk]:
    for block in message.reasoning:
        yield ReasoningDelta(block.text)
    if message.text:
        yield TextDelta(message.text)
    yield ModelDone(message)


class _WholeAnswer(StreamingModelBase):
    """A test model that streams its whole answer at once."""

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """The answer of ``complete()`` as one reasoning/text delta each, then the message."""
        message = await self.complete(messages, tools, system_prompt=system_prompt)
        async for chunk in _stream_message(message):
            yield chunk


@dataclass
class FunctionModel(_WholeAnswer):
    """A model whose every answer comes from ``fn(messages, tools)``."""

    fn: ModelFunction
    calls: list[ModelCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise InvalidArgumentError(
                f"FunctionModel takes a function (messages, tools) -> Message | str, "
                f"not {type(self.fn).__name__}: {self.fn!r:.100}"
            )

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """Call ``fn`` with copies of the history and tools and return its answer."""
        history, specs = list(messages), list(tools)
        self.calls.append(ModelCall(history, specs, system_prompt))
        return _as_assistant(await maybe_await(self.fn(history, specs)))


class ScriptedModel(_WholeAnswer):
    """A model that answers with ``replies`` in order and records every call."""

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies: list[Reply] = _check_replies(replies)
        self.calls: list[ModelCall] = []

    @property
    def remaining(self) -> int:
        """How many replies are left."""
        return len(self.replies) - len(self.calls)

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """The next scripted reply; ``SCRIPT_EXHAUSTED`` once the script has run out."""
        index = len(self.calls)
        history, specs = list(messages), list(tools)
        if index >= len(self.replies):
            raise ScriptExhaustedError(
                f"ScriptedModel was called {index + 1} times but has {len(self.replies)} replies"
            )
        self.calls.append(ModelCall(history, specs, system_prompt))
        reply = self.replies[index]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, (str, Message)):
            return _as_assistant(reply)
        return _as_assistant(await maybe_await(reply(history, specs)))

    def assert_complete(self) -> None:
        """Fail unless every scripted reply was used."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel has {self.remaining} unused replies of {len(self.replies)}"
            )
