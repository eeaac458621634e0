"""Loads beside saves, unforced: every load is exactly one saved checkpoint (slow).

``FileCheckpointer`` answers a load of files it wrote from its view (loads take no
lock): a count of its record of the messages and the other fields, replaced whole by
each save after the record grew. Threads poll ``load()`` in their own event loops while
the owner saves a growing history (deltas), sometimes a history started over (a fold),
sometimes copies stored alike of what is stored; the interpreter switches threads every
few microseconds. Each load must give the messages and the state of one save, never a
mix, and after the last save the instance must load what a fresh read of the files does.
(The narrowest window, a load between a save's growing its record and replacing its
view, is forced in ``test_checkpoint_values.py``.)
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
from pathlib import Path

import pytest

from framework_agents import FileCheckpointer, Message, ThreadCheckpoint

LOADERS = 3
SAVES = 400


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_load_beside_saves_is_one_saved_checkpoint(tmp_path: Path) -> None:
    rng = random.Random(11)
    cp = FileCheckpointer(tmp_path)
    saved: dict[int, list[str]] = {}  # a save's number (state "n"): its message ids
    errors: list[str] = []
    stop = threading.Event()
    loads = [0] * LOADERS

    def poll(k: int) -> None:
        async def go() -> None:
            while not stop.is_set():
                got = await cp.load("t")
                if got is None:
                    continue
                n = got.state["n"]
                ids = [m.id for m in got.messages]
                if saved.get(n) != ids:
                    errors.append(f"load: state n={n} with {len(ids)} messages")
                loads[k] += 1

        asyncio.run(go())

    history: list[Message] = []
    first = ThreadCheckpoint("t", None, [], {"n": -1})
    saved[-1] = []
    asyncio.run(cp.save(first))
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    threads = [threading.Thread(target=poll, args=(k,)) for k in range(LOADERS)]
    try:
        for thread in threads:
            thread.start()

        async def saves() -> None:
            nonlocal history
            for n in range(SAVES):
                roll = rng.random()
                if roll < 0.05:  # started over: not an extension, a fold
                    history = []
                elif roll < 0.10 and history:  # copies stored alike of the same history
                    history = [m.model_copy() for m in history]
                for _ in range(rng.randint(1, 3)):
                    history.append(
                        Message("user", f"q{n}-{len(history)}", id=f"m{n}-{len(history)}")
                    )
                saved[n] = [m.id for m in history]  # known before any load can give it
                await cp.save(ThreadCheckpoint("t", None, history, {"n": n}))

        asyncio.run(saves())
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        sys.setswitchinterval(switch)
    assert not errors, errors[:5]
    assert all(loads), loads  # every loader got to load
    mine = asyncio.run(cp.load("t"))
    fresh = asyncio.run(FileCheckpointer(tmp_path).load("t"))
    assert mine is not None and fresh is not None
    assert mine.model_dump() == fresh.model_dump()
    assert mine.state["n"] == SAVES - 1
