"""Helpers shared by the provider models: lazy SDK imports, error mapping, tool arguments.

Provider errors become one of these :class:`~framework_agents.errors.ModelError` classes
(the SDK's exception stays reachable as ``__cause__``)::

    ModelAuthError          MODEL_AUTH          401 / 403: a missing, wrong or unauthorised key
    ModelRateLimitError     MODEL_RATE_LIMIT    429: rate or quota limits
    ModelBadRequestError    MODEL_BAD_REQUEST   400 / 413 / 422: refused as sent
    ModelNotFoundError      MODEL_NOT_FOUND     404: unknown model or endpoint
    ModelServerError        MODEL_SERVER        5xx / 529: failed or overloaded
    ModelConnectionError    MODEL_CONNECTION    the server could not be reached
    ModelTimeoutError       MODEL_TIMEOUT       the request timed out
    ModelError              MODEL_ERROR         anything else (e.g. a body the SDK cannot parse)

A refusal because the prompt does not fit the context window is a
:class:`~framework_agents.errors.ContextOverflowError` instead, so the agent can reduce the
history and retry.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Generic, TypeVar

from .._install import install_hint
from ..errors import (
    AgentError,
    ContextOverflowError,
    ModelAuthError,
    ModelBadRequestError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelServerError,
)

__all__ = [
    "RAW_ARGS_KEY",
    "LoopClients",
    "extra_hint",
    "is_context_overflow",
    "parse_tool_arguments",
    "require_module",
    "status_error",
]

C = TypeVar("C")


class LoopClients(Generic[C]):
    """One SDK client per live event loop (or the one client the user gave).

    An httpx client's pooled connections belong to the loop that opened them, so a model
    used from several ``asyncio.run`` calls needs a client per loop; clients of closed
    loops are dropped.
    """

    def __init__(self, factory: Callable[[], C], given: C | None = None) -> None:
        self._factory = factory
        self._given = given
        self._by_loop: dict[int, tuple[asyncio.AbstractEventLoop, C]] = {}

    def get(self) -> C:
        """The client for the running loop, made on first use."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        self._by_loop = {k: v for k, v in self._by_loop.items() if not v[0].is_closed()}
        entry = self._by_loop.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = (loop, self._factory())
            self._by_loop[id(loop)] = entry
        return entry[1]

    async def aclose(self) -> None:
        """Close the clients made for the running loop; forget those of other loops.

        A client given by the user is theirs to close. A client of another loop cannot be
        closed from this one (its connections belong to that loop): it is dropped, and
        closes with its loop.
        """
        loop = asyncio.get_running_loop()
        entries, self._by_loop = self._by_loop, {}
        for owner, client in entries.values():
            close = getattr(client, "close", None)
            if owner is loop and callable(close):
                await close()


#: Key under which unparseable tool-call arguments are kept (``{"_raw": "<text>"}``).
RAW_ARGS_KEY = "_raw"

# Phrases providers use when a prompt does not fit the context window, lower-cased.
_OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI error code
    "maximum context length",  # OpenAI, vLLM
    "exceeds the available context size",  # llama.cpp server
    "exceed_context_size_error",  # llama.cpp error type
    "context window",  # several OpenAI-compatible servers
    "prompt is too long",  # Anthropic
    "exceed context limit",  # Anthropic: "input length and `max_tokens` exceed context limit"
    "too many tokens",  # some proxies
)


def extra_hint(extra: str) -> str:
    """The install command for one of the package's extras."""
    return install_hint(extra)


def require_module(name: str, extra: str) -> ModuleType:
    """Import ``name`` or raise an ImportError that says which extra to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"{name!r} is not installed; this model needs the {extra!r} extra: {extra_hint(extra)}"
        ) from exc


def is_context_overflow(*texts: object) -> bool:
    """Whether any of ``texts`` (error messages, bodies) reports a context-window overflow."""
    for text in texts:
        if text is None:
            continue
        blob = text if isinstance(text, str) else _dump(text)
        lowered = blob.lower()
        if any(marker in lowered for marker in _OVERFLOW_MARKERS):
            return True
    return False


def _dump(value: object) -> str:
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


# Error types named in a body (Anthropic, and errors sent inside a 200 event stream).
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
}


def _error_type(body: object) -> str | None:
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("type"), str):
            return str(inner["type"])
        if isinstance(body.get("type"), str):
            return str(body["type"])
    return None


# The error class of an HTTP status; any other 5xx is a ModelServerError.
_ERROR_BY_STATUS: dict[int, type[ModelError]] = {
    400: ModelBadRequestError,
    401: ModelAuthError,
    403: ModelAuthError,
    404: ModelNotFoundError,
    413: ModelBadRequestError,
    422: ModelBadRequestError,
    429: ModelRateLimitError,
}


def status_error(provider: str, status: int | None, message: str, body: object) -> AgentError:
    """The framework error for HTTP ``status`` from ``provider``.

    ``status=None`` stands for an error event inside a stream that had started with 200:
    the body's error type then says what failed.
    """
    if status is None or status < 400:
        kind = _error_type(body)
        text = f"{provider} sent an error ({kind or 'of unknown type'}): {message}"
        status = _ERROR_TYPE_STATUS.get(kind or "")
    else:
        text = f"{provider} returned HTTP {status}: {message}"
    if status in (None, 400, 413, 422) and is_context_overflow(message, body):
        return ContextOverflowError(text)
    error: type[ModelError] = ModelError
    if status is not None:
        error = _ERROR_BY_STATUS.get(status, ModelServerError if status >= 500 else ModelError)
    return error(text)


def parse_tool_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as a dict, and why they were unusable (``None`` when fine).

    Empty text means no arguments. Text that is not a JSON object is kept verbatim as
    ``{"_raw": text}``: no tool declares ``_raw``, so validation fails and the agent sends the
    model a tool error instead of crashing, and the raw text stays visible for debugging.
    """
    if raw is None:
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if not isinstance(raw, str):  # a server that sent a JSON list, number, ... as is
        text = _dump(raw)
        return {RAW_ARGS_KEY: text}, f"arguments are JSON {type(raw).__name__}, not an object"
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {RAW_ARGS_KEY: raw}, f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {RAW_ARGS_KEY: raw}, f"arguments are JSON {type(value).__name__}, not an object"
    return value, None
