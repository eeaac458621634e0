"""docs/swarm.md's example prints what the page says, and the shipped support swarm works
offline: routing, shared context, an approval in billing, a handoff between specialists."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import framework_agents
from framework_agents import HitlInterrupt, InMemoryCheckpointer, is_well_formed
from framework_agents.swarm.example import support_swarm

DOC = Path(__file__).resolve().parents[2] / "docs" / "swarm.md"


def test_the_guide_example_prints_what_the_guide_says(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    printed = re.findall(r"prints\n\n```\n(.*?)```", text, re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    # The package under test, wherever it is imported from (a worktree's src/ included).
    src = str(Path(framework_agents.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout == printed


def test_the_support_swarm_routes_asks_for_approval_and_hands_between_specialists() -> None:
    async def scenario() -> None:
        cp = InMemoryCheckpointer()
        swarm = support_swarm()
        hello = await swarm.run("hello", checkpointer=cp, thread_id="c1")
        assert (hello.agent, hello.handoffs) == ("triage", [])
        with pytest.raises(HitlInterrupt) as caught:
            await swarm.run("refund order 1234 please", checkpointer=cp, thread_id="c1")
        assert caught.value.agent == "billing"
        assert caught.value.arguments == {"order": 1234}
        done = await swarm.resume("c1", {"issue_refund": "approve"}, checkpointer=cp)
        assert done.agent == "billing" and "refund issued for order 1234" in done.text
        assert done.context == {"triage": {"order": 1234}}
        tech = await swarm.run("the app shows an error at login", checkpointer=cp, thread_id="c1")
        assert tech.agent == "tech" and [h.to_agent for h in tech.handoffs] == ["tech"]
        assert is_well_formed(tech.messages)

    asyncio.run(scenario())
