"""Child-process bodies of the Redis memory-bank tests (run with ``spawn``).

Each opens the bank over ``open_store(url)``, does its part and reports through a
``multiprocessing`` connection: ``("ok", detail)`` or ``("error", code or type, text)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from typing import Any

from framework_agents.bank import MemoryBank
from framework_agents.stores import open_store
from framework_agents.testing._store_workers import _report

__all__ = ["key_writer", "remember_and_search"]

NAMESPACE = ("procs",)


def _with_bank(
    conn: Connection, url: str, barrier: Barrier, work: Callable[[MemoryBank], Awaitable[Any]]
) -> None:
    """Run ``work`` on the bank of ``open_store(url)`` once every worker is ready; report."""

    async def body() -> Any:
        store = open_store(url)
        try:
            bank = store.bank()
            barrier.wait()
            return await work(bank)
        finally:
            await store.close()

    _report(conn, body)


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
    the ids remembered.
    """

    async def work(bank: MemoryBank) -> list[str]:
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
        return ids

    _with_bank(conn, url, barrier, work)


def key_writer(conn: Connection, url: str, me: str, count: int, barrier: Barrier) -> None:
    """Remember ``count`` records of the key ``home`` (``<me> lives in town <i>``)."""

    async def work(bank: MemoryBank) -> list[str]:
        ids = []
        for i in range(count):
            text = f"{me} lives in town {i}"
            ids.append((await bank.remember(text, namespace=NAMESPACE, key="home")).id)
        return ids

    _with_bank(conn, url, barrier, work)
