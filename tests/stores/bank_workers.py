"""Child-process bodies of the memory-bank tests over SQLite and PostgreSQL (run with spawn)."""

from __future__ import annotations

from multiprocessing.connection import Connection

from framework_agents.bank import MemoryBank
from framework_agents.testing._store_workers import _report

#: The word every record of :func:`share_worker` holds, so one search finds them all.
WORD = "zebra"


def share_worker(conn: Connection, url: str, who: str, count: int, peer: Connection) -> None:
    """Remember ``count`` records (and as many of the key ``colour``) while searching.

    After each remember returns, its id goes to the peer process; before each search,
    the ids the peer sent are read, and the search (which started after they arrived)
    must find every one of them. Reports the ids this process remembered.
    """

    async def body() -> dict[str, list[str]]:
        mine: list[str] = []
        theirs: list[str] = []
        async with MemoryBank(url) as bank:
            for i in range(count):
                record = await bank.remember(f"{who} saw {WORD} number {i}", namespace=("shared",))
                mine.append(record.id)
                peer.send(record.id)
                await bank.remember(f"{who} says colour {i}", namespace=("shared",), key="colour")
                while peer.poll():
                    theirs.append(peer.recv())
                hits = await bank.search(WORD, namespace=("shared",), k=1000)
                found = {hit.record.id for hit in hits}
                missing = [i for i in theirs if i not in found]
                if missing:
                    raise AssertionError(f"{who}: a search missed {missing} sent before it")
                if len(found) != len(hits):
                    raise AssertionError(f"{who}: a search returned a record twice")
        return {"mine": mine}

    _report(conn, body)
