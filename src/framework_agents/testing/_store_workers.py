"""Child-process bodies of the store conformance suite (internal; run with ``spawn``).

Each worker opens the backend with the factory it was given, does its part, and reports
through a ``multiprocessing`` connection: ``("ok", detail)`` or ``("error", code, text)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from multiprocessing.connection import Connection
from typing import Any

from ..checkpoint._base import save_progress, thread_lock
from ..checkpoint.model import ThreadCheckpoint
from ..errors import AgentError, CheckpointConflictError
from ..messages import Message

__all__ = [
    "append_worker",
    "bank_forget_worker",
    "bank_worker",
    "counter_worker",
    "hold_worker",
    "session_agent_worker",
    "stale_worker",
    "turns_worker",
]


def _report(conn: Connection, body: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    try:
        detail: Any = asyncio.run(body())
    except AgentError as exc:
        conn.send(("error", exc.code, exc.message))
    except BaseException as exc:  # the parent shows what went wrong
        conn.send(("error", type(exc).__name__, str(exc)))
    else:
        conn.send(("ok", detail))
    conn.close()


def append_worker(conn: Connection, open_store: Any, key: str, who: str, count: int) -> None:
    """Append ``count`` messages ``<who>-<i>`` to memory ``key``, one save each."""

    async def body() -> int:
        store = open_store()
        try:
            memory = store.memory(key, max_messages=100_000)
            for i in range(count):
                await memory.save([Message("user", f"{who}-{i}")])
        finally:
            await store.close()
        return count

    _report(conn, body)


def _agent_worker(
    conn: Connection,
    open_store: Any,
    who: str,
    turns: int,
    where: Callable[[Any], dict[str, Any]],
    *,
    mark_state: bool = False,
) -> None:
    """Run ``turns`` agent runs ``<who>-<i>``, keeping what ``where(store)`` gives the agent.

    ``where`` names the agent's memory or session manager; with ``mark_state`` each run
    first sets the state key ``<who>`` to its turn.
    """
    from ..agent import Agent
    from ..conversation import NullConversationManager
    from .models import FunctionModel

    async def reply(history: list[Message], tools: object) -> str:
        await asyncio.sleep(0.002)  # a model call: the other processes run meanwhile
        return f"answer to {history[-1].text}"

    async def body() -> int:
        store = open_store()
        try:
            agent = Agent(
                FunctionModel(reply), conversation_manager=NullConversationManager(), **where(store)
            )
            for i in range(turns):
                if mark_state:
                    agent.state[who] = i
                await agent.run(f"{who}-{i}")
        finally:
            await store.close()
        return turns

    _report(conn, body)


def agent_worker(conn: Connection, open_store: Any, key: str, who: str, turns: int) -> None:
    """Run ``turns`` agent runs ``<who>-<i>`` on memory ``key`` (no checkpointer, no lock)."""

    def where(store: Any) -> dict[str, Any]:
        return {"memory": store.memory(key, max_messages=100_000)}

    _agent_worker(conn, open_store, who, turns, where)


def session_agent_worker(
    conn: Connection, open_store: Any, session_id: str, who: str, turns: int
) -> None:
    """Run ``turns`` agent runs ``<who>-<i>`` on session ``session_id`` (the README's two tabs).

    Each run also sets the state key ``<who>`` to its turn: the agents' keys differ, so
    every save merges (messages by id, state by key) and none is refused.
    """
    from ..sessions.manager import SessionManager

    def where(store: Any) -> dict[str, Any]:
        return {"session_manager": SessionManager(session_id, store.storage)}

    _agent_worker(conn, open_store, who, turns, where, mark_state=True)


def turns_worker(conn: Connection, open_store: Any, thread_id: str, who: str, turns: int) -> None:
    """Run ``turns`` read-modify-write turns of ``thread_id``, each under its thread lock."""

    async def body() -> int:
        store = open_store()
        cp = store.checkpointer
        try:
            for i in range(turns):
                async with thread_lock(cp, thread_id):
                    base = await cp.load(thread_id)
                    messages = [] if base is None else base.messages
                    count = 0 if base is None else int(base.state.get("turns", 0))
                    turn = [Message("user", f"{who}-{i}"), Message("assistant", f"{who}-{i}")]
                    await save_progress(
                        cp,
                        ThreadCheckpoint(thread_id, None, [*messages, *turn], {"turns": count + 1}),
                    )
        finally:
            await store.close()
        return turns

    _report(conn, body)


def hold_worker(conn: Connection, open_store: Any, thread_id: str) -> None:
    """Take ``thread_id``'s lock, say so, and keep it until killed."""

    async def body() -> None:
        store = open_store()
        async with thread_lock(store.checkpointer, thread_id):
            conn.send(("held", None))
            await asyncio.Event().wait()  # until SIGKILL

    _report(conn, body)


def stale_worker(conn: Connection, open_store: Any, thread_id: str) -> None:
    """Hold ``thread_id``, load it, say so; on ``go`` (after a pause) try to save."""

    async def body() -> str:
        store = open_store()
        cp = store.checkpointer
        try:
            async with thread_lock(cp, thread_id):
                base = await cp.load(thread_id)
                messages = [] if base is None else base.messages
                conn.send(("held", None))
                await asyncio.to_thread(conn.recv)  # the parent stops us, then says go
                late = [*messages, Message("user", "late write")]
                await cp.save(ThreadCheckpoint(thread_id, None, late, {"by": "stale"}))
        finally:
            await store.close()
        return "saved"

    _report(conn, body)


def counter_worker(conn: Connection, open_store: Any, key: str, count: int) -> None:
    """Increment the counter stored under ``key`` ``count`` times with compare_and_put."""

    async def body() -> int:
        store = open_store()
        storage: Any = store.storage
        conflicts = 0
        try:
            for _ in range(count):
                while True:
                    raw = await storage.get(key)
                    value = 0 if raw is None else int(raw)
                    try:
                        await storage.compare_and_put(key, b"%d" % (value + 1), expected=raw)
                        break
                    except CheckpointConflictError:
                        conflicts += 1
        finally:
            await store.close()
        return count

    _report(conn, body)


def bank_worker(
    conn: Connection, open_store: Any, namespace: tuple[str, ...], who: str, count: int
) -> None:
    """Remember ``count`` records ``<who> note <i>`` in ``namespace``, all with key ``slot``."""

    async def body() -> int:
        store = open_store()
        try:
            bank = store.bank()
            for i in range(count):
                await bank.remember(f"{who} note {i}", namespace=namespace, key="slot")
        finally:
            await store.close()
        return count

    _report(conn, body)


def bank_forget_worker(conn: Connection, open_store: Any, namespace: tuple[str, ...]) -> None:
    """Forget ``namespace`` in the bank; how many records went."""

    async def body() -> int:
        store = open_store()
        try:
            return int(await store.bank().forget_namespace(namespace))
        finally:
            await store.close()

    _report(conn, body)
