"""The pydantic fast paths of the messages, in one place, each checked by a canary test.

Everything here leans on how pydantic v2 builds a model instance, which is not public
API: a model keeps its fields in ``__dict__`` and three more per-instance slots
(``__pydantic_fields_set__``, ``__pydantic_extra__``, ``__pydantic_private__``), and a
model whose ``__init__`` carries ``__pydantic_base_init__`` is validated without calling
it. ``tests/test_pydantic_fast_paths.py`` fails loudly the day pydantic changes any of
that; then these functions fall back to the public routes (``model_copy(deep=True)``,
a plain ``__init__``) at a speed cost, nothing else.

* :func:`constructor_only`: validation skips our positional-argument constructors.
* :func:`copy_message` / :func:`copy_messages`: deep copies several times faster than
  ``model_copy(deep=True)``.
* :func:`freeze_message` / :func:`thaw_message`: the form a memory keeps a text-only
  message in (a tuple the garbage collector stops tracking), and back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:
    from .messages import Message, ToolCall

__all__ = [
    "FrozenMessage",
    "constructor_only",
    "copy_message",
    "copy_messages",
    "freeze_message",
    "thaw_message",
]

_Init = TypeVar("_Init", bound=Callable[..., None])


def constructor_only(init: _Init) -> _Init:
    """Mark a model's ``__init__`` as one pydantic's validation need not call.

    Pydantic calls a model's own ``__init__`` for every instance it validates (its
    ``custom_init``), through Python, which made parsing a stored history 2-3x slower.
    These constructors only map positional arguments onto fields, which data being
    validated (always by field name) does not need, so they are marked the way pydantic
    marks ``BaseModel.__init__`` and validation builds instances directly. Validated
    results are the same, except that ``model_fields_set`` then names every field the
    data held, also one equal to its default (nothing here reads ``model_fields_set``).
    """
    setattr(init, "__pydantic_base_init__", True)  # noqa: B010
    return init


# -- fast copies ----------------------------------------------------------------------------
#
# Memories copy every message they store and hand out; ``model_copy(deep=True)`` pays for
# ``copy.deepcopy`` over every field (~5 us a plain message, ~15 us with tool calls). These
# copies rebuild only what is mutable: lists, ``ToolCall.args`` and ``metadata`` (JSON-like
# values, copied by a small copier that falls back to ``copy.deepcopy`` for anything else).
# Text and reasoning blocks are frozen and hold only strings, so copies share them. The
# result is equal (``==``), has the same ``model_fields_set`` and dumps the same JSON.
# Only the exact classes take the fast path: theirs have no private attributes and forbid
# extras, so ``__pydantic_private__`` and ``__pydantic_extra__`` are always ``None``.

_ATOMS = frozenset({str, int, float, bool, type(None)})
_new = object.__new__
_set = object.__setattr__


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value (dicts with scalar keys, lists, scalars)."""
    cls = value.__class__
    if cls in _ATOMS:
        return value
    if cls is dict:
        out = {}
        for k, v in value.items():
            if k.__class__ not in _ATOMS:  # a key that might hold state: copy it all
                return copy.deepcopy(value)
            out[k] = v if v.__class__ in _ATOMS else _copy_json(v)
        return out
    if cls is list:
        return [v if v.__class__ in _ATOMS else _copy_json(v) for v in value]
    return copy.deepcopy(value)


def _copy_call(call: ToolCall) -> ToolCall:
    if call.__class__ is not _m.ToolCall:
        return copy.deepcopy(call)
    fields = call.__dict__.copy()
    fields["args"] = _copy_json(fields["args"])
    new = _new(_m.ToolCall)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", call.__pydantic_fields_set__.copy())
    _set(new, "__pydantic_private__", None)
    return new


def copy_message(msg: Message) -> Message:
    """A deep copy of ``msg``, as ``msg.model_copy(deep=True)`` but several times faster."""
    if msg.__class__ is not _m.Message:  # a subclass may add fields or private state
        return msg.model_copy(deep=True)
    try:
        fields = msg.__dict__.copy()
        content = fields["content"]
        if content.__class__ is list:
            fields["content"] = [
                b
                if b.__class__ is _m.TextBlock or b.__class__ is _m.ReasoningBlock
                else copy.deepcopy(b)
                for b in content
            ]
        elif content.__class__ is not str:
            fields["content"] = copy.deepcopy(content)
        calls = fields["tool_calls"]
        if calls.__class__ is list:
            fields["tool_calls"] = [_copy_call(c) for c in calls] if calls else []
        else:
            fields["tool_calls"] = copy.deepcopy(calls)
        meta = fields["metadata"]
        fields["metadata"] = _copy_json(meta) if meta or meta.__class__ is not dict else {}
    except RecursionError:  # a value that contains itself: deepcopy keeps the cycle
        return msg.model_copy(deep=True)
    new = _new(_m.Message)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", msg.__pydantic_fields_set__.copy())
    _set(new, "__pydantic_private__", None)
    return new


def copy_messages(messages: Iterable[Message]) -> list[Message]:
    """Deep copies of ``messages`` (see :func:`copy_message`), as a new list."""
    return [copy_message(m) for m in messages]


# -- frozen messages ------------------------------------------------------------------------
#
# A memory must keep messages no caller can change. Deep copies do that but cost more than
# their copying: each holds four containers the garbage collector tracks, and a memory of
# thousands of them makes every full collection walk them all (the collections a program
# runs anyway, triggered by the allocations of the copies themselves). A text-only message
# is kept as a tuple of strings, ``None`` and a bit mask of ``model_fields_set`` instead,
# which the collector stops tracking on its first pass over it (a tuple of untracked values).

_FIELD_NAMES = ("role", "content", "tool_calls", "tool_call_id", "name", "id", "metadata")
_FIELD_BITS = {name: 1 << i for i, name in enumerate(_FIELD_NAMES)}
_FIELD_SETS = tuple(
    frozenset(n for n, bit in _FIELD_BITS.items() if mask & bit)
    for mask in range(1 << len(_FIELD_NAMES))
)

#: What :func:`freeze_message` returns: a tuple for a text-only message, else a deep copy.
FrozenMessage: TypeAlias = "tuple[str, str, str | None, str | None, str, int] | Message"


def freeze_message(msg: Message) -> FrozenMessage:
    """``msg`` in a form nobody else holds or can change, cheap to keep (see above)."""
    fields = msg.__dict__
    if msg.__class__ is _m.Message and len(fields) == len(_FIELD_NAMES):
        role, content, calls = fields["role"], fields["content"], fields["tool_calls"]
        call_id, name, mid, meta = (
            fields["tool_call_id"],
            fields["name"],
            fields["id"],
            fields["metadata"],
        )
        if (
            role.__class__ is str
            and content.__class__ is str
            and mid.__class__ is str
            and (call_id is None or call_id.__class__ is str)
            and (name is None or name.__class__ is str)
            and calls.__class__ is list
            and not calls
            and meta.__class__ is dict
            and not meta
        ):
            mask = 0
            for field in msg.__pydantic_fields_set__:
                bit = _FIELD_BITS.get(field)
                if bit is None:  # not a field name (model_construct allows any): copy
                    return copy_message(msg)
                mask |= bit
            return (role, content, call_id, name, mid, mask)
    return copy_message(msg)


def thaw_message(frozen: FrozenMessage) -> Message:
    """A new message equal to the one :func:`freeze_message` was given (a deep copy)."""
    if isinstance(frozen, _m.Message):
        return copy_message(frozen)
    role, content, call_id, name, mid, mask = frozen
    new = _new(_m.Message)
    _set(
        new,
        "__dict__",
        {
            "role": role,
            "content": content,
            "tool_calls": [],
            "tool_call_id": call_id,
            "name": name,
            "id": mid,
            "metadata": {},
        },
    )
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", set(_FIELD_SETS[mask]))
    _set(new, "__pydantic_private__", None)
    return new


# Bound last: messages imports this module before it defines its classes.
from . import messages as _m  # noqa: E402
