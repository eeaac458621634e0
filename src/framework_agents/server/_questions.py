"""A tool's question (an MCP server's elicitation) as the server reads and answers it.

One place for what every protocol shares: which stored question a thread waits for
(:func:`question_of`), what a human may do with it (:data:`ANSWER_KINDS`, the agent's
decision forms) and how an answer in MCP's ``ElicitResult`` form (``action``,
``content``), which A2A and AG-UI clients send, becomes one (:func:`answer_decision`).
"""

from __future__ import annotations

from typing import Any

from ..checkpoint.model import ThreadCheckpoint
from ..elicitation import Elicitation
from ..errors import HitlDecisionError

__all__ = ["ANSWER_KINDS", "answer_decision", "question_of"]

#: What a human may do with a tool's question (``Pending.allowed_decisions`` of one).
ANSWER_KINDS = ("answer", "decline", "cancel")


def question_of(checkpoint: ThreadCheckpoint) -> Elicitation | None:
    """The question ``checkpoint``'s pending call asked a human, or ``None`` (an approval).

    The stored ``elicitation`` is a question waiting for its answer only while a call is
    pending and none is in flight (an answered call in flight keeps it with its answer; if
    the process died then, the call is an approval of unknown outcome).
    """
    stored = checkpoint.elicitation
    if stored is None or checkpoint.pending is None or checkpoint.in_flight:
        return None
    return Elicitation.from_dict(stored)  # as the agent reads it (the same question)


def answer_decision(action: object, content: object = None) -> dict[str, Any]:
    """Our decision for an answer given as ``action`` and ``content`` (MCP's ``ElicitResult``).

    How A2A and AG-UI clients answer a tool's question: ``"accept"`` (or ``"answer"``)
    with ``content`` (checked against the schema when the resume starts), ``"decline"`` or
    ``"cancel"``; any other action is ``HITL_DECISION``.
    """
    if action in ("accept", "answer"):
        return {"answer": content}
    if action in ("decline", "cancel"):
        return {str(action): True}
    raise HitlDecisionError(
        f"action must be accept (with content), decline or cancel, not {action!r:.40}"
    )
