"""The persisted-message codec every stored form shares: encode, parse in slices, prefix.

Memory, checkpoints, snapshots and the database stores keep a message as the JSON
fragment ``Message``'s serialiser writes (fields in declaration order, no spaces). This
module writes that fragment, refusing a message that would not read back equal
(:func:`encode_message`), and reads arrays of such fragments back in slices, so a large
history is never held twice while it loads (:func:`parse_items`, :func:`split_messages`).
A save writes only what its store does not hold yet: :func:`stored_prefix` and
:func:`shared_prefix` find that part, comparing by ``Message.__eq__`` (stored alike),
strictly (only the stored messages' ``==`` decides, never the caller's objects').
Each document's own shape (its keys, version and checksum) stays with its store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

# framework_agents.messages first: making Message writes _pydantic_fast's copy_message.
from ..messages import STRICT_EQUALITY, Message, MessageList  # isort: skip
from .._pydantic_fast import copy_message, share_fields_set
from ..errors import InvalidArgumentError
from ._json import json_problem, strict_loads

__all__ = [
    "PARSE_SLICE",
    "encode_message",
    "parse_items",
    "plain_messages",
    "same_json_message",
    "shared_prefix",
    "split_messages",
    "stored_prefix",
    "strict_equality",
]

_SERIALIZER = Message.__pydantic_serializer__
#: Bytes of a messages array parsed at a time (see :func:`parse_items`).
PARSE_SLICE = 1 << 16
#: Where a message's fragment follows another's: the serialiser writes the fields in
#: the order ``Message`` declares them, so every fragment opens ``{"role":"``.
_NEXT = b',{"' + next(iter(Message.model_fields)).encode("ascii") + b'":"'


def parse_items(data: bytes, start: int, end: int, *, exact: bool = False) -> list[Message]:
    """The messages of the JSON array ``data[start - 1 : end + 1]`` (brackets included).

    For bytes our writer serialised (checksummed, or compared with their serialisation):
    parsed about :data:`PARSE_SLICE` bytes at a time, cut where a message's fragment
    begins, and each slice's messages share one fields set
    (:func:`~framework_agents._pydantic_fast.share_fields_set`). So a load of thousands
    of messages never holds a second copy of the array nor a set per message: its peak is
    the file plus the messages, half of what one parse of it all allocates, and faster.

    A cut is only ever made at ``,{"role":"`` outside any string (a quote inside a string
    is escaped), which is either between two messages or inside one message's nested
    values (a tool's arguments holding a list of ``{"role": ...}`` objects, say): then the
    slice leaves that message's ``{`` open and cannot parse, and it is cut further on
    instead (a few tries, each looking twice as far), at worst at the end. Slices already
    parsed are kept.
    Raises what ``MessageList.validate_json`` raises for the whole array; with
    ``exact`` (bytes no checksum vouches for), ``ValueError`` as soon as a slice is not
    byte for byte the serialisation of its messages, or does not parse (no second parse
    to name the problem: the caller's strict reader does that).
    """
    out: list[Message] = []
    at = start
    while at < end:
        cut = data.find(_NEXT, at + PARSE_SLICE, end) if end - at > PARSE_SLICE else -1
        messages = None
        jump = _FIRST_JUMP
        for _ in range(_RETRIES):
            if cut < 0:
                break
            messages = _parse_slice(data, at, cut, exact)
            if messages is not None:
                break
            # The cut fell inside a message: cut further on, twice as far each time, so a
            # message holding many such objects is passed in a few tries.
            cut = data.find(_NEXT, cut + jump, end)
            jump *= 2
        if messages is None:
            cut = end
            messages = _parse_slice(data, at, end, exact)
            if messages is None and exact:
                raise ValueError("the messages array does not parse")
            if messages is None:  # not a cutting problem: report as one parse does
                return MessageList.validate_json(data[start - 1 : end + 1])
        share_fields_set(messages)
        out += messages
        at = cut + 1
    return out


#: How many later cuts a slice that did not parse is tried at before it takes the rest,
#: and how far past the failed cut the first of them is looked for (then twice as far).
_RETRIES = 4
_FIRST_JUMP = 1024


def _parse_slice(data: bytes, at: int, cut: int, exact: bool = False) -> list[Message] | None:
    """The messages of ``data[at:cut]`` as an array, or ``None`` when it does not parse.

    With ``exact``, ``ValueError`` when they parse but do not serialise to those bytes (a
    slice that parses was cut between messages: see :func:`parse_items`).
    """
    body = b"".join((b"[", memoryview(data)[at:cut], b"]"))
    try:
        messages = MessageList.validate_json(body)
    except (ValidationError, ValueError, RecursionError):
        return None
    if exact and MessageList.dump_json(messages) != body:
        raise ValueError("the messages are not in their stored form")
    return messages


_T = TypeVar("_T")


def split_messages(
    data: bytes, opening: bytes, closings: Sequence[bytes], read_rest: Callable[[bytes], _T | None]
) -> tuple[list[Message], _T] | None:
    """A stored document's messages, parsed in slices, and what ``read_rest`` makes of the rest.

    ``opening`` ends where the messages array begins (its first occurrence: the keys
    before it hold no such bytes), and the array ends where one of ``closings`` begins.
    The last occurrence is tried first, then the one before (a few at most): the rest,
    ``data`` with an empty array in place of the messages, is handed to ``read_rest``,
    which returns ``None`` unless it reads back byte for byte (a closing inside a later
    value leaves a rest that does not), and only then are the messages parsed, each
    slice compared with its serialisation (:func:`parse_items` with ``exact``). So the
    whole is exactly what the writer made. ``None``: the caller reads the document whole.
    """
    at = data.find(opening)
    if at < 0:
        return None
    start = at + len(opening)
    limit = len(data)
    for _ in range(_SPLIT_TRIES):
        end = max(data.rfind(c, start, limit) for c in closings)
        if end < 0:
            return None
        limit = end  # if this is not the array's end, it is before this
        rest = read_rest(data[:start] + data[end:])
        if rest is None:
            continue
        # A rest that reads back byte for byte is balanced: this is the array's end, and
        # messages not in their stored form make the document not canonical.
        try:
            return parse_items(data, start, end, exact=True), rest
        except (ValidationError, ValueError, RecursionError):
            return None
    return None


#: How many closings :func:`split_messages` tries, latest first.
_SPLIT_TRIES = 8


def encode_message(msg: Message) -> tuple[bytes, Message]:
    """The JSON fragment of a message to save, checked to read back equal, and its read-back.

    A message whose content, tool-call args or metadata hold values JSON cannot carry
    exactly (NaN, tuples, sets, datetimes, lone surrogates, arbitrary objects) would come
    back different or make the file unreadable, so it is refused with
    ``InvalidArgumentError`` rather than stored altered. The read-back message is an
    independent object equal to ``msg`` (see :func:`same_json_message`).
    """
    if msg.__class__ is Message and _text_only(msg.__dict__):
        # Strings and None serialise exactly (a lone surrogate, which cannot, is refused
        # by the serialiser): the read-back check is needed only for free-form values.
        try:
            fragment = _SERIALIZER.to_json(msg)
        except (PydanticSerializationError, ValueError) as exc:
            raise InvalidArgumentError(
                f"message {msg.id!r} cannot be stored as JSON: {exc}"
            ) from None
        return fragment, copy_message(msg)
    problem = _free_form_problem(msg)
    if problem is not None:
        raise InvalidArgumentError(f"message {msg.id!r} cannot be stored as JSON: {problem}")
    try:
        fragment = _SERIALIZER.to_json(msg)
        back = Message.model_validate(strict_loads(fragment))
    except (PydanticSerializationError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"message {msg.id!r} cannot be stored as JSON: {exc}") from None
    if back.__dict__ != msg.__dict__ or type(msg) is not Message:
        raise InvalidArgumentError(
            f"message {msg.id!r} would not read back equal: content, tool-call args and "
            "metadata must hold JSON values only (str, int, finite float, bool, None, "
            "list, dict with str keys)"
        )
    return fragment, back


def _empty_of(kind: type) -> Callable[[Any], bool]:
    return lambda value: value.__class__ is kind and not value


def _member_of(allowed: frozenset[Any]) -> Callable[[Any], bool]:
    return lambda value: value.__class__ is str and value in allowed


def _instance_of(classes: frozenset[type]) -> Callable[[Any], bool]:
    return lambda value: value.__class__ in classes


def _text_rules() -> dict[str, Callable[[Any], bool]]:
    """For each field of ``Message``, what a text-only message may hold there.

    Made from the annotations, so a message built without validation
    (``model_copy(update=...)``, ``model_construct``) takes the fast path only with values
    validation would keep as they are: an exact ``str`` where the field admits strings
    (a member of a ``Literal``), ``None`` where it admits ``None``, and an empty ``list``
    or ``dict`` in a field made by ``default_factory=list``/``dict``. A field of any
    other kind sends every message to the checked path.
    """
    rules: dict[str, Callable[[Any], bool]] = {}
    for name, field in Message.model_fields.items():
        annotation = field.annotation
        factory: Any = field.default_factory
        if factory is list or factory is dict:
            rules[name] = _empty_of(factory)
        elif get_origin(annotation) is Literal:
            rules[name] = _member_of(frozenset(get_args(annotation)))
        else:
            union = get_origin(annotation) in (Union, UnionType)
            options = get_args(annotation) if union else (annotation,)
            classes = frozenset(c for c in options if c is str or c is type(None))
            rules[name] = _instance_of(classes if str in classes else frozenset())
    return rules


_TEXT_RULES = _text_rules()


def _text_only(fields: dict[str, Any]) -> bool:
    """Whether a message's fields hold only what a text-only message may (``_TEXT_RULES``)."""
    if len(fields) != len(_TEXT_RULES):
        return False
    rules = _TEXT_RULES
    for name, value in fields.items():
        rule = rules.get(name)
        if rule is None or not rule(value):
            return False
    return True


def _free_form_problem(msg: Message) -> str | None:
    """The one plain-JSON rule (same depth limit as checkpoints and snapshots)."""
    if msg.metadata:
        problem = json_problem(msg.metadata, "metadata")
        if problem is not None:
            return problem
    for j, call in enumerate(msg.tool_calls):
        problem = json_problem(call.args, f"tool_calls[{j}].args")
        if problem is not None:
            return problem
    return None


def same_json_message(a: Message, b: Message) -> bool:
    """Whether ``a`` and ``b`` are plain messages that serialise to the same JSON fragment.

    ``Message``'s own ``==`` (stored alike), for the exact class a read makes.
    """
    return type(a) is Message and type(b) is Message and a == b


def shared_prefix(known: Sequence[Message], messages: Sequence[Message]) -> int:
    """How many leading ``messages`` are the ``known`` (stored) ones (a save's prefix check).

    Messages are equal when stored alike (``Message.__eq__``), so two lists compare in C,
    looking at pointers only where they hold the same objects. (A slice of ``messages``
    is still made, which touches every object for its reference count: a caller that owns
    ``known`` uses :func:`stored_prefix`.)
    """
    n = len(known)
    if type(messages) is list and type(known) is list and len(messages) >= n:
        # ``known`` on the left, strict: its messages' ``__eq__`` decides, never the
        # caller's objects' (``unittest.mock.ANY`` says yes to anything).
        with strict_equality():
            if known == (messages if len(messages) == n else messages[:n]):
                return n
    for i, (old, new) in enumerate(zip(known, messages, strict=False)):
        if old is not new and not same_json_message(old, new):
            return i
    return min(n, len(messages))


@contextlib.contextmanager
def strict_equality() -> Iterator[None]:
    """Within it (this OS thread), ``Message.__eq__`` answers a non-message itself."""
    before = STRICT_EQUALITY.on
    STRICT_EQUALITY.on = True
    try:
        yield
    finally:
        STRICT_EQUALITY.on = before


def plain_messages(messages: Sequence[object]) -> bool:
    """Whether every item is a message compared by ``Message.__eq__`` (none of its own).

    Only such messages may sit in a record of stored messages: a record's items decide
    the prefix check, and a class with an ``==`` of its own could call anything equal.
    """
    eq = Message.__eq__
    return all(isinstance(m, Message) and type(m).__eq__ is eq for m in messages)


def stored_prefix(
    known: list[Message],
    messages: Sequence[Message],
    may_adopt: Callable[[list[Message]], bool] | None = None,
) -> int:
    """:func:`shared_prefix` for a ``known`` list the caller owns and nothing reads meanwhile.

    When ``messages`` is a list extending ``known`` (every save of a growing history), it
    is compared with ``known`` extended by its tail, in place and cut back before this
    returns: two lists of one length holding the same objects compare by their pointers
    alone. A slice or a copy of the history would touch every message object (its
    reference count), a cache miss each once the history outgrows the CPU's caches: this
    is what keeps a save's cost from growing with the history. When the caller's history
    holds copies (stored alike, other objects: seen at a few probed positions), ``known``
    takes the caller's objects once, so later saves compare by pointer again, unless
    they are not plain messages (:func:`plain_messages`) or ``may_adopt(copies)`` says no
    (a record that must hold only objects of some kind). The comparison is strict
    (:func:`strict_equality`): only ``known``'s messages decide. ``known`` itself must
    hold plain messages only.
    """
    n = len(known)
    if type(messages) is list and len(messages) >= n:
        known += messages[n:]
        try:
            with strict_equality():
                same = known == messages
        finally:
            del known[n:]
        if same:
            if any(known[i] is not messages[i] for i in _probes(n)):
                # Copies stored alike (a history rebuilt from a load, say): ``known``
                # takes the caller's objects, so the next check is by pointer again
                # instead of a Python comparison of every message, every save.
                copies = messages[:n]
                if plain_messages(copies) and (may_adopt is None or may_adopt(copies)):
                    known[:] = copies
            return n
    return shared_prefix(known, messages)


def _probes(n: int) -> tuple[int, ...]:
    """A few positions of a prefix of ``n`` (first, quarters, last) looked at for identity."""
    return () if n == 0 else (0, n // 4, n // 2, 3 * n // 4, n - 1)
