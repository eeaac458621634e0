"""A ready support swarm: ``triage`` hands refunds to ``billing`` and problems to ``tech``.

``support_swarm()`` runs offline: each member's model is a small deterministic rule set
(no network, no weights), so the docs, the tests and a server can show handoffs, shared
context and an approval inside a member. ``support_swarm(model)`` gives every member the
same real model with the system prompts below instead. Serve it with::

    framework-agents serve framework_agents.swarm.example:served_support_swarm

(``served_support_swarm()`` is ``support_swarm().as_agent()``: the swarm behind an agent's
event surface, which a server written for agents serves as it is.)

``billing``'s ``issue_refund`` needs a human decision (approve, edit or reject), so a refund
request suspends the whole swarm until someone answers it.
"""

from __future__ import annotations

import re
from typing import Any

from ..agent.agent import Agent
from ..messages import Message, ToolCall
from ..models._base import Model
from ..testing.models import FunctionModel
from ..tools import Tool, tool
from ._handoff import HANDOFF_MESSAGE_KIND, HANDOFF_TOOL
from ._serve import SwarmAgentView
from .swarm import Swarm

__all__ = ["PROMPTS", "issue_refund", "served_support_swarm", "support_swarm"]

#: The members' system prompts (used as they are with a real model).
PROMPTS = {
    "triage": (
        "You are the triage desk of a shop's support. Hand refunds, charges and invoices to "
        "billing and technical problems to tech with handoff_to_agent, passing the order "
        "number in context. Answer greetings and anything else yourself, briefly."
    ),
    "billing": (
        "You are billing. Refund orders with issue_refund (a human approves each refund), "
        "then confirm to the customer. Hand technical questions to tech."
    ),
    "tech": ("You are technical support. Give short, concrete steps. Hand refunds to billing."),
}

_BILLING = re.compile(r"\b(refund|charge[sd]?|invoice|money back)\b", re.IGNORECASE)
_TECH = re.compile(r"\b(error|crash\w*|bug|log ?in|password|broken)\b", re.IGNORECASE)
_ORDER = re.compile(r"\b(\d{3,})\b")


@tool(requires_approval=True, allowed_decisions=("approve", "edit", "reject"))
def issue_refund(order: int, reason: str = "customer request") -> str:
    """Refund an order in full.

    Args:
        order: The order number.
        reason: Why the order is refunded.
    """
    return f"refund issued for order {order} ({reason})"


def _turn(messages: list[Message]) -> tuple[Message | None, list[Message]]:
    """The latest user message (a prompt or a handoff) and what followed it."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i], messages[i + 1 :]
    return None, []


def _customer_text(messages: list[Message]) -> str:
    """The customer's latest own words (handoff messages are not theirs)."""
    for message in reversed(messages):
        if message.role == "user" and message.metadata.get("kind") != HANDOFF_MESSAGE_KIND:
            return message.text
    return ""


def _handoff(to: str, why: str, text: str, at: int) -> Message:
    args: dict[str, Any] = {"agent_name": to, "message": why}
    order = _ORDER.search(text)
    if order:
        args["context"] = {"order": int(order.group(1))}
    return Message("assistant", "", tool_calls=[ToolCall(f"handoff-{to}-{at}", HANDOFF_TOOL, args)])


def _triage(messages: list[Message], tools: Any) -> Message | str:
    user, _ = _turn(messages)
    text = _customer_text(messages)
    if user is not None and user.metadata.get("kind") != HANDOFF_MESSAGE_KIND:
        if _BILLING.search(text):
            return _handoff(
                "billing", f"The customer asks about money: {text}", text, len(messages)
            )
        if _TECH.search(text):
            return _handoff(
                "tech", f"The customer has a technical problem: {text}", text, len(messages)
            )
    return "Hello! I can help with refunds and billing, or with technical problems."


def _billing(messages: list[Message], tools: Any) -> Message | str:
    _, since = _turn(messages)
    text = _customer_text(messages)
    if _TECH.search(text) and not _BILLING.search(text):
        return _handoff("tech", f"Not a billing question: {text}", text, len(messages))
    results = [m for m in since if m.role == "tool" and m.name == issue_refund.name]
    if results:
        return f"Done: {results[-1].text}. Anything else?"
    order = _ORDER.search(text)
    if order is None:
        return "Which order number should I refund?"
    call = ToolCall(f"refund-{len(messages)}", issue_refund.name, {"order": int(order.group(1))})
    return Message("assistant", "", tool_calls=[call])


def _tech(messages: list[Message], tools: Any) -> Message | str:
    text = _customer_text(messages)
    if _BILLING.search(text) and not _TECH.search(text):
        return _handoff("billing", f"Not a technical question: {text}", text, len(messages))
    return "Please sign out, clear the app's cache and sign in again; tell me if it persists."


def support_swarm(model: Model | None = None) -> Swarm:
    """The triage/billing/tech swarm: offline rules without ``model``, else that model."""
    rules = {"triage": _triage, "billing": _billing, "tech": _tech}
    tools: dict[str, list[Tool]] = {"triage": [], "billing": [issue_refund], "tech": []}
    members = [
        Agent(
            model if model is not None else FunctionModel(rules[name]),
            agent_id=name,
            system_prompt=PROMPTS[name],
            tools=tools[name],
        )
        for name in ("triage", "billing", "tech")
    ]
    return Swarm(members, entry="triage", swarm_id="support")


def served_support_swarm() -> SwarmAgentView:
    """A fresh offline support swarm behind an agent's surface: an ``APP`` for ``serve``."""
    return support_swarm().as_agent()
