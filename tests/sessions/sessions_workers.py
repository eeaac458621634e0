"""Child-process bodies for the session concurrency tests (imported by spawned children)."""

from __future__ import annotations

import asyncio
from multiprocessing.synchronize import Barrier

from framework_agents import LocalFileStorage, Message, SessionManager, Snapshot, SnapshotData
from framework_agents.errors import CheckpointConflictError

__all__ = ["update_worker"]


def update_worker(
    root: str, writer: str, count: int, barrier: Barrier, append: bool = False
) -> None:
    """Add ``count`` entries (state and a message each), retrying refused writes."""

    async def main() -> None:
        session = SessionManager("shared", LocalFileStorage(root), append=append)
        for seq in range(count):
            while True:
                latest = await session.load_latest()
                state = dict(latest.data.state or {}) if latest is not None else {}
                done = list(state.get("done", []))
                done.append(f"{writer}-{seq}")
                messages = list(latest.data.messages or []) if latest is not None else []
                messages.append(Message("user", f"{writer}-{seq}", id=f"{writer}-{seq}"))
                data = SnapshotData(messages=messages, state={"done": done})
                try:
                    await session.save_latest(Snapshot(data))
                    break
                except CheckpointConflictError:
                    continue  # another writer updated it first: read again and redo

    barrier.wait(timeout=60)
    asyncio.run(main())
