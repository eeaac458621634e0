"""A replica for the two-replica tests: an agent running turns of one shared thread.

Run in a child process (``spawn``); reports ``("ok", turns)`` or ``("error", code, text)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from framework_agents import Agent, InMemoryMemory, Message, NullConversationManager
from framework_agents.errors import AgentError
from framework_agents.stores import Store
from framework_agents.testing import FunctionModel


def _echo(messages: list[Message], tools: Any) -> str:
    return f"ack {messages[-1].text}"


def replica(
    conn: Connection,
    open_store: Callable[[], Store],
    thread_id: str,
    who: str,
    turns: int,
    hang_at: int | None = None,
) -> None:
    """Run ``turns`` agent runs of ``thread_id``, each one user turn and one reply.

    With ``hang_at``, the model of run ``hang_at`` reports ``("hanging", i)`` and never
    answers: the run holds the thread until the process is killed.
    """

    async def model(messages: list[Message], tools: Any) -> str:
        if hang_at is not None and messages[-1].text == f"{who}-{hang_at}":
            conn.send(("hanging", hang_at))
            await asyncio.Event().wait()
        return _echo(messages, tools)

    async def body() -> int:
        store = open_store()
        try:
            agent = Agent(
                FunctionModel(model),
                memory=InMemoryMemory(max_messages=10_000),
                conversation_manager=NullConversationManager(),
            )
            for i in range(turns):
                await agent.run(f"{who}-{i}", checkpointer=store.checkpointer, thread_id=thread_id)
        finally:
            await store.close()
        return turns

    try:
        conn.send(("ok", asyncio.run(body())))
    except AgentError as exc:
        conn.send(("error", exc.code, exc.message))
    except BaseException as exc:
        conn.send(("error", type(exc).__name__, repr(exc)))
    conn.close()


def session_replica(
    conn: Connection, open_store: Callable[[], Store], session_id: str, who: str, turns: int
) -> None:
    """Run ``turns`` agent runs in session ``session_id`` (``SessionManager`` on the storage).

    A save the other replica beat is merged (messages by id; the replicas change no
    state), so no run is refused: a ``CHECKPOINT_CONFLICT`` is an error here. Reports
    ``("ok", turns)``.
    """
    from framework_agents import SessionManager

    async def body() -> int:
        store = open_store()
        try:
            agent = Agent(
                FunctionModel(_echo),
                memory=InMemoryMemory(max_messages=10_000),
                conversation_manager=NullConversationManager(),
                session_manager=SessionManager(session_id, store.storage),
            )
            for i in range(turns):
                await agent.run(f"{who}-{i}")
        finally:
            await store.close()
        return turns

    try:
        conn.send(("ok", asyncio.run(body())))
    except AgentError as exc:
        conn.send(("error", exc.code, exc.message))
