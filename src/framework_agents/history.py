"""Well-formedness of histories: checking, repairing and trimming.

A history is *well formed* when every ``role="tool"`` message answers a call of the
assistant turn before it (only tool messages may stand between them), and every call of an
assistant turn is answered before the next non-tool message. Providers reject anything
else, so every component that stores, cuts or sends a history keeps this property.

The helpers here work on *groups*: an assistant turn with tool calls together with the
tool results that follow it form one group, and every other message is a group of one.
Cutting a history only between groups keeps it well formed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice, repeat
from typing import overload

from .errors import InvalidArgumentError
from .messages import Message, ToolCall

__all__ = [
    "INTERRUPTED_TEXT",
    "CheckedHistory",
    "group_bounds",
    "is_well_formed",
    "repair_history",
    "trim_dangling",
    "well_formed_problems",
]

#: Text of the tool result synthesised for a call that never got one.
INTERRUPTED_TEXT = "Tool call was interrupted before it returned a result."


def _messages(messages: Iterable[Message], fn: str) -> Sequence[Message]:
    """``messages`` as a sequence of :class:`Message`, or a clear ``INVALID_ARGUMENT``."""
    if isinstance(messages, str | bytes | Mapping | Message) or not isinstance(messages, Iterable):
        raise InvalidArgumentError(
            f"{fn}() takes a sequence of Message objects, not {type(messages).__name__}"
        )
    seq = messages if isinstance(messages, Sequence) else list(messages)
    if all(map(isinstance, seq, repeat(Message))):  # the hot path: one C-level pass
        return seq
    for i, msg in enumerate(seq):
        if not isinstance(msg, Message):
            raise InvalidArgumentError(
                f"item {i} given to {fn}() is a {type(msg).__name__}, not a Message"
            )
    return seq


def well_formed_problems(messages: Sequence[Message]) -> list[str]:
    """Every reason ``messages`` is not well formed (empty when it is)."""
    if isinstance(messages, CheckedHistory):
        return []
    messages = _messages(messages, "well_formed_problems")
    problems: list[str] = []
    open_calls: dict[str, ToolCall] = {}
    answered: set[str] = set()
    owner: int | None = None

    def close(at: int) -> None:
        for call_id in open_calls:
            if call_id not in answered:
                problems.append(f"call {call_id!r} of message {owner} unanswered before {at}")

    for i, msg in enumerate(messages):
        if msg.role == "tool":
            cid = msg.tool_call_id
            if cid is None or cid not in open_calls:
                problems.append(f"message {i}: tool result {cid!r} answers no open call")
            elif cid in answered:
                problems.append(f"message {i}: duplicate tool result for {cid!r}")
            else:
                answered.add(cid)
            continue
        if open_calls:  # nothing to close or reset after a message without calls
            close(i)
            open_calls, answered = {}, set()
        owner = i
        if msg.role == "assistant" and msg.tool_calls:
            ids = [c.id for c in msg.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate tool call ids")
            open_calls = {c.id: c for c in msg.tool_calls}
    close(len(messages))
    return problems


def is_well_formed(messages: Sequence[Message]) -> bool:
    """Whether every tool result answers an open call and every call is answered."""
    return not well_formed_problems(messages)


def _interrupted_result(turn: str, call: ToolCall) -> Message:
    """The result synthesised for ``call`` of the assistant turn whose id is ``turn``.

    Its id, ``interrupted-<turn id>-<call id>``, is deterministic (repair stays idempotent
    and reproducible across processes, and the repair of a history does not depend on what
    precedes it) and unique: call ids are unique within a turn, but may repeat across
    turns (some providers number calls per turn), and two messages with one id are one
    message to every memory (saves dedupe by id).
    """
    return Message(
        "tool",
        INTERRUPTED_TEXT,
        tool_call_id=call.id,
        name=call.name,
        id=f"interrupted-{turn}-{call.id}",
        metadata={"kind": "interrupted"},
    )


class CheckedHistory(Sequence[Message]):
    """A history known to be well formed: an immutable sequence checked once, then grown.

    ``CheckedHistory(messages)`` checks every message (``INVALID_ARGUMENT`` naming the
    problems when they are not well formed). Growing one costs what is new, not the
    history: :meth:`extend` and :meth:`of` check only the added messages, because a
    well-formed history followed by a well-formed continuation is well formed, and
    nothing else is (its calls are all answered, so a leading tool result of the
    continuation could only be an orphan or a duplicate). :func:`repair_history` returns a
    checked history as a plain list without looking at it again. Messages are immutable,
    so a checked history stays checked.

    Nothing is copied to grow or cut one: histories are windows onto an append-only list
    shared with the histories they grew from (the newest one appends in place; extending
    an older one copies first), and a window that leaves most of that list behind moves
    to a list of its own, so what it keeps alive stays proportional to its length.
    """

    __slots__ = ("_log", "_start", "_stop")

    _log: list[Message]
    _start: int
    _stop: int

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        """Check ``messages`` (all of them) and hold them."""
        if isinstance(messages, CheckedHistory):
            self._log, self._start, self._stop = messages._log, messages._start, messages._stop
            return
        seq = list(_messages(messages, "CheckedHistory"))
        problems = well_formed_problems(seq)
        if problems:
            raise InvalidArgumentError("the history is not well formed: " + "; ".join(problems[:5]))
        self._log, self._start, self._stop = seq, 0, len(seq)

    @classmethod
    def _window(cls, log: list[Message], start: int, stop: int) -> CheckedHistory:
        """A history over ``log[start:stop]``, which the caller knows to be well formed."""
        view = object.__new__(cls)
        view._log, view._start, view._stop = log, start, stop
        return view

    @classmethod
    def repaired(cls, messages: Sequence[Message]) -> CheckedHistory:
        """``repair_history(messages)`` as a checked history (one pass: repair makes it so)."""
        if isinstance(messages, CheckedHistory):
            return messages
        fixed = repair_history(messages)
        return cls._window(fixed, 0, len(fixed))

    # -- the sequence -------------------------------------------------------------------

    def __len__(self) -> int:
        """The number of messages."""
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        """A message, or a slice as a new list."""
        if isinstance(index, slice):
            start, stop, step = index.indices(self._stop - self._start)
            if step == 1:
                return self._log[self._start + start : self._start + max(start, stop)]
            return self.to_list()[index]
        n = self._stop - self._start
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("CheckedHistory index out of range")
        return self._log[self._start + index]

    def __iter__(self) -> Iterator[Message]:
        """The messages, oldest first."""
        return islice(self._log, self._start, self._stop)

    def to_list(self) -> list[Message]:
        """The messages as a new list (one C-level copy)."""
        return self._log[self._start : self._stop]

    def _messages(self) -> list[Message]:
        """The messages as a list to read, never to change.

        The shared list itself when this history spans all of it (no copy), else a copy.
        """
        log = self._log
        if self._start == 0 and self._stop == len(log):
            return log
        return log[self._start : self._stop]

    def _head(self, n: int) -> list[Message]:
        """The first ``n`` messages as a list to read, never to change (see ``_messages``)."""
        log = self._log
        if self._start == 0 and n == len(log):
            return log
        return log[self._start : self._start + n]

    def __eq__(self, other: object) -> bool:
        """Equal to a checked history, list or tuple holding equal messages in order."""
        if isinstance(other, CheckedHistory):
            if other._log is self._log and other._start == self._start:
                return other._stop == self._stop
            return len(other) == len(self) and other._messages() == self._messages()
        if isinstance(other, list):
            return len(other) == len(self) and other == self._messages()
        if isinstance(other, tuple):
            return len(other) == len(self) and list(other) == self.to_list()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"CheckedHistory({self.to_list()!r})"

    def __reduce__(self) -> tuple[type[CheckedHistory], tuple[list[Message]]]:
        """Pickled as its messages (checked again when loaded)."""
        return (CheckedHistory, (self.to_list(),))

    # -- growing and cutting ------------------------------------------------------------

    def extend(self, messages: Sequence[Message]) -> CheckedHistory:
        """This history followed by ``messages``, which alone must be well formed."""
        added = _messages(messages, "CheckedHistory.extend")
        if not added:
            return self
        problems = well_formed_problems(added)
        if problems:
            raise InvalidArgumentError(
                "the added messages are not a well-formed continuation: " + "; ".join(problems[:5])
            )
        log = self._log
        if self._stop != len(log):  # an older history: another one grew from it already
            log = log[self._start : self._stop]
            self_start = 0
        else:
            self_start = self._start
        log.extend(added)
        return CheckedHistory._window(log, self_start, len(log))

    def suffix(self, start: int) -> CheckedHistory:
        """The messages from index ``start`` on, which must begin a group.

        A well-formed history cut where a group begins stays well formed (every group after
        the cut is whole), so nothing is checked again; ``INVALID_ARGUMENT`` if ``start``
        falls inside a group (on a tool result).
        """
        n = len(self)
        if not 0 <= start <= n:
            raise InvalidArgumentError(f"suffix start {start} is outside 0..{n}")
        if start == 0:
            return self
        if start < n and self[start].role == "tool":
            raise InvalidArgumentError(f"suffix start {start} cuts a tool group")
        begin = self._start + start
        if begin > self._stop - begin:  # most of the shared list is behind: move out
            own = self._log[begin : self._stop]
            return CheckedHistory._window(own, 0, len(own))
        return CheckedHistory._window(self._log, begin, self._stop)

    def starts(self, messages: Sequence[Message]) -> bool:
        """Whether ``messages`` begins with this history's messages (equal, in order)."""
        n = len(self)
        if len(messages) < n:
            return False
        if isinstance(messages, CheckedHistory):
            if messages._log is self._log and messages._start == self._start:
                return True  # one grew from the other: they share the list
            return messages._head(n) == self._messages()
        if isinstance(messages, list) and len(messages) == n:
            return messages == self._messages()  # no copy of either side
        head = messages[:n]
        return (head if isinstance(head, list) else list(head)) == self._messages()

    def tail_offset(self, other: CheckedHistory) -> int | None:
        """Where in ``other`` this history begins if it is ``other``'s tail, else ``None``.

        Costs this history's length (a C-level comparison), never ``other``'s.
        """
        n, m = len(self), len(other)
        if n > m:
            return None
        if other._log is self._log and other._stop == self._stop:
            return self._start - other._start
        if n == m:
            return 0 if other._messages() == self._messages() else None
        tail = other._log[other._stop - n : other._stop]
        return m - n if tail == self._messages() else None

    @classmethod
    def of(cls, messages: Sequence[Message], base: CheckedHistory) -> CheckedHistory:
        """``messages`` checked, looking only past ``base`` when they start with it.

        ``base`` is a checked history that ``messages`` usually begin with (the same
        message objects, or equal ones): then only the rest is checked. Otherwise all of
        ``messages`` is.
        """
        if isinstance(messages, CheckedHistory):
            return messages
        n = len(base)
        if n and base.starts(messages):
            return base.extend(messages[n:])
        return cls(messages)


def repair_history(messages: Sequence[Message]) -> list[Message]:
    """Return a well-formed copy of ``messages``, adding and dropping only what it must.

    * An unanswered call gets a synthesised result (``metadata["kind"] == "interrupted"``),
      placed after the results that did arrive.
    * A tool result that answers no open call (orphaned, duplicate, or without an id) is
      dropped.
    * A call whose id repeats an earlier call of the same turn is dropped (no result could
      tell them apart).

    The input list and its messages are not modified; a well-formed history comes back
    equal (same message objects, same order). Deterministic and idempotent. A
    :class:`CheckedHistory` is well formed already: it comes back as a list at once.
    """
    if isinstance(messages, CheckedHistory):
        return messages.to_list()
    messages = _messages(messages, "repair_history")
    out: list[Message] = []
    # The open assistant turn's calls by id (empty between turns) and the ids answered so
    # far. The agent repairs on every load and before model calls, so the common case (no
    # open turn, nothing to add) stays a dict lookup per message.
    calls: dict[str, ToolCall] = {}
    answered: set[str] = set()
    turn = ""  # the id of the assistant turn that made ``calls``
    append = out.append
    for msg in messages:
        if msg.role == "tool":
            cid = msg.tool_call_id
            if cid in calls and cid not in answered:
                answered.add(cid)
                append(msg)
            continue
        if calls:
            _close_turn(out, turn, calls, answered)
            calls, answered = {}, set()
        if msg.role == "assistant" and msg.tool_calls:
            turn = msg.id
            calls, msg = _open_turn(msg)
        append(msg)
    _close_turn(out, turn, calls, answered)
    return out


def _open_turn(msg: Message) -> tuple[dict[str, ToolCall], Message]:
    """The calls of assistant turn ``msg`` by id, and ``msg`` without repeated call ids."""
    calls: dict[str, ToolCall] = {}
    for call in msg.tool_calls:
        calls.setdefault(call.id, call)
    if len(calls) != len(msg.tool_calls):
        msg = msg.model_copy(update={"tool_calls": list(calls.values())})
    return calls, msg


def _close_turn(
    out: list[Message], turn: str, calls: dict[str, ToolCall], answered: set[str]
) -> None:
    """Append a synthesised result to ``out`` for each of ``calls`` left unanswered."""
    if len(answered) != len(calls):
        out.extend(_interrupted_result(turn, c) for c in calls.values() if c.id not in answered)


def group_bounds(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Half-open ``(start, end)`` index ranges of the groups of a history.

    An assistant turn with tool calls owns the tool messages that directly follow it; a
    tool message with no such owner (an orphan at the head) is a group of its own.
    """
    messages = _messages(messages, "group_bounds")
    bounds: list[tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        j = i + 1
        if messages[i].role == "assistant" and messages[i].tool_calls:
            while j < n and messages[j].role == "tool":
                j += 1
        bounds.append((i, j))
        i = j
    return bounds


def trim_dangling(messages: Sequence[Message]) -> list[Message]:
    """Drop leading tool results and leading call-only assistant turns (with their results).

    The result never opens on an orphaned tool message or on an assistant turn that holds
    only tool calls. Only the head is touched.
    """
    messages = _messages(messages, "trim_dangling")
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        if msg.role == "tool":
            i += 1
        elif msg.role == "assistant" and msg.tool_calls and not msg.text.strip():
            i += 1
            while i < n and messages[i].role == "tool":
                i += 1
        else:
            break
    return list(messages[i:])
