"""Child-process bodies of the Redis memory-bank tests (run with ``spawn``).

Each opens the bank over ``open_store(url)``, does its part and reports through a
``multiprocessing`` connection: ``("ok", detail)`` or ``("error", code or type, text)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from typing import Any

from framework_agents.errors import AgentError
from framework_agents.stores import open_store

__all__ = ["key_writer", "remember_and_search"]

NAMESPACE = ("procs",)


def _report(conn: Connection, body: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    try:
        detail: Any = asyncio.run(body())
    except AgentError as exc:
        conn.send(("error", exc.code, exc.message))
    except BaseException as exc:  # the parent shows what went wrong
        conn.send(("error", type(exc).__name__, repr(exc)))
    else:
        conn.send(("ok", detail))
    conn.close()


def remember_and_search(
    conn: Connection,
    url: str,
    me: str,
    other: str,
    count: int,
    mine: Synchronized[int],
    theirs: Synchronized[int],
    barrier: Barrier,
) -> None:
    """Remember ``count`` records ``<me> note <i>``, searching the other's after each.

    ``mine`` is raised to ``i + 1`` once remember ``i`` returned; before each search the
    other's published count is read, and the search must find at least that many of its
    records (it sees every record whose remember returned before it started). Reports
    the ids remembered and the smallest margin seen (found - published, never < 0).
    """

    async def body() -> dict[str, Any]:
        store = open_store(url)
        try:
            bank = store.bank()
            barrier.wait()
            ids = []
            for i in range(count):
                record = await bank.remember(f"{me} note {i}", namespace=NAMESPACE)
                ids.append(record.id)
                with mine.get_lock():
                    mine.value = i + 1
                published = theirs.value
                hits = await bank.search(other, namespace=NAMESPACE, k=1000)
                found = sum(1 for h in hits if h.record.text.startswith(f"{other} note "))
                if found < published:
                    raise AssertionError(f"{me} found {found} of {other}'s {published} records")
            return {"ids": ids}
        finally:
            await store.close()

    _report(conn, body)


def key_writer(conn: Connection, url: str, me: str, count: int, barrier: Barrier) -> None:
    """Remember ``count`` records of the key ``home`` (``<me> lives in town <i>``)."""

    async def body() -> list[str]:
        store = open_store(url)
        try:
            bank = store.bank()
            barrier.wait()
            ids = []
            for i in range(count):
                record = await bank.remember(
                    f"{me} lives in town {i}", namespace=NAMESPACE, key="home"
                )
                ids.append(record.id)
            return ids
        finally:
            await store.close()

    _report(conn, body)
