"""``MemoryBank.remember`` on SQLite and PostgreSQL beside the backend's raw insert, one run.

Usage: ``PYTHONPATH=src python bench/bank_remember_sql.py [--n 400] [--postgres URL]``

* SQLite: a raw row is ``BEGIN IMMEDIATE; INSERT; COMMIT`` on a WAL database with
  ``synchronous=FULL`` (the commit fsyncs the WAL), as the store runs it; the bank's
  ``remember`` is one such transaction in the store's database thread.
* PostgreSQL: a raw row is ``BEGIN; INSERT; COMMIT`` on one async connection; the bank's
  ``remember`` is one transaction on the store's pool (claim, checks, three inserts,
  counter).

Raw inserts and remembers alternate one by one so both see the same disk and load. Prints p50 and
p99 (milliseconds), the ratio of the p50s, and the p50 of a remember with a ``key`` whose
timeline grows to ``n`` records (it reads two neighbours, not the history).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable

from framework_agents.bank import MemoryBank

BLOCK = 1
TEXT = "Ada moved to Berlin in March and works on the bridge project there"


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99) - 1]


async def _timed(samples: list[float], step: Callable[[], Awaitable[object]], n: int) -> None:
    for _ in range(n):
        start = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - start) * 1000)


async def _compare(
    name: str, raw: Callable[[], Awaitable[object]], bank: MemoryBank, n: int
) -> None:
    namespace = ("bench", uuid.uuid4().hex[:8])

    async def remember() -> object:
        return await bank.remember(TEXT, namespace=namespace)

    async def keyed() -> object:  # one key, which holds more records at each call
        return await bank.remember(TEXT, namespace=namespace, key="home")

    for step in (raw, remember, keyed):  # warm up: connections, schema, caches
        await _timed([], step, 20)
    raws: list[float] = []
    banks: list[float] = []
    keys: list[float] = []
    for _ in range(max(1, n // BLOCK)):
        await _timed(raws, raw, BLOCK)
        await _timed(banks, remember, BLOCK)
        await _timed(keys, keyed, BLOCK)
    (raw50, raw99), (bank50, bank99) = _quantiles(raws), _quantiles(banks)
    key50, _ = _quantiles(keys)
    print(
        f"{name:10} raw insert p50 {raw50:6.3f} ms p99 {raw99:6.3f} | "
        f"remember p50 {bank50:6.3f} ms p99 {bank99:6.3f} | ratio p50 {bank50 / raw50:4.2f}x | "
        f"keyed remember p50 {key50:6.3f} ms (key of up to {n + 20} records)"
    )


async def sqlite(n: int, root: str) -> None:
    """The SQLite comparison, in files under ``root``."""
    conn = sqlite3.connect(os.path.join(root, "raw.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE rows (id TEXT PRIMARY KEY, body BLOB NOT NULL)")

    async def raw() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO rows VALUES (?, ?)", (uuid.uuid4().hex, TEXT.encode()))
        conn.execute("COMMIT")

    async with MemoryBank(f"sqlite:///{root}/bank.db") as bank:
        await _compare("sqlite", raw, bank, n)
    conn.close()


async def postgres(n: int, url: str) -> None:
    """The PostgreSQL comparison, in a schema of its own (dropped afterwards)."""
    import psycopg

    schema = f"fa_bench_{uuid.uuid4().hex[:8]}"
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.execute(f'CREATE TABLE "{schema}".rows (id TEXT PRIMARY KEY, body BYTEA NOT NULL)')

    async def raw() -> None:
        async with conn.transaction():
            await conn.execute(
                f'INSERT INTO "{schema}".rows VALUES (%s, %s)', (uuid.uuid4().hex, TEXT.encode())
            )

    try:
        async with MemoryBank(f"{url}?schema={schema}") as bank:
            await _compare("postgresql", raw, bank, n)
    finally:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()


def main() -> None:
    """Run both comparisons."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="operations of each kind")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("FA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(sqlite(args.n, root))
    if not args.skip_postgres:
        asyncio.run(postgres(args.n, args.postgres))


if __name__ == "__main__":
    main()
