"""Helpers of the server tests: a deterministic agent factory and a real uvicorn server."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from async_helper import arun
from framework_agents import (
    Agent,
    FunctionModel,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolContext,
    errors,
    tool,
)
from framework_agents.checkpoint.model import ThreadCheckpoint
from framework_agents.elicitation import Elicitation, ElicitationRequired
from framework_agents.server._store import resolve_store

PUBLISHED: list[dict[str, Any]] = []

#: The status of every model error: its upstream failed (502), timed out (504) or limits
#: our rate (429); a prompt too long is the client's (422); OUTPUT_INVALID and
#: SCRIPT_EXHAUSTED stay the server's own failures (500).
MODEL_STATUSES: dict[type[errors.ModelError], int] = {
    errors.ModelAuthError: 502,
    errors.ModelRateLimitError: 429,
    errors.ModelBadRequestError: 502,
    errors.ModelNotFoundError: 502,
    errors.ModelServerError: 502,
    errors.ModelConnectionError: 502,
    errors.ModelTimeoutError: 504,
    errors.ModelError: 502,
    errors.ContextOverflowError: 422,
    errors.OutputInvalidError: 500,
    errors.ScriptExhaustedError: 500,
}


@tool(requires_approval=True, allowed_decisions=("approve", "edit", "reject"))
def publish(title: str, copies: int = 1) -> str:
    """Publish a post (needs a human's approval)."""
    PUBLISHED.append({"title": title, "copies": copies})
    return f"published {title!r} x{copies}"


#: What ``book`` asks (every kind of field a form built from a schema shows).
BOOKING: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "title": "Nights", "minimum": 1, "maximum": 30},
        "meal": {"type": "string", "title": "Meal", "enum": ["none", "breakfast", "half board"]},
        "pets": {"type": "boolean", "title": "Travelling with pets"},
        "budget": {"type": "number", "title": "Budget per night", "minimum": 0},
        "note": {"type": "string", "title": "Note", "maxLength": 200},
    },
    "required": ["nights", "meal"],
}


@tool
def book(city: str, context: ToolContext) -> str:
    """Book a room: asks the human how (as an MCP server's tool asks by elicitation)."""
    answer = context.answer
    if answer is None:
        raise ElicitationRequired(Elicitation(f"How should I book {city}?", BOOKING))
    if answer.action != "accept":
        return f"not booked ({answer.action})"
    return f"booked {city}: {json.dumps(answer.content, sort_keys=True)}"


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def answer(messages: list[Message], tools: list[Any]) -> Message:
    """The model: decides from the history alone, so every fresh agent answers alike.

    * last message from the user containing ``publish X`` -> calls ``publish(title=X, copies=3)``;
    * containing ``shout X`` -> calls ``shout(text=X)``;
    * ``book X`` -> calls ``book(city=X)``, which asks a question first;
    * ``think X`` -> reasoning ``"pondering"``, then ``"thought: X"``;
    * a tool result last -> ``"done: <result>"``;
    * otherwise -> ``"echo: <text>"``.
    """
    last = messages[-1]
    if last.role == "tool":
        return Message(role="assistant", content=f"done: {last.text}")
    text = last.text
    turn = sum(1 for m in messages if m.role == "user")
    if text.startswith("publish "):
        call = ToolCall(f"call-{turn}", "publish", {"title": text[8:], "copies": 3})
        return Message(role="assistant", tool_calls=[call])
    if text.startswith("shout "):
        return Message(
            role="assistant", tool_calls=[ToolCall(f"s-{turn}", "shout", {"text": text[6:]})]
        )
    if text.startswith("book "):
        return Message(
            role="assistant", tool_calls=[ToolCall(f"b-{turn}", "book", {"city": text[5:]})]
        )
    if text.startswith("think "):
        blocks: list[TextBlock | ReasoningBlock] = [
            ReasoningBlock("pondering"),
            TextBlock(f"thought: {text[6:]}"),
        ]
        return Message(role="assistant", content=blocks)
    return Message(role="assistant", content=f"echo: {text}")


def make_agent() -> Agent:
    """A fresh agent per run, as the server wants."""
    return Agent(FunctionModel(answer), tools=[publish, shout, book], system_prompt="Test agent.")


@dataclass
class Served:
    """A running server: its base URL, app and a stop function."""

    url: str
    app: Any
    stop: Callable[[], None]


class _Server(uvicorn.Server):
    """uvicorn's server, whose main loop also wakes at once when :meth:`exit` is called.

    uvicorn looks at ``should_exit`` every 0.1 s, so each stop waited 0.05 s on average for
    the next tick; the ticks and what they do (``on_tick``) are uvicorn's own.
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)

    def exit(self) -> None:
        """Set ``should_exit`` and wake the main loop (if it runs yet: else it sees the flag)."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already ended
                loop.call_soon_threadsafe(wake.set)


def start_server(app: Any) -> Served:
    """Run ``app`` under uvicorn on 127.0.0.1, a free port, in a thread."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        thread.join(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.exit()
        thread.join(30)

    return Served(f"http://127.0.0.1:{port}", app, stop)


PG_URL = os.environ.get("FA_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("FA_REDIS_URL", "redis://127.0.0.1:6379/0")


def reachable(port: int) -> bool:
    """Whether something answers on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def scratch_store(kind: str, tag: str) -> Iterator[str]:
    """The URL of a fresh PostgreSQL schema or Redis prefix named ``tag_<random>``.

    Skips the test when that server does not answer; the schema is dropped, or the
    prefix's keys deleted, afterwards.
    """
    port = 5432 if kind == "postgres" else 6379
    if not reachable(port):
        pytest.skip(f"no {kind} server on 127.0.0.1:{port}")
    scratch = f"{tag}_{uuid.uuid4().hex[:10]}"
    if kind == "redis":
        yield f"{REDIS_URL}?prefix={scratch}:"
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(f"{scratch}:*"):
            client.delete(key)
        client.close()
        return
    yield f"{PG_URL}?schema={scratch}"
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {scratch} CASCADE")


def rewrite_thread(
    store: str | Path, thread_id: str, update: Callable[[ThreadCheckpoint], dict[str, Any]]
) -> None:
    """Save the thread of ``store`` with the fields ``update`` gives for its checkpoint.

    How the tests leave a thread as a process that died mid-run would have (the store is
    opened for this, then closed).
    """

    async def save() -> None:
        opened = resolve_store(str(store))
        try:
            checkpoint = await opened.checkpointer.load(thread_id)
            assert checkpoint is not None
            await opened.checkpointer.save(checkpoint.model_copy(update=update(checkpoint)))
        finally:
            await opened.close()

    arun(save())


async def a2a_send(url: str, message: Any) -> Any:
    """Send ``message`` over A2A (blocking mode); its task as the server then has it."""
    from a2a.client import ClientConfig, create_client
    from a2a.types import a2a_pb2

    client = await create_client(url, client_config=ClientConfig(streaming=False))
    try:
        task_id = message.task_id
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            if response.HasField("task"):
                task_id = response.task.id
            elif response.HasField("status_update"):
                task_id = response.status_update.task_id
        return await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
    finally:
        await client.close()


class Counting:
    """Forwards to a storage and counts the calls (its range reads only where it has them).

    What a listing costs, counted in calls: the A2A task store's and the thread index's
    tests wrap a real store's storage in it.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}
        if hasattr(inner, "list_after"):
            self.list_after = self._list_after
            self.get_many = self._get_many
            self.count_after = self._count_after

    def count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    async def get(self, key: str) -> bytes | None:
        self.count("get")
        value: bytes | None = await self.inner.get(key)
        return value

    async def put(self, key: str, data: bytes) -> None:
        self.count("put")
        await self.inner.put(key, data)

    async def delete(self, key: str) -> None:
        self.count("delete")
        await self.inner.delete(key)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        self.count("list")
        keys: builtins.list[str] = await self.inner.list(prefix)
        return keys

    async def _list_after(self, prefix: str, after: str | None, limit: int) -> builtins.list[str]:
        self.count("list_after")
        keys: builtins.list[str] = await self.inner.list_after(prefix, after, limit)
        return keys

    async def _get_many(self, keys: builtins.list[str]) -> dict[str, bytes]:
        self.count("get_many")
        found: dict[str, bytes] = await self.inner.get_many(keys)
        return found

    async def _count_after(self, prefix: str, after: str | None, before: str | None) -> int:
        self.count("count_after")
        found: int = await self.inner.count_after(prefix, after, before)
        return found
