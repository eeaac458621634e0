"""Child-process body for the session journal kill test (imported by forkserver children)."""

from __future__ import annotations

import asyncio
import itertools
from multiprocessing.connection import Connection

from framework_agents import Message
from framework_agents.sessions import LocalFileStorage, SessionManager, Snapshot, SnapshotData
from framework_agents.sessions import manager as session_manager

__all__ = ["crash_saver"]


def crash_saver(root: str, first_seq: int, conn: Connection, fold_min: int) -> None:
    """Save ``s<first_seq>``, ``s<first_seq+1>``, ... as the session's latest, forever.

    ``SessionManager(..., append=True)``: each save appends a delta record unless the log
    outgrew ``fold_min`` bytes (small: most saves publish the whole snapshot again). Sends
    ``-1`` once loaded, then each sequence number right after its save returned. The parent
    kills this process at random.
    """
    session_manager.FOLD_MIN_BYTES = fold_min

    async def main() -> None:
        manager = SessionManager("s1", LocalFileStorage(root), append=True)
        latest = await manager.load_latest()
        history = [] if latest is None else list(latest.data.messages or [])
        conn.send(-1)
        for seq in itertools.count(first_seq):
            mid = f"s{seq}"
            history = [*history, Message("user", mid, id=mid)]
            data = SnapshotData(messages=history, state={"last": mid})
            await manager.save_latest(Snapshot(data))
            conn.send(seq)

    asyncio.run(main())
