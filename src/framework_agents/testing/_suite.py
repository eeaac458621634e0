"""Shared parts of the store conformance suite: the factory, the helpers, the hostile inputs.

The contract of the suite's modules (``_suite_*``): they build on these names only.
See :mod:`framework_agents.testing.conformance`; import from tests only (needs pytest).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pytest

from ..bank import MemoryBank
from ..errors import AgentError
from ..memory._base import Memory
from ..messages import Message, ReasoningBlock, TextBlock, ToolCall
from ..stores._base import Store

__all__ = [
    "Corrupter",
    "HOSTILE_KEYS",
    "HOSTILE_THREAD_IDS",
    "StoreFactory",
    "T",
    "alternating",
    "run_on_bank",
    "error_code",
    "fixed_id",
    "needs",
    "present",
    "rich_history",
    "run_on_store",
    "spawn",
    "wait_answer",
    "overlapping_agent_runs",
]

T = TypeVar("T")

#: Keys no backend may accept (STORAGE_KEY_INVALID).
HOSTILE_KEYS = ["", "/abs", "a/../b", "..", "a//b", "a\\b", "a\0b", "a/", "con", "x/.hidden", "é"]
#: Thread ids no backend may accept (THREAD_ID_INVALID).
HOSTILE_THREAD_IDS = ["", "..", ".hidden", "a/b", "a\\b", "a\0b", "x" * 200, "sp ace", "é"]


class Corrupter(Protocol):
    """Writes bytes a backend never writes, behind its back (picklable)."""

    async def corrupt_checkpoint(self, thread_id: str) -> None:
        """Make the stored checkpoint of ``thread_id`` unreadable."""
        ...

    async def corrupt_memory(self, key: str) -> None:
        """Make the stored memory ``key`` unreadable."""
        ...


@dataclass(frozen=True)
class StoreFactory:
    """How the suite opens the backend under test (see the module docstring).

    ``open``: returns a new :class:`Store` on the namespace under test (each call a new
    connection to the same data). ``cross_process``: whether stores opened in other
    processes share that data. ``lease``: seconds a dead or stopped holder keeps a
    thread (``None``: the backend has no lease; a dead holder is replaced at once).
    ``corrupter``: writes unreadable data, for the ``*_CORRUPT`` tests.
    """

    open: Callable[[], Store]
    cross_process: bool = True
    lease: float | None = None
    corrupter: Corrupter | None = None


def run_on_store(factory: StoreFactory, body: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``body`` on a store the factory opens (closed after), in a new event loop."""

    async def main() -> T:
        store = factory.open()
        try:
            return await body(store)
        finally:
            await store.close()

    return asyncio.run(main())


def run_on_bank(factory: StoreFactory, body: Callable[[MemoryBank], Awaitable[T]]) -> T:
    """Run ``body`` on the memory bank of a store the factory opens (see :func:`run_on_store`)."""

    async def on_store(store: Store) -> T:
        return await body(store.bank())

    return run_on_store(factory, on_store)


def fixed_id(n: int) -> str:
    """A record id fixed by ``n`` (32 hex digits, like the ids a bank makes)."""
    return f"{n:032x}"


def error_code(call: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], Awaitable[str | None]]:
    """``call`` made to return the code of the ``AgentError`` it raises (``None``: none)."""

    async def run() -> str | None:
        try:
            await call()
        except AgentError as exc:
            return exc.code
        return None

    return run


def rich_history() -> list[Message]:
    """A history with every kind of message part a store must keep exactly."""
    call = ToolCall("c1", "lookup", {"q": "ünï", "n": [1, 2.5, None, True], "d": {"k": "v"}})
    return [
        Message("system", "be brief"),
        Message("user", [TextBlock("hi "), TextBlock("there")], metadata={"k": [1, {"x": None}]}),
        Message(
            "assistant",
            [ReasoningBlock("think", signature="sig"), TextBlock("")],
            tool_calls=[call],
        ),
        Message("tool", "42", tool_call_id="c1", name="lookup"),
        Message("assistant", "the answer is 42 \U0001f600"),
    ]


async def overlapping_agent_runs(memories: Sequence[Memory], rounds: int) -> None:
    """One agent per memory (two may share one), their runs overlapping ``rounds`` times.

    Agent ``k``'s prompt in round ``i`` is ``"k i"``, its answer ``"answer to k i"``; the
    scripted model waits until every agent of the round has read its history before any
    answers, so each commit meets the others' turns stored meanwhile.
    """
    from ..agent import Agent
    from ..conversation import NullConversationManager
    from .models import FunctionModel

    all_started = asyncio.Barrier(len(memories))

    async def reply(history: list[Message], tools: object) -> str:
        await all_started.wait()
        return f"answer to {history[-1].text}"

    agents = [
        Agent(FunctionModel(reply), memory=m, conversation_manager=NullConversationManager())
        for m in memories
    ]
    for i in range(rounds):
        await asyncio.gather(*(agent.run(f"{k} {i}") for k, agent in enumerate(agents)))


def alternating(n: int) -> list[Message]:
    """``n`` messages, user and assistant in turn, with ids ``m0``, ``m1``..."""
    return [Message("user" if i % 2 == 0 else "assistant", f"m{i}", id=f"m{i}") for i in range(n)]


def needs(condition: bool, reason: str) -> None:
    """Skip the test unless ``condition`` (a capability the store has)."""
    if not condition:
        pytest.skip(f"capability missing: {reason}")


def present(value: T | None, reason: str) -> T:
    """``value``; the test is skipped when it is ``None`` (a capability the store lacks)."""
    if value is None:
        pytest.skip(f"capability missing: {reason}")
    return value


def spawn(target: Callable[..., None], *args: Any) -> tuple[Any, Any]:
    """Start ``target(conn, *args)`` in a spawned process: the process and the parent's end."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child, *args), daemon=True)
    proc.start()
    child.close()
    return proc, parent


def wait_answer(conn: Any, proc: Any, timeout: float = 120.0) -> Any:
    """What the child ``proc`` sends on ``conn`` (killed, failing the test, after ``timeout``)."""
    if not conn.poll(timeout):
        proc.kill()
        raise AssertionError(f"child process {proc.pid} did not answer within {timeout}s")
    return conn.recv()
