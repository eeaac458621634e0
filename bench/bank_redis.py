"""Benchmark: ``MemoryBank.remember`` over Redis against a raw ``RPUSH`` (run by hand).

Three timings, interleaved so server noise hits them alike:

* floor: one ``RPUSH`` of the bytes a record's revision is stored as (the raw driver, one
  round trip: the least a durable write can cost);
* ``remember`` without a key (one script: one round trip);
* ``remember`` with a key (two scripts: the new record's neighbours on the key's timeline
  are read, then written if unchanged), the same key every time, so the timeline grows to
  ``--n`` records: the column should stay flat.

Target: ``remember`` p50 within 2x of the floor's. Then one ``search`` after all the
writes (the index catches up from the change log) and one after nothing changed.

Usage: ``.venv/bin/python bench/bank_redis.py [--n 2000] [--redis URL] [--json]``. The
keys live under a scratch prefix, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable
from typing import Any

from framework_agents.stores import open_store


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered) * 1000, 3),
        "p99": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
    }


async def _timed(work: Awaitable[Any]) -> float:
    """Seconds ``work`` (a coroutine not started yet) takes to run."""
    start = time.perf_counter()
    await work
    return time.perf_counter() - start


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; the figures."""
    import redis.asyncio as aioredis

    prefix = f"fa-bench-{uuid.uuid4().hex[:12]}:"
    store = open_store(f"{args.redis}?prefix={prefix}")
    raw = aioredis.Redis.from_url(args.redis)
    bank = store.bank()
    namespace = ("bench", "user-1")
    try:
        await bank.remember("warm up the scripts", namespace=namespace, key="warm")
        await raw.ping()
        text = "the user said they moved to a flat near the river, third floor, {}"
        payload = json.dumps(bank.new_row(text, namespace=namespace).record().to_dict()).encode()
        floor, plain, keyed = [], [], []
        for i in range(args.n):
            said = text.format(i)
            floor.append(await _timed(raw.rpush(f"{prefix}floor", payload)))
            plain.append(await _timed(bank.remember(said, namespace=namespace)))
            keyed.append(await _timed(bank.remember(said, namespace=namespace, key="home")))
        fresh = store.bank()
        catch_up = await _timed(fresh.search("river flat", namespace=namespace))
        again = await _timed(fresh.search("river flat", namespace=namespace))
        out = {
            "records": 2 * args.n + 1,
            "rpush_floor_ms": _ms(floor),
            "remember_ms": _ms(plain),
            "remember_keyed_ms": _ms(keyed),
            "ratio_remember_p50": round(statistics.median(plain) / statistics.median(floor), 2),
            "ratio_keyed_p50": round(statistics.median(keyed) / statistics.median(floor), 2),
            "keyed_first_vs_last_tenth_p50_ms": [
                _ms(keyed[: args.n // 10])["p50"],
                _ms(keyed[-args.n // 10 :])["p50"],
            ],
            "search_after_catch_up_ms": round(catch_up * 1000, 1),
            "search_again_ms": round(again * 1000, 2),
        }
    finally:
        keys = [key async for key in raw.scan_iter(match=f"{prefix}*", count=1000)]
        for start in range(0, len(keys), 1000):
            await raw.delete(*keys[start : start + 1000])
        await raw.aclose()
        await store.close()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--json", action="store_true")
    parsed = parser.parse_args()
    figures = asyncio.run(main(parsed))
    if parsed.json:
        print(json.dumps(figures))
    else:
        for name, value in figures.items():
            print(f"{name:36} {value}")
