"""Child process of the crash tests: resume thread "t1" and die at CRASH_AT.

    threads_child.py ROOT EFFECTS CRASH_AT

Prints "survived" if the crash point was never reached (the test then fails).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from threads_scenario import CrashingCheckpointer, publishing_agent


async def main(root: Path, effects: Path, crash_at: str) -> None:
    agent = publishing_agent(effects, crash_at)
    cp = CrashingCheckpointer(root, crash_at)
    await agent.resume("t1", {"publish": "approve"}, checkpointer=cp)


if __name__ == "__main__":
    root, effects, crash_at = sys.argv[1:4]
    asyncio.run(main(Path(root), Path(effects), crash_at))
    print("survived", flush=True)
