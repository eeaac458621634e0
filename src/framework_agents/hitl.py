"""Human in the loop: decisions on tool calls that need approval, and the interrupt signal.

A tool built with ``requires_approval=True`` does not run until a decision says so. The
agent looks the decision up, in this order:

1. the ``decisions`` given to the run or resume: first the exact key
   ``hitl_key(tool, args)`` (or a key whose arguments are JSON-equal), then the bare tool
   name, a wildcard that matches every re-issued call of that tool (models regenerate
   argument text, so exact keys alone never converge);
2. the agent's ``decide(tool_name, args)`` callback (sync or async);
3. otherwise: suspend.

A stored decision answers ONE assistant turn: it applies to the next turn that needs it,
and once a turn whose approval calls were all decided goes on to run them, the decisions
it used are spent (:class:`DecisionBook`), so a later turn that calls the tool again is
asked about again (callback or suspend). Decisions accumulate across the resumes of one
interrupted turn (the checkpoint carries the unspent ones).

Decisions: ``"approve"``; ``{"edit": new_args}`` (run with those arguments, validated);
``{"reject": "reason"}`` (not run; the model sees a rejection result and the run goes on);
``{"suspend": True}`` (the run stops with :class:`HitlInterrupt`). The bare strings
``"reject"`` and ``"suspend"`` are accepted too; an approval is only the string (a mapping
such as ``{"approve": True}`` is refused: it reads like an answer to a question nobody
asked, e.g. ``{"approved": true}`` of another protocol). A decision of a kind the tool does
not allow, or of any other shape, raises ``HITL_DECISION``. The default suspend (no decision
at all) is the framework's, not a human's, so it is allowed for every tool.

:class:`HitlInterrupt` and :class:`ToolRejection` are control-flow signals, not errors:
they do not derive from :class:`~framework_agents.errors.AgentError`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ._util import DictMapping, maybe_await
from .errors import HitlDecisionError
from .tools import DECISION_KINDS, DecisionKind, Tool, ToolArgumentsError

__all__ = [
    "DecideCallback",
    "Decision",
    "DecisionBook",
    "HitlInterrupt",
    "InterruptKind",
    "ResolvedDecision",
    "ToolRejection",
    "check_decisions",
    "check_edit",
    "find_decision",
    "hitl_key",
    "is_interrupt_id",
    "match_decision",
    "new_interrupt_id",
    "parse_decision",
    "resolve_decision",
]

#: ``"approve"``, ``{"edit": args}``, ``{"reject": reason}`` or ``{"suspend": True}``.
Decision = str | Mapping[str, Any]

#: ``decide(tool_name, args) -> Decision`` (sync or async).
DecideCallback = Callable[[str, dict[str, Any]], "Decision | Awaitable[Decision]"]

DecisionSource = Literal["exact", "wildcard", "callback", "default"]

#: What an interrupt waits for: a decision on a call, or the answer to a tool's question.
InterruptKind = Literal["tool_call", "elicitation"]

_DEFAULT_REJECTION = "The call was rejected by a human reviewer."


def hitl_key(tool: str, args: Mapping[str, Any]) -> str:
    """The decision key of one call: ``f"{tool}:{json.dumps(args)}"``."""
    return f"{tool}:{json.dumps(args)}"


#: Every interrupt id starts with this, so a decision key naming an interrupt (the open
#: one, or a stale one that is closed) is told apart from a ``hitl_key`` (which holds a
#: ``:``) and from a misspelled tool name. A tool of the agent named like an interrupt id
#: is still matched as a tool name first.
INTERRUPT_ID_PREFIX = "interrupt-"


def new_interrupt_id() -> str:
    """A fresh, unique interrupt id (``"interrupt-<32 hex digits>"``)."""
    return f"{INTERRUPT_ID_PREFIX}{uuid.uuid4().hex}"


def is_interrupt_id(key: str) -> bool:
    """Whether the decision key ``key`` names an interrupt (open or not) by its id."""
    return key.startswith(INTERRUPT_ID_PREFIX) and ":" not in key


class HitlInterrupt(Exception):
    """A call needs a human decision: the run stopped before that assistant turn ran.

    ``tool`` and ``arguments`` name the call, ``call_id`` is the model's call id, ``key``
    its :func:`hitl_key` and ``thread_id`` the checkpointed thread (``None`` without one).
    ``reason`` says why, when it is not simply "approval needed". ``outcome_unknown`` is
    ``True`` when the call was approved and started but its process died before the result
    was saved: it may or may not have run, and runs again only on a new explicit decision.

    ``interrupt_id`` is unique per interrupt (a fresh one unless given). A decision keyed
    by it settles this interrupt only while it is the thread's open one; a call of unknown
    outcome is settled ONLY by a decision keyed by its interrupt's id, which is then also
    its ``key`` (so ``{interrupt.key: decision}`` always answers the interrupt at hand).

    ``kind`` is ``"tool_call"`` for a call waiting for a decision and ``"elicitation"``
    for a call that asks a human a question (an MCP server's elicitation): then
    ``message`` and ``schema`` are the question and the requested schema, and
    ``{interrupt_id: {"answer": {...}}}`` (or ``{"decline": True}``, ``{"cancel": True}``)
    answers it.

    ``agent`` names the swarm member whose call it is (``None`` outside a swarm).
    ``code`` is ``"HITL_INTERRUPT"``, for code that reads the ``code`` of whatever a run
    raised; the interrupt is still a signal, not an :class:`~framework_agents.AgentError`.
    """

    #: What a run that stopped for a human decision raised (not an error code).
    code: Literal["HITL_INTERRUPT"] = "HITL_INTERRUPT"

    def __init__(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str,
        *,
        key: str | None = None,
        thread_id: str | None = None,
        reason: str | None = None,
        outcome_unknown: bool = False,
        interrupt_id: str | None = None,
        agent: str | None = None,
        kind: InterruptKind = "tool_call",
        message: str | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> None:
        self.tool: str = tool
        self.arguments: dict[str, Any] = dict(arguments)
        self.call_id: str = call_id
        self.key: str = key if key is not None else hitl_key(tool, self.arguments)
        self.thread_id: str | None = thread_id
        self.reason: str | None = reason
        self.outcome_unknown: bool = bool(outcome_unknown)
        self.interrupt_id: str = interrupt_id if interrupt_id is not None else new_interrupt_id()
        self.agent: str | None = agent
        self.kind: InterruptKind = kind
        self.message: str | None = message
        self.schema: dict[str, Any] | None = dict(schema) if schema is not None else None
        text = reason or (f"asks: {message}" if kind == "elicitation" else "needs a human decision")
        super().__init__(f"tool {tool!r} {text} (key {self.key!r})")

    def to_dict(self) -> dict[str, Any]:
        """The interrupt's attributes as JSON values (what a stream event carries)."""
        return {name: getattr(self, name) for name in _INTERRUPT_ATTRIBUTES}

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep every attribute across pickling (process pools, multiprocessing queues).
        return (_rebuild_interrupt, (self.to_dict(),))


#: The attributes of a :class:`HitlInterrupt`, in the order of its JSON form; each is also
#: the constructor argument of that name.
_INTERRUPT_ATTRIBUTES = (
    "interrupt_id",
    "tool",
    "arguments",
    "call_id",
    "key",
    "thread_id",
    "reason",
    "outcome_unknown",
    "agent",
    "kind",
    "message",
    "schema",
)


def _rebuild_interrupt(attributes: dict[str, Any]) -> HitlInterrupt:
    return HitlInterrupt(**attributes)


class ToolRejection(Exception):
    """A call was refused: raised by a tool (or made by a reject decision) to tell the model.

    The run goes on; the model sees a tool result holding ``reason`` with
    ``metadata["kind"] == "rejected"``.
    """

    def __init__(self, reason: str = _DEFAULT_REJECTION) -> None:
        super().__init__(reason)
        self.reason: str = reason


@dataclass(frozen=True, slots=True)
class ResolvedDecision:
    """A validated decision for one call, and where it came from.

    ``key`` is the key of the stored decisions it was found under (``None`` for the
    callback and the default suspend): the key a turn spends once it runs.
    """

    kind: DecisionKind
    source: DecisionSource
    args: dict[str, Any] | None = None
    reason: str | None = None
    raw: Any = field(default=None, compare=False)
    key: str | None = field(default=None, compare=False)


class DecisionBook(DictMapping):
    """The stored decisions of one run or resume; each is spent by the turn that uses it.

    A read-only mapping for lookups (a copy of what was given: the caller's mapping is
    never changed) plus :meth:`consume`, which the loop calls with the keys a turn used
    once every approval call of that turn is decided and the turn goes on to run.
    """

    __slots__ = ()

    def __init__(self, decisions: Mapping[str, Any] | None = None) -> None:
        self._data = dict(decisions or {})

    def consume(self, keys: Iterable[str]) -> None:
        """Spend the decisions stored under ``keys`` (unknown keys are ignored)."""
        for key in keys:
            self._data.pop(key, None)

    def __repr__(self) -> str:
        return f"DecisionBook({self._data!r})"


def _malformed(tool: str, value: Any, why: str) -> HitlDecisionError:
    return HitlDecisionError(f"malformed decision for tool {tool!r}: {value!r} ({why})")


def _parse_mapping(
    tool: Tool, value: Mapping[str, Any]
) -> tuple[str, dict[str, Any] | None, str | None]:
    """``(kind, args, reason)`` of a one-key mapping decision; ``HITL_DECISION`` if malformed."""
    if len(value) != 1:
        raise _malformed(tool.name, value, "a decision is a mapping with exactly one key")
    ((kind, payload),) = value.items()
    if kind == "approve":
        raise _malformed(tool.name, value, 'an approval is the string "approve"')
    if kind == "suspend":
        if payload is not True:
            raise _malformed(tool.name, value, '{"suspend": True} or "suspend"')
        return kind, None, None
    if kind == "edit":
        if not isinstance(payload, Mapping) or not all(isinstance(k, str) for k in payload):
            raise _malformed(tool.name, value, "edit takes a mapping of new arguments")
        return kind, dict(payload), None
    if kind == "reject":
        if payload is True:
            return kind, None, _DEFAULT_REJECTION
        if isinstance(payload, str) and payload.strip():
            return kind, None, payload
        raise _malformed(tool.name, value, "reject takes a non-empty reason string")
    raise _malformed(tool.name, value, f"the kinds are {list(DECISION_KINDS)}")


def parse_decision(value: Any, *, tool: Tool, source: DecisionSource) -> ResolvedDecision:
    """Validate one decision for ``tool``; ``HITL_DECISION`` if malformed or not allowed."""
    kind: str
    args: dict[str, Any] | None = None
    reason: str | None = None
    if isinstance(value, str):
        kind = value
        if kind == "edit":
            raise _malformed(tool.name, value, 'an edit needs {"edit": new_args}')
        if kind not in DECISION_KINDS:
            raise _malformed(tool.name, value, f"the kinds are {list(DECISION_KINDS)}")
        if kind == "reject":
            reason = _DEFAULT_REJECTION
    elif isinstance(value, Mapping):
        kind, args, reason = _parse_mapping(tool, value)
    else:
        raise _malformed(tool.name, value, "expected a string or a one-key mapping")
    if kind not in tool.allowed_decisions:
        raise HitlDecisionError(
            f"decision {kind!r} is not allowed for tool {tool.name!r} "
            f"(allowed: {list(tool.allowed_decisions)})"
        )
    return ResolvedDecision(kind, source, args=args, reason=reason, raw=value)


def check_edit(decision: ResolvedDecision, tool: Tool) -> None:
    """``HITL_DECISION`` when ``decision`` edits the call into arguments ``tool`` refuses."""
    if decision.kind == "edit" and decision.args is not None:
        try:
            tool.validate(decision.args)
        except ToolArgumentsError as exc:
            raise HitlDecisionError(f"edited arguments are invalid: {exc.message}") from None


def check_decisions(decisions: object) -> Mapping[str, Any] | None:
    """``decisions`` if it is ``None`` or a mapping with ``str`` keys, else ``HITL_DECISION``.

    Only the container is checked here; each decision is checked against its tool when a
    call looks it up (:func:`parse_decision`).
    """
    if decisions is None:
        return None
    if not isinstance(decisions, Mapping):
        raise HitlDecisionError(
            "decisions must be a mapping of hitl_key(tool, args) or tool name to a decision, "
            f"not {type(decisions).__name__}"
        )
    bad = [key for key in decisions if not isinstance(key, str)]
    if bad:
        raise HitlDecisionError(
            f"decision keys are hitl_key(tool, args) strings or tool names, not {bad[0]!r}"
        )
    return decisions


def find_decision(
    decisions: Mapping[str, Any] | None, tool: str, args: Mapping[str, Any]
) -> tuple[Any, DecisionSource] | None:
    """The stored decision for a call: exact key, then JSON-equal key, then bare tool name."""
    found = match_decision(decisions, tool, args)
    return None if found is None else (found[1], found[2])


def match_decision(
    decisions: Mapping[str, Any] | None, tool: str, args: Mapping[str, Any]
) -> tuple[str, Any, DecisionSource] | None:
    """Like :func:`find_decision`, with the key the decision is stored under first."""
    if not decisions:
        return None
    key = hitl_key(tool, args)
    if key in decisions:
        return key, decisions[key], "exact"
    prefix = f"{tool}:"
    plain = dict(args)
    for candidate, value in decisions.items():
        if not candidate.startswith(prefix):
            continue
        try:
            parsed = json.loads(candidate[len(prefix) :])
        except ValueError:
            continue
        if parsed == plain:
            return candidate, value, "exact"
    if tool in decisions:
        return tool, decisions[tool], "wildcard"
    return None


async def resolve_decision(
    tool: Tool,
    args: Mapping[str, Any],
    *,
    decisions: Mapping[str, Any] | None,
    decide: DecideCallback | None,
) -> ResolvedDecision:
    """The decision for one call of an approval tool (stored, else callback, else suspend)."""
    found = match_decision(decisions, tool.name, args)
    if found is not None:
        key, value, source = found
        return replace(parse_decision(value, tool=tool, source=source), key=key)
    if decide is not None:
        value = await maybe_await(decide(tool.name, dict(args)))
        return parse_decision(value, tool=tool, source="callback")
    return ResolvedDecision("suspend", "default")
