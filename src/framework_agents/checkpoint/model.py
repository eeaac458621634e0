"""The stored shape of a thread: :class:`ThreadCheckpoint` (versioned, strict).

A checkpoint is what a paused or interrupted run needs to go on in another process: the
history, the agent's state and, for human-in-the-loop, what was waiting for a decision.
The fields beyond ``pending`` implement the at-most-once protocol (``docs/checkpoints.md``):

* ``turn`` / ``results``: an assistant turn whose calls are being executed and the results
  of those calls that already landed. The turn is kept *out of* ``messages`` until all its
  calls are answered, so ``messages`` is always a well-formed history on its own.
* ``in_flight``: approved calls of ``turn`` that were about to run, saved *before* the tool
  ran. Finding one in a checkpoint means a process died after deciding to run it and
  before its result was saved: its outcome is unknown.
* ``outcome_unknown``: the ``in_flight`` calls were already reported to a human as such
  (``pending`` is the first of them); a decision given after that may re-run them.
* ``decisions``: decisions given to earlier resumes of the interrupted turn, carried so
  several approval calls of one turn can be decided one interrupt at a time.
* ``interrupt_id``: the id of the open interrupt (``pending``); meaningful only while
  ``pending`` is set. A decision keyed by another interrupt id is stale.
* ``pending_turn``: the assistant turn that made ``pending`` (kept out of ``messages``),
  so ``resume(..., reissue=False)`` can run the very calls the human saw.
* ``elicitation``: set when ``pending`` asked a human a question mid-call (an MCP
  server's elicitation) instead of waiting for an approval: ``{"message", "schema",
  "state"}``; meaningful only while ``pending`` is set. ``turn`` is then the turn being
  executed (``pending`` among its calls) and ``results`` the results of its other calls
  that landed; an answer runs ``pending`` again with it and the turn goes on. While an
  answered call is in flight it holds the question with ``call_id`` and ``answer``
  (``{"action", "content"}``), so settling that call after a crash runs it with its
  answer. Checkpoints written before it existed load with ``None``.
* ``finished``: the run that saved this checkpoint ended on the model's final answer;
  resuming it (with no new prompt) has nothing to continue.
* ``app_data``: JSON the application (or a memory with long-term state, such as an
  in-memory ``GraphMemory`` under ``"framework_agents.graph"``) keeps with the thread.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticSerializationError

from .._persist import json_problem, plain_messages, stored_prefix
from ..errors import StateNotJsonError, ThreadIdInvalidError
from ..messages import (
    Message,
    MessageList,
    ToolCall,
    constructor_only,
    summary_repr_args,
    validate_into,
)

__all__ = [
    "BASE_CHECKPOINT_FORMAT_VERSION",
    "CHECKPOINT_FORMAT_VERSION",
    "THREAD_ID_PATTERN",
    "SavedAt",
    "ThreadCheckpoint",
    "check_saved_at",
    "check_storable",
    "check_thread_id",
    "to_json",
    "turn_problem",
]

#: The newest version of the JSON shape of a checkpoint this release reads; readers refuse
#: newer ones (CHECKPOINT_CORRUPT). 2: a ``checkpoint.json`` that a journal of deltas may
#: follow (``FileCheckpointer``), so a release that cannot apply one refuses it instead of
#: reading the state before the journal.
CHECKPOINT_FORMAT_VERSION = 2
#: The version of a checkpoint as a value (and as every other store keeps it).
BASE_CHECKPOINT_FORMAT_VERSION = 1

#: A thread id is one safe directory name (no separators, no leading dot, no ``..``).
THREAD_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_thread_id(thread_id: object) -> str:
    """Return ``thread_id`` if it is a single safe directory name, else raise THREAD_ID_INVALID.

    Besides :data:`THREAD_ID_PATTERN`, a thread id is a valid storage key segment: no
    trailing dot and no Windows device name (``CON``, ``nul``, ``com1``, ``LPT9.txt``...),
    so every record kept under the thread's id (a server's timeline, its list entry) can
    be stored. One rule for ids everywhere.
    """
    if not isinstance(thread_id, str) or THREAD_ID_PATTERN.fullmatch(thread_id) is None:
        raise ThreadIdInvalidError(
            f"thread id {thread_id!r} is not a single safe directory name "
            f"(^{THREAD_ID_PATTERN.pattern}$)"
        )
    # Imported here: the sessions package imports this module (through retention).
    from ..sessions._base import is_valid_segment

    if not is_valid_segment(thread_id):
        raise ThreadIdInvalidError(
            f"thread id {thread_id!r} is not a single safe directory name (it ends with a "
            "dot or is a reserved device name such as CON, NUL, COM1 or LPT1)"
        )
    return thread_id


def check_saved_at(value: object) -> object:
    """Refuse numbers (and bools) as ``saved_at``: a stored time is an ISO 8601 string.

    Pydantic would read ``5`` as five seconds after the epoch; a document holding one was
    not written by a checkpointer.
    """
    if isinstance(value, bool | int | float):
        raise ValueError(f"saved_at must be an ISO 8601 date-time, not the number {value!r}")
    return value


#: A stored ``saved_at``: a date-time, never read from a number (:func:`check_saved_at`).
SavedAt = Annotated[datetime, BeforeValidator(check_saved_at)]


def _json_problem(value: Any, path: str) -> str | None:
    """Where ``value`` stops being plain JSON (the persistence layer's one rule), or ``None``."""
    return json_problem(value, path)


def _message_problem(message: Message, where: str) -> str | None:
    if message.metadata:
        problem = _json_problem(message.metadata, f"{where}.metadata")
        if problem:
            return problem
    for j, call in enumerate(message.tool_calls):
        problem = _json_problem(call.args, f"{where}.tool_calls[{j}].args")
        if problem:
            return problem
    return None


def check_storable(checkpoint: ThreadCheckpoint, *, start: int = 0) -> None:
    """STATE_NOT_JSON unless every free-form value of ``checkpoint`` is plain JSON.

    A NaN would be stored as ``null``, a set as a list, a tuple key would crash the
    serialiser: a checkpoint is refused rather than stored altered. Only the messages
    from ``start`` on are looked at (the ones before are stored, checked when saved).
    """
    problems: list[str | None] = [
        _json_problem(checkpoint.state, "state"),
        _json_problem(checkpoint.decisions, "decisions"),
        _json_problem(checkpoint.app_data, "app_data"),
        _json_problem(checkpoint.elicitation, "elicitation"),
    ]
    calls = [*checkpoint.in_flight, *([checkpoint.pending] if checkpoint.pending else [])]
    problems += [_json_problem(c.args, f"call {c.id!r}.args") for c in calls]
    tail = [("turn", checkpoint.turn)] if checkpoint.turn is not None else []
    tail += [(f"results[{i}]", m) for i, m in enumerate(checkpoint.results)]
    # Only messages with free-form values can fail (no label built for the others).
    tail += [
        (f"messages[{i}]", m)
        for i, m in enumerate(checkpoint.messages[start:], start)
        if m.metadata or m.tool_calls
    ]
    problems += [_message_problem(m, where) for where, m in tail]
    found = next((p for p in problems if p), None)
    if found:
        raise StateNotJsonError(f"checkpoint of thread {checkpoint.thread_id!r}: {found}")


def turn_problem(checkpoint: ThreadCheckpoint) -> str | None:
    """Why ``turn``, ``results``, ``in_flight`` and ``outcome_unknown`` disagree, or ``None``."""
    if checkpoint.turn is None:
        if checkpoint.results or checkpoint.in_flight:
            return "results and in_flight need the turn they belong to"
    else:
        problem = _open_calls_problem(checkpoint)
        if problem:
            return problem
    if checkpoint.outcome_unknown and not checkpoint.in_flight:
        return "outcome_unknown needs in_flight calls"
    pending, turn = checkpoint.pending, checkpoint.turn
    if (  # meaningful only while a call is pending
        checkpoint.elicitation is not None
        and pending is not None
        and (turn is None or all(c.id != pending.id for c in turn.tool_calls))
    ):
        return "an elicitation needs its pending call among the calls of the turn"
    return None


def _open_calls_problem(checkpoint: ThreadCheckpoint) -> str | None:
    """Why ``results`` and ``in_flight`` do not each answer a distinct call of ``turn``."""
    assert checkpoint.turn is not None
    calls = {c.id for c in checkpoint.turn.tool_calls}
    answered: set[str] = set()
    for result in checkpoint.results:
        cid = result.tool_call_id
        if result.role != "tool" or cid not in calls or cid in answered:
            return f"result {result.id!r} answers no open call of the turn"
        answered.add(cid)
    for call in checkpoint.in_flight:
        if call.id not in calls or call.id in answered:
            return f"in-flight call {call.id!r} is no open call of the turn"
    return None


class _Validated(threading.local):
    """The messages this OS thread last validated for a ``ThreadCheckpoint``, in order.

    Private (never handed out), so what it holds stays what was checked. A checkpoint of
    a growing history is built again each save from a list whose first items are the
    same objects: those are found by comparing pointers (``stored_prefix``, strict), and
    only the rest is validated. It keeps the last history built in this OS thread alive
    until the next one replaces it. Only plain messages are recorded (``plain_messages``:
    a subclass's own ``==`` could call anything equal to them).
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.busy = False  # being compared (it holds the caller's unvalidated tail then)


_VALIDATED = _Validated()


def _known_prefix(items: list[Any]) -> int:
    """How many leading ``items`` this OS thread validated last (``_Validated``).

    ``items`` is the constructor's own copy of the caller's list, so user code run by
    the comparison (a value's ``__eq__``) cannot change what was compared. A checkpoint
    built meanwhile, from inside that comparison, does not use the record (``-1``).
    """
    record = _VALIDATED
    if record.busy:
        return -1
    record.busy = True
    try:
        return stored_prefix(record.messages, items)
    except Exception:  # a value's own ``==`` raised: everything is validated below
        return 0
    finally:
        record.busy = False


def _checked_messages(data: dict[str, Any]) -> list[Message] | None:
    """``data["messages"]`` validated on its own, put aside (``data`` then holds ``[]``).

    The model's own schema reaches ``Message`` through a shared definition (four fields
    hold messages), which costs a recursion check per item: twice the time of a list
    schema with ``Message`` inline, on a history of thousands. Validated alone, the list
    comes out the same (the same instances, in a new list); only the error of a bad item
    would name another location, so then the model validates it and reports as ever.

    Only the items past what this thread validated last (``_known_prefix``) are
    validated: a history of thousands is otherwise a pass of pydantic over every message
    per save, the one part of building a checkpoint that grew with the history.
    """
    messages = data.get("messages")
    if messages.__class__ is not list or not messages:
        return None
    items: list[Any] = list(messages)  # the checkpoint's list: the one copy it needs
    known = _known_prefix(items)
    keep = max(known, 0)
    try:
        tail = MessageList.validate_python(items[keep:] if keep else items)
    except ValidationError:
        return None
    if known >= 0:
        record = _VALIDATED.messages
        del record[keep:]
        # Up to the first message that is not plain (a record holds only plain ones).
        record += itertools.takewhile(lambda m: plain_messages((m,)), tail)
    data["messages"] = []
    if not keep:
        return tail
    del items[keep:]
    items += tail
    return items


def to_json(model: BaseModel) -> bytes:
    """The JSON bytes of a checked checkpoint (STATE_NOT_JSON for unencodable text)."""
    try:
        return model.__pydantic_serializer__.to_json(model)
    except PydanticSerializationError as exc:  # e.g. a lone surrogate in some text
        raise StateNotJsonError(f"a checkpoint cannot be stored as JSON: {exc}") from None


def _now() -> datetime:
    return datetime.now(UTC)


class ThreadCheckpoint(BaseModel):
    """A thread's saved history, state and pending approval (``version`` = format version)."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(BASE_CHECKPOINT_FORMAT_VERSION, strict=True)  # 1.0, "1", true: corrupt
    thread_id: str
    saved_at: SavedAt = Field(default_factory=_now)
    messages: list[Message] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    pending: ToolCall | None = None
    turn: Message | None = None
    results: list[Message] = Field(default_factory=list)
    in_flight: list[ToolCall] = Field(default_factory=list)
    outcome_unknown: bool = False
    decisions: dict[str, Any] = Field(default_factory=dict)
    interrupt_id: str | None = None
    pending_turn: Message | None = None
    finished: bool = False
    app_data: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None

    @constructor_only  # parsing a stored checkpoint need not go through Python
    def __init__(
        self,
        thread_id: str | None = None,
        saved_at: datetime | None = None,
        messages: list[Message] | None = None,
        state: dict[str, Any] | None = None,
        pending: ToolCall | None = None,
        /,
        **data: Any,
    ) -> None:
        """Create it; arguments are described in the class docstring."""
        for name, value in (
            ("thread_id", thread_id),
            ("saved_at", saved_at),
            ("messages", messages),
            ("state", state),
            ("pending", pending),
        ):
            if value is not None:
                if name in data:  # as Python says for any other signature
                    raise TypeError(f"ThreadCheckpoint() got multiple values for argument {name!r}")
                data[name] = value
        if "thread_id" not in data:
            check_thread_id(None)  # THREAD_ID_INVALID, not a pydantic "field required"
        given = data.get("messages")
        checked = _checked_messages(data)
        if checked is None:
            validate_into(self, data)  # bad data: INVALID_ARGUMENT, still a ValidationError
            return
        try:
            # No validator of this model reads ``messages`` (it is [] here until set below).
            super().__init__(**data)
        except ValidationError:
            # Validated whole again: the error then shows the caller's input (and a
            # validator added later that needs the messages would see them).
            data["messages"] = given
            validate_into(self, data)
            return
        self.__dict__["messages"] = checked

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """pydantic's, with long message lists shown by their ends and length."""
        return summary_repr_args(super().__repr_args__(), ("messages", "results"))

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value > CHECKPOINT_FORMAT_VERSION:
            raise ValueError(
                f"checkpoint format version {value} is newer than this framework-agents "
                f"understands ({CHECKPOINT_FORMAT_VERSION}); upgrade to read it"
            )
        if value < 1:
            raise ValueError(f"checkpoint format version {value} is not a valid version")
        return value

    @field_validator("thread_id", mode="before")
    @classmethod
    def _safe_thread_id(cls, value: object) -> str:
        # Before pydantic's coercion: bytes, numbers and None are THREAD_ID_INVALID.
        return check_thread_id(value)

    @field_validator("saved_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        # Naive datetimes are taken as UTC so every stored time is comparable.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value

    @field_validator("turn")
    @classmethod
    def _turn_has_calls(cls, value: Message | None) -> Message | None:
        if value is not None and (value.role != "assistant" or not value.tool_calls):
            raise ValueError("turn must be an assistant message with tool calls")
        return value

    @model_validator(mode="after")
    def _consistent_turn(self) -> ThreadCheckpoint:
        problem = turn_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    def open_interrupt_id(self) -> str | None:
        """The id of the open interrupt: ``interrupt_id`` while ``pending`` is set, else None."""
        return self.interrupt_id if self.pending is not None else None

    def interrupted_turn(self) -> Message | None:
        """The assistant turn that made ``pending`` (``None`` when nothing is pending).

        ``pending_turn`` when it holds the pending call, else a turn holding only that call
        (a checkpoint written before turns were stored, or by a backend that drops them).
        """
        pending = self.pending
        if pending is None:
            return None
        turn = self.pending_turn
        if turn is not None and any(c.id == pending.id for c in turn.tool_calls):
            return turn
        return Message("assistant", "", tool_calls=[pending])

    def resumable_history(self) -> list[Message]:
        """``messages`` plus the executed part of ``turn`` (unanswered calls left open)."""
        if self.turn is None:
            return list(self.messages)
        return [*self.messages, self.turn, *self.results]
