"""A child process for the checkpointer tests (run as a script, not collected by pytest).

checkpoint_child.py save-loop ROOT THREAD   save ever larger checkpoints forever,
                                            printing "saved N" after each save
checkpoint_child.py hold-thread ROOT THREAD take the thread lock, print "held", wait
                                            for "release" on stdin (or be killed)
"""

from __future__ import annotations

import asyncio
import sys

from framework_agents import Message
from framework_agents.checkpoint import FileCheckpointer, ThreadCheckpoint


async def save_loop(root: str, thread: str) -> None:
    cp = FileCheckpointer(root)
    n = 0
    while True:
        n += 1
        messages = [Message("user", f"message {i} of save {n} " + "x" * 200) for i in range(n % 50)]
        await cp.save(ThreadCheckpoint(thread, None, messages, {"n": n}))
        print(f"saved {n}", flush=True)


async def hold_thread(root: str, thread: str) -> None:
    async with FileCheckpointer(root).thread_lock(thread):
        print("held", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        assert line.strip() == "release", line
    print("released", flush=True)


def main() -> int:
    mode, root, thread = sys.argv[1:4]
    if mode == "save-loop":
        asyncio.run(save_loop(root, thread))
    elif mode == "hold-thread":
        asyncio.run(hold_thread(root, thread))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
