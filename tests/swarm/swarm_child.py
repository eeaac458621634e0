"""Child process of the swarm crash tests.

    swarm_child.py ROOT EFFECTS MODE

MODE ``approve_blocking``: resume thread "t1" approving the refund; the tool prints "ran"
after its side effect and blocks (the parent SIGKILLs it there).
MODE ``crash_in_billing``: run thread "t1"; triage hands off, then billing's model kills
the process (a crash between two members).
Prints "survived" if it was not killed (the test then fails).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from swarm_scenario import refund_swarm

from framework_agents import FileCheckpointer


async def main(root: Path, effects: Path, mode: str) -> None:
    cp = FileCheckpointer(root)
    if mode == "approve_blocking":
        swarm = refund_swarm(effects, block=True)
        await swarm.resume("t1", {"refund": "approve"}, checkpointer=cp)
    elif mode == "crash_in_billing":
        swarm = refund_swarm(effects, crash_billing=True)
        await swarm.run("refund please", checkpointer=cp, thread_id="t1")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    root, effects, mode = sys.argv[1:4]
    asyncio.run(main(Path(root), Path(effects), mode))
    print("survived", flush=True)
