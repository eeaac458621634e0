"""Swarm: agents that hand the conversation to each other, with durable state and approvals.

``Swarm(agents, ...)`` runs its members on one shared, always well-formed conversation;
each member may call ``handoff_to_agent`` to pass the next turn to another member. With a
checkpointer and a thread id the swarm's state (conversation, active member, handoffs,
shared context, pending approval) survives restarts and crashes. See ``docs/swarm.md``.
"""

from ._handoff import HANDOFF_KIND, HANDOFF_MESSAGE_KIND, HANDOFF_TOOL
from ._serve import SwarmAgentView, swarm_agent_events, swarm_run_result
from ._state import SWARM_STATE_KEY
from ._types import (
    Handoff,
    HandoffEvent,
    MemberEvent,
    SwarmErrorEvent,
    SwarmEvent,
    SwarmFinishedEvent,
    SwarmInterruptEvent,
    SwarmResult,
    SwarmStartedEvent,
)
from .swarm import Swarm

__all__ = [
    # the swarm, its result and its handoffs
    "Swarm",
    "SwarmResult",
    "Handoff",
    # events of swarm.stream(): their union, then one class per kind
    "SwarmEvent",
    "SwarmStartedEvent",
    "MemberEvent",
    "HandoffEvent",
    "SwarmFinishedEvent",
    "SwarmInterruptEvent",
    "SwarmErrorEvent",
    # names in the shared conversation and state
    "HANDOFF_TOOL",
    "HANDOFF_KIND",
    "HANDOFF_MESSAGE_KIND",
    "SWARM_STATE_KEY",
    # a swarm served as one agent
    "SwarmAgentView",
    "swarm_agent_events",
    "swarm_run_result",
]
