"""Checkpoints as values: the checks of a save and the copies a store keeps (internal).

Messages and tool calls are immutable values, so a store keeps and hands out the very
objects it was given; only the free-form containers (state, decisions, app_data) and the
lists are its own. A save whose history extends the stored one (the same objects) is
checked for what it adds, not for the whole history. Used by ``FileCheckpointer`` (its
in-process view of the files), ``InMemoryCheckpointer`` and the database checkpointers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from .._persist import reads_back_as_is, same_json_message
from ..errors import InvalidArgumentError
from ..history import well_formed_problems
from ..messages import Message, ReasoningBlock, TextBlock, ToolCall
from ._journal import OVERLAY
from .model import ThreadCheckpoint, check_storable, check_thread_id, turn_problem

#: The content blocks a read makes.
_BLOCKS = (TextBlock, ReasoningBlock)

__all__ = [
    "as_read",
    "check_checkpoint",
    "check_new_part",
    "detached",
    "kept_fields",
    "kept_value",
    "messages_read_back_as_is",
]


def check_checkpoint(checkpoint: object) -> ThreadCheckpoint:
    """``checkpoint`` if it is a consistent ThreadCheckpoint with a safe thread id.

    INVALID_ARGUMENT for another type or turn fields that disagree (``model_copy(update=)``
    skips the model's validators, and a store must not keep what it could not load),
    THREAD_ID_INVALID for the id.
    """
    if not isinstance(checkpoint, ThreadCheckpoint):
        raise InvalidArgumentError(
            f"save() takes a ThreadCheckpoint, not {type(checkpoint).__name__}"
        )
    check_thread_id(checkpoint.thread_id)
    problem = turn_problem(checkpoint)
    if problem is not None:
        raise InvalidArgumentError(
            f"checkpoint of thread {checkpoint.thread_id!r} is inconsistent: {problem}"
        )
    return checkpoint


def check_new_part(checkpoint: ThreadCheckpoint, keep: int) -> None:
    """What a save of ``checkpoint`` must check when its first ``keep`` messages are stored.

    The stored ones were checked when they were saved, so only the rest is looked at:
    well-formedness from the start of the group message ``keep`` belongs to (a
    well-formed prefix closes every group before its last non-tool message), and the
    free-form values of the new messages and of every other field (INVALID_ARGUMENT,
    STATE_NOT_JSON). ``keep=0`` checks it all.
    """
    messages = checkpoint.messages
    start = min(keep, len(messages))
    while start > 0 and messages[start - 1].role == "tool":
        start -= 1
    start = max(0, start - 1)  # the turn whose calls those results answer
    problems = well_formed_problems(messages[start:])
    if problems:
        raise InvalidArgumentError(
            f"checkpoint messages of thread {checkpoint.thread_id!r} are not well formed: "
            + "; ".join(problems[:3])
        )
    check_storable(checkpoint, start=keep)


def detached(
    checkpoint: ThreadCheckpoint, messages: list[Message] | None = None
) -> ThreadCheckpoint:
    """A copy whose containers are its own (messages and calls are values, shared).

    ``messages``: a list of the caller's own to hold instead of a copy of the checkpoint's.
    """
    return checkpoint.model_copy(
        update={
            "messages": list(checkpoint.messages) if messages is None else messages,
            "results": list(checkpoint.results),
            "in_flight": list(checkpoint.in_flight),
            "state": copy.deepcopy(checkpoint.state),
            "decisions": copy.deepcopy(checkpoint.decisions),
            "app_data": copy.deepcopy(checkpoint.app_data),
            "elicitation": copy.deepcopy(checkpoint.elicitation),
        }
    )


def kept_fields(
    checkpoint: ThreadCheckpoint, keep: int, read_back: Callable[[], BaseModel]
) -> tuple[dict[str, Any], list[Message], bool]:
    """What a store keeps for ``checkpoint``, ``keep`` messages stored.

    Its other fields (``OVERLAY``), the messages it adds, and whether those are the
    checkpoint's own: the values themselves when they read back as they are
    (``_reads_back_as_is``; the mutable ones copied), else what ``read_back()`` parses
    from the JSON (holding at least the messages past ``keep``).
    """
    added = checkpoint.messages[keep:]
    if _reads_back_as_is(checkpoint, added):
        fields = {name: getattr(checkpoint, name) for name in OVERLAY}
        for name in ("state", "decisions", "app_data", "elicitation"):
            fields[name] = copy.deepcopy(fields[name])
        fields["results"] = list(checkpoint.results)
        fields["in_flight"] = list(checkpoint.in_flight)
        return fields, added, True
    back = read_back()
    fields = {name: getattr(back, name) for name in OVERLAY}
    read: list[Message] = back.messages[-len(added) :] if added else []  # type: ignore[attr-defined]
    return fields, as_read(read, added), False


def kept_value(
    base: ThreadCheckpoint | None,
    checkpoint: ThreadCheckpoint,
    keep: int,
    read_back: Callable[[], BaseModel],
) -> ThreadCheckpoint:
    """What a store keeps (and a load then gives) for ``checkpoint``, ``keep`` stored.

    :func:`kept_fields`, the kept messages taken from ``base``. The result's messages are
    a new list (one copy of the kept ones): ``base`` is never changed, because a load
    running beside the save (loads take no lock) may be copying it, and a save
    interrupted before the store holds the result must leave it whole. (Extending
    ``base``'s list in place was tried: a concurrent load could then return the new
    messages with the old state.)
    """
    fields, tail, _ = kept_fields(checkpoint, keep, read_back)
    kept: list[Message] = [] if base is None else base.messages[:keep]
    kept += tail
    fields["messages"] = kept
    return (base or checkpoint).model_copy(update=fields)


def _reads_back_as_is(checkpoint: ThreadCheckpoint, added: Sequence[Message]) -> bool:
    """Whether a read of what ``checkpoint`` adds (and its other fields) gives it as it is.

    Every message and call of the exact class a read makes (a subclass's own fields are
    not stored), and every free-form value of the exact JSON types (a tuple reads back
    as a list, an ``int`` subclass as an ``int``...).
    """
    messages = [*added, *checkpoint.results]
    messages += [m for m in (checkpoint.turn, checkpoint.pending_turn) if m is not None]
    calls = [*checkpoint.in_flight, *([checkpoint.pending] if checkpoint.pending else [])]
    values: list[object] = [
        checkpoint.state,
        checkpoint.decisions,
        checkpoint.app_data,
        checkpoint.elicitation,
    ]
    return messages_read_back_as_is(messages, calls, values)


def messages_read_back_as_is(
    messages: Sequence[Message],
    calls: Sequence[ToolCall] = (),
    values: Sequence[object] = (),
) -> bool:
    """Whether a read of ``messages`` (and ``calls``, ``values``) gives them as they are.

    Every message, call and content block of the exact class a read makes, every string
    field an exact ``str`` (``Message.__eq__`` cannot tell a ``str`` subclass apart), the
    containers exact lists and dicts, empty ones included, and the free-form values of
    exact JSON types.
    """
    every_call = list(calls)
    free: list[object] = list(values)
    for m in messages:
        if type(m) is not Message or not _message_as_is(m.__dict__, every_call, free):
            return False
    for c in every_call:
        if type(c) is not ToolCall or type(c.id) is not str or type(c.name) is not str:
            return False
        free.append(c.args)
    return all(map(reads_back_as_is, free))  # a dict or list subclass, empty or not: no


def _message_as_is(d: dict[str, Any], every_call: list[ToolCall], free: list[object]) -> bool:
    """Whether the fields ``d`` of a message are of the exact types a read makes.

    Its calls go to ``every_call`` and its free-form values (metadata, blocks' fields) to
    ``free``, for the caller to check.
    """
    if type(d["role"]) is not str or type(d["id"]) is not str:
        return False
    if any(d[f] is not None and type(d[f]) is not str for f in ("tool_call_id", "name")):
        return False
    content = d["content"]
    if type(content) is not str:
        if type(content) is not list or any(type(b) not in _BLOCKS for b in content):
            return False
        free += [dict(b.__dict__) for b in content]
    if type(d["tool_calls"]) is not list or type(d["metadata"]) is not dict:
        return False
    every_call += d["tool_calls"]
    free.append(d["metadata"])
    return True


def as_read(back: list[Message], saved: Sequence[Message]) -> list[Message]:
    """The messages a read gives: each saved one that reads back as it is is kept itself.

    Messages are immutable values, so a load can hand out the very objects that were
    saved; a caller comparing what it saved with what it loads then compares identities.
    "As it is" is stricter than ``==`` (an ``IntEnum`` equals the ``int`` a read gives,
    a tuple does not read back as one): the read message is handed out then.
    """
    return [
        m if same_json_message(b, m) and messages_read_back_as_is((m,)) else b
        for b, m in zip(back, saved, strict=True)
    ]
