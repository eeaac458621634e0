"""Child-process bodies for the FileMemory process tests (imported by spawned children).

Kept apart from the test modules so a child imports only the standard library and
framework_agents, not pytest or hypothesis.
"""

from __future__ import annotations

import asyncio
import itertools
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from framework_agents import FileMemory, Message

__all__ = [
    "agent_worker",
    "compacting_agent_worker",
    "append_worker",
    "clearing_writer",
    "crash_worker",
    "message_id",
    "slow_reader",
]

#: Room for every append the process tests make: nothing is windowed away.
BIG_WINDOW = 1_000_000


def message_id(writer: str, seq: int) -> str:
    """The id (and text) of append ``seq`` of ``writer``."""
    return f"{writer}-{seq}"


def append_worker(directory: str, writer: str, count: int, barrier: Barrier) -> None:
    """Save ``count`` messages, one per save, after every worker reached the barrier."""

    async def main() -> None:
        memory = FileMemory(directory, max_messages=BIG_WINDOW)
        for seq in range(count):
            mid = message_id(writer, seq)
            await memory.save([Message("user", mid, id=mid)])

    barrier.wait(timeout=60)
    asyncio.run(main())


def crash_worker(directory: str, first_seq: int, conn: Connection) -> None:
    """Save ``s<first_seq>``, ``s<first_seq+1>``, ... forever, reporting each save once done.

    Sends ``-1`` before the first save, then each sequence number right after its save
    returned (the save is acknowledged). The parent kills this process at random.
    """

    async def main() -> None:
        memory = FileMemory(directory, max_messages=BIG_WINDOW)
        conn.send(-1)
        for seq in itertools.count(first_seq):
            mid = message_id("s", seq)
            await memory.save([Message("user", mid, id=mid)])
            conn.send(seq)

    asyncio.run(main())


def agent_worker(directory: str, writer: str, runs: int, barrier: Barrier) -> None:
    """``runs`` agent runs on one shared FileMemory (the agent's clear-then-save commit)."""
    from framework_agents import Agent, NullConversationManager
    from framework_agents.testing import FunctionModel

    def reply(messages: list[Message], tools: object) -> str:
        return f"answer to {messages[-1].text}"

    async def main() -> None:
        agent = Agent(
            FunctionModel(reply),
            memory=FileMemory(directory, max_messages=BIG_WINDOW),
            conversation_manager=NullConversationManager(),
        )
        for seq in range(runs):
            await agent.run(message_id(writer, seq))

    barrier.wait(timeout=60)
    asyncio.run(main())


def compacting_agent_worker(
    directory: str, writer: str, runs: int, bound: int, barrier: Barrier
) -> None:
    """``runs`` agent runs, each with a tool call, over ``CompactedMemory(FileMemory)``."""
    from framework_agents import Agent, CompactedMemory, NullConversationManager, ToolCall, tool
    from framework_agents.testing import FunctionModel

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def reply(messages: list[Message], tools: object) -> Message:
        last = messages[-1]
        if last.role == "tool":
            return Message("assistant", f"sum is {last.text}")
        return Message("assistant", tool_calls=[ToolCall(f"{last.id}-c", "add", {"a": 1, "b": 2})])

    async def main() -> None:
        inner = FileMemory(directory, max_messages=BIG_WINDOW)
        agent = Agent(
            FunctionModel(reply),
            tools=[add],
            memory=CompactedMemory(inner, max_messages=bound),
            conversation_manager=NullConversationManager(),
        )
        for seq in range(runs):
            await agent.run(message_id(writer, seq))

    barrier.wait(timeout=60)
    asyncio.run(main())


def clearing_writer(directory: str, rounds: int, acked: Synchronized[int], stop: Event) -> None:
    """Per round ``g``: save a document's worth (``d<g>-*``), then one journal record
    (``j<g>``), publish ``g`` in ``acked``, then ``clear()``; ``stop`` when done."""

    async def main() -> None:
        memory = FileMemory(directory, max_messages=BIG_WINDOW)
        for g in range(1, rounds + 1):
            # Past the fold threshold: these go into the document, the next into the journal.
            body = "x" * 300
            await memory.save([Message("user", body, id=f"d{g}-{i}") for i in range(300)])
            await memory.save([Message("assistant", "after", id=f"j{g}")])
            acked.value = g
            await memory.clear()

    try:
        asyncio.run(main())
    finally:
        stop.set()


def slow_reader(directory: str, acked: Synchronized[int], stop: Event, conn: Connection) -> None:
    """Load until ``stop``; send every load that returned round ``g``'s document without
    its journal record although both were acknowledged before the load began.

    The reader lingers between the document and the journal (a longer parse would), which
    is where a writer that does not exclude readers could swap both under it.
    """
    import time

    from framework_agents.memory import _journaled

    read_journal = _journaled.MemoryFiles._journal_payloads

    def lingering(self: _journaled.MemoryFiles, token: Any, doc_bytes: int) -> list[bytes]:
        time.sleep(0.002)
        return read_journal(self, token, doc_bytes)

    _journaled.MemoryFiles._journal_payloads = lingering  # type: ignore[method-assign, assignment]

    async def main() -> None:
        memory = FileMemory(directory, max_messages=BIG_WINDOW)
        loads, stale = 0, []
        while not stop.is_set():
            before = acked.value
            ids = {m.id for m in await memory.load()}
            loads += 1
            if before and f"d{before}-0" in ids and f"j{before}" not in ids:
                stale.append(before)
        conn.send((loads, stale))

    asyncio.run(main())
