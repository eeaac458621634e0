"""Child-process body for the multi-process checkpoint test (imported by spawned children)."""

from __future__ import annotations

import asyncio
import itertools
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier

from framework_agents import FileCheckpointer, Message, ThreadCheckpoint
from framework_agents.checkpoint import _file_writer

__all__ = ["append_turns", "crash_saver"]


def append_turns(root: str, writer: str, count: int, barrier: Barrier) -> None:
    """Append ``count`` messages to thread ``t1``, each under the thread's lock."""

    async def main() -> None:
        cp = FileCheckpointer(root, lock_timeout=120)
        for seq in range(count):
            async with cp.thread_lock("t1"):
                current = await cp.load("t1")
                history = list(current.messages) if current is not None else []
                mid = f"{writer}-{seq}"
                history.append(Message("user", mid, id=mid))
                await cp.save(ThreadCheckpoint("t1", None, history, {"last": mid}))

    barrier.wait(timeout=60)
    asyncio.run(main())


def crash_saver(root: str, first_seq: int, conn: Connection, fold_min: int) -> None:
    """Append ``s<first_seq>``, ``s<first_seq+1>``, ... to thread ``t1`` forever.

    Sends ``-1`` once loaded, then each sequence number right after its save returned
    (acknowledged). The parent kills this process at random. ``fold_min`` is the
    journal size past which saves fold (small: most saves publish checkpoint.json).
    """
    _file_writer.FOLD_MIN_BYTES = fold_min  # read where saves run

    async def main() -> None:
        cp = FileCheckpointer(root)
        current = await cp.load("t1")
        history = list(current.messages) if current is not None else []
        conn.send(-1)
        for seq in itertools.count(first_seq):
            mid = f"s{seq}"
            history = [*history, Message("user", mid, id=mid)]
            await cp.save(ThreadCheckpoint("t1", None, history, {"last": mid}))
            conn.send(seq)

    asyncio.run(main())
