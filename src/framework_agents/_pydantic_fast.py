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
* :func:`share_fields_set`: parsed messages that state every field share one fields set.

The last three are written from ``Message``'s fields when the class exists
(:func:`message_layout`), so adding a field to ``Message`` changes nothing here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NamedTuple,
    TypeAlias,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

from pydantic import BaseModel
from pydantic.fields import FieldInfo

if TYPE_CHECKING:
    from .messages import Message

__all__ = [
    "FrozenMessage",
    "MessageLayout",
    "bind_message_class",
    "constructor_only",
    "copy_message",
    "copy_messages",
    "freeze_message",
    "frozen_field",
    "message_layout",
    "share_fields_set",
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
# copies rebuild only what is mutable: lists, dicts and tool calls (JSON-like values are
# copied by a small copier that falls back to ``copy.deepcopy`` for anything else). Text
# and reasoning blocks are frozen and hold only strings, so copies share them, as they
# share every field whose type only admits immutable values (``str``, ``None``, a
# ``Literal``). The result is equal (``==``), has the same ``model_fields_set`` and dumps
# the same JSON. Only the exact classes take the fast path: theirs have no private
# attributes and forbid extras, so ``__pydantic_private__`` and ``__pydantic_extra__`` are
# always ``None``.
#
# Nothing here names a field of ``Message``: :func:`bind_message_class` makes
# ``copy_message``, ``freeze_message`` and ``thaw_message`` from its fields (as source, as
# ``dataclasses`` makes an ``__init__``: a loop over the fields made them 2x slower), so a
# field is added to the class alone.

_ATOMS = frozenset({str, int, float, bool, type(None)})
_new = object.__new__
_set = object.__setattr__


def _copy_value(value: Any) -> Any:
    """A deep copy of a message's value: JSON-like data, tool calls, frozen blocks."""
    cls = value.__class__
    if cls in _ATOMS:
        return value
    if cls is dict:
        return _copy_dict(value)
    if cls is list:
        return [v if v.__class__ in _ATOMS else _copy_value(v) for v in value] if value else []
    kind = _MODEL_KINDS.get(cls)
    if kind is None:
        kind = _MODEL_KINDS[cls] = _model_kind(cls)
    if kind is _SHARED:
        return value
    if kind is _PLAIN:
        return _copy_plain_model(cls, value)
    return copy.deepcopy(value)


def _copy_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    """A deep copy of a JSON-like dict (``copy.deepcopy`` if a key is not a plain value)."""
    out = {}
    for k, v in value.items():
        if k.__class__ not in _ATOMS:  # a key that might hold state: copy it all
            return copy.deepcopy(value)
        out[k] = v if v.__class__ in _ATOMS else _copy_value(v)
    return out


def _copy_plain_model(cls: type, value: Any) -> Any:
    """A copy of a ``_PLAIN`` model instance, field by field, built without validation."""
    fields = value.__dict__.copy()
    for k, v in fields.items():
        if v.__class__ not in _ATOMS:
            fields[k] = _copy_value(v)  # replaces a value: the dict keeps its size
    return _assemble(cls, fields, value.__pydantic_fields_set__.copy())


def _assemble(cls: type, fields: dict[str, Any], fields_set: set[str]) -> Any:
    """An instance of model ``cls`` holding ``fields``, made the way pydantic makes one.

    For the exact classes of the fast paths: no private attributes, extras forbidden.
    """
    new: Any = _new(cls)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", fields_set)
    _set(new, "__pydantic_private__", None)
    return new


_SHARED, _PLAIN, _OTHER = "shared", "plain", "other"
_MODEL_KINDS: dict[type, str] = {}


def _model_kind(cls: type) -> str:
    """How :func:`_copy_value` copies an instance of ``cls``.

    ``_SHARED``: a frozen model whose fields only admit immutable values (a text block);
    nothing in it can change, so copies share it. ``_PLAIN``: a model with no private
    attributes that forbids extras (a tool call), copied field by field. Anything else
    is left to ``copy.deepcopy``.
    """
    if not (
        isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls.model_config.get("extra") == "forbid"
        and not cls.__private_attributes__
    ):
        return _OTHER
    frozen = cls.model_config.get("frozen", False)
    if frozen and all(_immutable(field.annotation) for field in cls.model_fields.values()):
        return _SHARED
    return _PLAIN


def copy_messages(messages: Iterable[Message]) -> list[Message]:
    """Deep copies of ``messages`` (see :func:`copy_message`), as a new list."""
    return [copy_message(m) for m in messages]


# -- frozen messages ------------------------------------------------------------------------
#
# A memory must keep messages no caller can change. Deep copies do that but cost more than
# their copying: each holds four containers the garbage collector tracks, and a memory of
# thousands of them makes every full collection walk them all (the collections a program
# runs anyway, triggered by the allocations of the copies themselves). A message whose
# list and dict fields (those made by ``default_factory=list`` or ``dict``) are empty and
# whose other fields hold strings, numbers or ``None`` is kept as a tuple of those values
# and a bit mask of ``model_fields_set`` instead, which the collector stops tracking on
# its first pass over it (a tuple of untracked values).

#: What :func:`freeze_message` returns: a tuple for a text-only message, else a deep copy.
FrozenMessage: TypeAlias = "tuple[Any, ...] | Message"

_FIELD_NAMES: tuple[str, ...] = ()  # Message's fields, in order (set by bind_message_class)
_MESSAGE: type | None = None  # Message itself (set by bind_message_class)
_KEPT_FIELDS: tuple[str, ...] = ()  # those the tuple form keeps, in its order


_DOCS = {
    "copy_message": "A deep copy of ``msg``, as ``msg.model_copy(deep=True)`` but several "
    "times faster.",
    "freeze_message": "``msg`` in a form nobody else holds or can change, cheap to keep.",
    "thaw_message": "A new message equal to the one ``freeze_message`` was given (a deep copy).",
}

# Written by bind_message_class when framework_agents.messages has made Message.
copy_message: Callable[[Message], Message]
freeze_message: Callable[[Message], FrozenMessage]
thaw_message: Callable[[FrozenMessage], Message]


def _immutable(annotation: Any) -> bool:
    """Whether every value valid for ``annotation`` is immutable (``str | None``, ...)."""
    if annotation in _ATOMS:
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return True
    if origin is Union or origin is UnionType:
        return all(_immutable(arg) for arg in get_args(annotation))
    return False


_EMPTY = {"list": "[]", "dict": "{}"}

_TEMPLATE = """\
def copy_message(msg):
    if msg.__class__ is not Message:  # a subclass may add fields or private state
        return msg.model_copy(deep=True)
    fields = msg.__dict__.copy()
    try:
{copies}
    except RecursionError:  # a value that contains itself: deepcopy keeps the cycle
        return msg.model_copy(deep=True)
    return _assemble(Message, fields, msg.__pydantic_fields_set__.copy())


def freeze_message(msg):
    fields = msg.__dict__
    if msg.__class__ is Message and len(fields) == {count}:
{reads}
        if (
            {checks}
        ):
            mask = 0
            for field in msg.__pydantic_fields_set__:
                bit = _FIELD_BITS.get(field)
                if bit is None:  # not a field name (model_construct allows any): copy
                    return copy_message(msg)
                mask |= bit
            return ({kept}mask)
    return copy_message(msg)


def thaw_message(frozen):
    if frozen.__class__ is not tuple:
        return copy_message(frozen)
    {kept}mask = frozen
    return _assemble(Message, {{{thawed}}}, set(_FIELD_SETS[mask]))
"""


class MessageLayout(NamedTuple):
    """The fast functions made for one message class (see :func:`message_layout`)."""

    fields: tuple[str, ...]
    copy_message: Callable[[Message], Message]
    freeze_message: Callable[[Message], FrozenMessage]
    thaw_message: Callable[[FrozenMessage], Message]
    kept: tuple[str, ...]  # the fields the tuple form holds, in its order


class _FieldSets(dict[int, frozenset[str]]):
    """``model_fields_set`` for each bit mask of field names, made the first time asked."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self._names = names

    def __missing__(self, mask: int) -> frozenset[str]:
        made = self[mask] = frozenset(n for i, n in enumerate(self._names) if mask >> i & 1)
        return made


def _copy_lines(fields: dict[str, FieldInfo], empty: dict[str, str]) -> list[str]:
    """The lines of ``copy_message`` that copy each mutable field of ``fields``."""
    copies = []
    for name, field in fields.items():
        if name in empty:
            kind = empty[name]
            copies.append(
                f"        v = fields[{name!r}]\n        fields[{name!r}] = "
                f"{_EMPTY[kind]} if v.__class__ is {kind} and not v else _copy_value(v)"
            )
        elif not _immutable(field.annotation):
            copies.append(
                f"        v = fields[{name!r}]\n        if v.__class__ not in _ATOMS:\n"
                f"            fields[{name!r}] = _copy_value(v)"
            )
    return copies


def _layout_source(fields: dict[str, FieldInfo], empty: dict[str, str], kept: list[str]) -> str:
    """The source of the three layout functions (:data:`_TEMPLATE` filled in for ``fields``).

    ``empty`` maps the fields made by ``default_factory=list``/``dict`` to that factory's
    name; ``kept`` names the others, the ones the tuple form keeps.
    """
    names = tuple(fields)
    return _TEMPLATE.format(
        copies="\n".join(_copy_lines(fields, empty)) or "        pass",
        count=len(names),
        reads="\n".join(f"        v_{name} = fields[{name!r}]" for name in names),
        checks="\n            and ".join(
            [f"v_{name}.__class__ in _ATOMS" for name in kept]
            + [f"v_{name}.__class__ is {kind} and not v_{name}" for name, kind in empty.items()]
        ),
        kept="".join(f"v_{name}, " for name in kept),
        thawed=", ".join(
            f"{name!r}: {_EMPTY[empty[name]]}" if name in empty else f"{name!r}: v_{name}"
            for name in names
        ),
    )


def message_layout(message: type[Message]) -> MessageLayout:
    """Write ``copy_message``, ``freeze_message`` and ``thaw_message`` for ``message``.

    They are written out field by field from ``message.model_fields`` and compiled: a
    field whose type admits only immutable values is shared by copies and kept in the
    frozen tuple; one made by ``default_factory=list`` or ``dict`` must be empty for the
    tuple form (it is made again on thaw); anything else is copied by ``_copy_value``.
    """
    fields = message.model_fields
    names = tuple(fields)
    if not all(name.isidentifier() for name in names):
        raise TypeError(f"{message.__name__} has a field that is not an identifier")
    # Made by default_factory=list or dict: the tuple form holds them only empty (and makes
    # them again on thaw); it keeps the others' values.
    empty = {
        name: field.default_factory.__name__
        for name, field in fields.items()
        if field.default_factory in (list, dict)
    }
    kept = [name for name in names if name not in empty]
    source = _layout_source(fields, empty, kept)
    namespace: dict[str, Any] = {
        "Message": message,
        "_ATOMS": _ATOMS,
        "_FIELD_BITS": {name: 1 << i for i, name in enumerate(names)},
        "_FIELD_SETS": _FieldSets(names),
        "_assemble": _assemble,
        "_copy_value": _copy_value,
    }
    exec(compile(source, f"<{message.__name__} layout>", "exec"), namespace)
    made = MessageLayout(
        names,
        namespace["copy_message"],
        namespace["freeze_message"],
        namespace["thaw_message"],
        tuple(kept),
    )
    for function in (made.copy_message, made.freeze_message, made.thaw_message):
        function.__doc__, function.__module__ = _DOCS[function.__name__], __name__
    return made


def bind_message_class(message: type[Message]) -> None:
    """Make this module's :func:`copy_message`, :func:`freeze_message`, :func:`thaw_message`.

    Called once by ``framework_agents.messages`` when its classes exist.
    """
    global _FIELD_NAMES, _KEPT_FIELDS, _MESSAGE
    global copy_message, freeze_message, thaw_message
    _FIELD_NAMES, copy_message, freeze_message, thaw_message, _KEPT_FIELDS = message_layout(message)
    _MESSAGE = message


# -- one fields set for parsed messages ------------------------------------------------------
#
# Pydantic gives every instance it validates a set of its own: ``__pydantic_fields_set__``.
# For a message that states all seven fields (everything our writers store does) it is a
# 728-byte hash table, more than the rest of the message (its dict, lists and id) together;
# parsing 10,000 stored messages allocated 7 MiB of identical sets. Nothing changes the
# fields set of a frozen model (pydantic adds to it only on assignment, which a frozen
# model refuses, and ``model_copy`` copies it before adding the updated names), so
# messages that name every field can share one.


def share_fields_set(messages: Iterable[Message]) -> None:
    """Give the ``messages`` that name every field one ``model_fields_set``, made here.

    For messages just parsed (each holds a set of its own, which is freed): only exact
    ``Message`` instances whose set names every field are touched, so
    ``model_fields_set`` still says what each message was given. The set is new for each
    call (a parsed slice of a few hundred messages), so a caller that changes the set a
    message's ``model_fields_set`` returns (pydantic never does for a frozen model) can
    only affect the messages parsed with it.
    """
    shared, count = set(_FIELD_NAMES), len(_FIELD_NAMES)
    for msg in messages:
        if msg.__class__ is _MESSAGE and len(msg.__pydantic_fields_set__) == count:
            _set(msg, "__pydantic_fields_set__", shared)


def frozen_field(name: str) -> Callable[[FrozenMessage], Any]:
    """A reader of field ``name`` of a frozen message (either form), without thawing it.

    Only a field the tuple form keeps (one not made by ``default_factory=list``/``dict``).
    """
    if name not in _KEPT_FIELDS:
        raise ValueError(f"{name!r} is not a field the frozen form of a message keeps")
    index = _KEPT_FIELDS.index(name)

    def read(frozen: FrozenMessage) -> Any:
        return frozen[index] if frozen.__class__ is tuple else getattr(frozen, name)

    return read
