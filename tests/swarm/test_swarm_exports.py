"""The swarm's public names: pinned; the contract's are importable from the top level."""

from __future__ import annotations

import framework_agents
from framework_agents import swarm

PUBLIC = {
    "HANDOFF_KIND",
    "HANDOFF_MESSAGE_KIND",
    "HANDOFF_TOOL",
    "SWARM_STATE_KEY",
    "Handoff",
    "HandoffEvent",
    "MemberEvent",
    "Swarm",
    "SwarmAgentView",
    "SwarmErrorEvent",
    "SwarmEvent",
    "SwarmFinishedEvent",
    "SwarmInterruptEvent",
    "SwarmResult",
    "SwarmStartedEvent",
    "swarm_agent_events",
    "swarm_run_result",
}


def test_the_swarm_package_exports_exactly_its_public_names() -> None:
    assert set(swarm.__all__) == PUBLIC


#: The swarm names at the top level: the contract's, and the union of the stream's events.
TOP_LEVEL = {"Swarm", "SwarmResult", "Handoff", "SwarmEvent"}


def test_the_api_names_are_importable_from_the_top_level() -> None:
    for name in TOP_LEVEL:
        assert getattr(framework_agents, name) is getattr(swarm, name)
        assert name in framework_agents.__all__


def test_the_other_swarm_names_stay_in_the_subpackage() -> None:
    for name in PUBLIC - TOP_LEVEL:
        assert name not in framework_agents.__all__
        assert not hasattr(framework_agents, name)
