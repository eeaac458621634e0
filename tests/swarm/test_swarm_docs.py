"""The shipped support swarm works offline: routing, shared context, an approval in billing,
a handoff between specialists. (That docs/swarm.md's example prints what the page says is
checked with every doc block, in tests/test_docs.py.)"""

from __future__ import annotations

import asyncio

import pytest

from framework_agents import HitlInterrupt, InMemoryCheckpointer, is_well_formed
from framework_agents.swarm.example import support_swarm


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
