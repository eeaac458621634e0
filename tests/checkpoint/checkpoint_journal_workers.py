"""Child-process body for the multi-process checkpoint test (imported by spawned children)."""

from __future__ import annotations

import asyncio
from multiprocessing.synchronize import Barrier

from framework_agents import FileCheckpointer, Message, ThreadCheckpoint

__all__ = ["append_turns"]


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
