"""What the SDK-backed providers share: their clients, the request, the stream and the errors.

:class:`ProviderModel` holds one SDK client per event loop, sends a request and reads the
answer whole or as a stream, and maps the SDK's exceptions to our errors (see
:mod:`framework_agents.models._common`). A provider (``OpenAIModel``, ``AnthropicModel``)
writes only what is its own: the request's parameters, the SDK call that sends it, how to
read an answer and a stream's events, and the names of its SDK's classes.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar

from ..errors import (
    AgentError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelTimeoutError,
)
from ..messages import Message
from ._base import ClosingModel, ModelChunk, ModelDone, ToolSpec
from ._common import LoopClients, status_error

__all__ = ["ProviderModel", "StreamReader"]

C = TypeVar("C")


class StreamReader(Protocol):
    """Reads one answer's stream events, as dicts, into deltas and, at the end, the message."""

    events: int

    def feed(self, event: Mapping[str, Any]) -> list[ModelChunk]:
        """The deltas one event brings."""
        ...

    def message(self) -> Message:
        """The whole answer, once the stream has ended."""
        ...


class ProviderModel(ClosingModel, Generic[C]):
    """Base of a model behind a provider's SDK; ``C`` is the SDK's async client class.

    A subclass sets ``_sdk`` (the SDK module), ``_client_class`` and ``_sdk_error`` (the
    names of the SDK's async client and root exception) and ``_provider`` (its name in
    error messages), then calls :meth:`_open_clients`.
    """

    _sdk: ModuleType
    _client_class: str
    _sdk_error: str
    _provider: str

    def _open_clients(
        self,
        client: C | None,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout: float | None,
        max_retries: int,
    ) -> None:
        """Make clients with these arguments (or use ``client``); a bad key fails here.

        Both SDKs' async clients take the same four (``None``: the SDK's own default,
        the key from the environment).
        """
        self._client_args: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._clients: LoopClients[C] = LoopClients(self._new_client, client)
        if client is None:
            self._new_client()  # fail fast on a missing key, not at the first call

    async def aclose(self) -> None:
        """Close the SDK clients this model opened (a client you passed in stays open)."""
        await self._clients.aclose()

    def _new_client(self) -> C:
        try:
            client: C = getattr(self._sdk, self._client_class)(**self._client_args)
        except self._sdk_failure() as exc:
            name = self._client_class.removeprefix("Async")
            raise ModelAuthError(f"cannot create the {name} client: {exc}") from exc
        return client

    def _client(self) -> C:
        return self._clients.get()

    def _sdk_failure(self) -> type[Exception]:
        """The root of the SDK's exceptions."""
        failure: type[Exception] = getattr(self._sdk, self._sdk_error)
        return failure

    def _failures(self) -> tuple[type[Exception], ...]:
        """The exceptions of a request that :meth:`_error` maps."""
        return (self._sdk_failure(),)

    def _error(self, exc: Exception) -> AgentError:
        """Our error for the SDK's ``exc``."""
        sdk = self._sdk
        if isinstance(exc, sdk.APITimeoutError):
            return ModelTimeoutError(f"{self._provider} timed out: {exc}")
        if isinstance(exc, sdk.APIConnectionError):
            return ModelConnectionError(f"cannot reach {self._provider}: {exc}")
        if isinstance(exc, sdk.APIStatusError):
            return status_error(self._provider, exc.status_code, exc.message, exc.body)
        if isinstance(exc, sdk.APIError):  # an error event inside the stream
            return status_error(self._provider, None, exc.message, exc.body)
        return ModelError(f"{self._provider} failed: {exc}")

    @abstractmethod
    def _params(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> dict[str, Any]:
        """The request's parameters."""

    def _stream_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters of the streaming request."""
        return {**params, "stream": True}

    @abstractmethod
    def _create(self, client: C) -> Callable[..., Awaitable[Any]]:
        """The SDK call that sends a request."""

    @abstractmethod
    def _read(self, answer: Mapping[str, Any]) -> Message:
        """A whole answer (as a dict) as our assistant message."""

    @abstractmethod
    def _reader(self) -> StreamReader:
        """A fresh reader of one stream."""

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """One request; the answer as an assistant message."""
        params = self._params(messages, tools, system_prompt)
        create = self._create(self._client())
        try:
            answer = await create(**params)
        except self._failures() as exc:
            raise self._error(exc) from exc
        return self._read(answer.model_dump())

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """Stream the answer: text and reasoning deltas, then :class:`ModelDone`."""
        params = self._stream_params(self._params(messages, tools, system_prompt))
        reader = self._reader()
        create = self._create(self._client())
        try:
            stream = await create(**params)
            async with stream:
                async for event in stream:
                    for piece in reader.feed(event.model_dump()):
                        yield piece
        except self._failures() as exc:
            raise self._error(exc) from exc
        if not reader.events:
            # A real stream always has events; none means a body that was not a stream.
            raise ModelError(f"{self._provider} answered a streaming request with no stream events")
        yield ModelDone(reader.message())
