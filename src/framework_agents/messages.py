"""Messages: the unit of every history, memory, snapshot and checkpoint.

A :class:`Message` round-trips through JSON exactly (id, content blocks, tool calls,
metadata). Documents that hold messages carry ``MESSAGES_FORMAT_VERSION``; readers refuse
newer versions instead of guessing (see ``docs/persistence.md``).
"""

from __future__ import annotations

import copy
import inspect
import uuid
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .errors import DataValidationError

__all__ = [
    "MESSAGES_FORMAT_VERSION",
    "ContentBlock",
    "Message",
    "ReasoningBlock",
    "Role",
    "TextBlock",
    "ToolCall",
    "new_id",
]

#: Version of the JSON shape of a message; bump on any incompatible change.
MESSAGES_FORMAT_VERSION = 1

Role = Literal["system", "user", "assistant", "tool"]

_Init = TypeVar("_Init", bound=Callable[..., None])


def new_id() -> str:
    """A fresh unique message or call id."""
    return uuid.uuid4().hex


class _Unset:
    """Default of a constructor argument that is left out, so pydantic applies the field's.

    ``Message(**data)`` must fail as validating ``data`` does, so a required argument
    cannot be a plain required parameter (a missing field would be a ``TypeError``
    instead of a ``ValidationError``), and an explicit ``None`` must reach the validator
    (a stored ``"id": null`` is corrupt, not a request for a fresh id).
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: A required argument (shown as required by :func:`show_required`).
REQUIRED: Any = _Unset("<required>")
#: ``Message(id=...)`` left out: a fresh id.
NEW_ID: Any = _Unset("<new>")


def _validated(init: Callable[..., None], data: dict[str, Any]) -> None:
    """Run pydantic's ``init(**data)``; bad data is ``DataValidationError`` (a coded error).

    Only constructors come here: parsing stored data (``model_validate``) keeps pydantic's
    own ``ValidationError``, which readers turn into their ``*_CORRUPT`` codes.
    """
    try:
        init(**data)
    except ValidationError as exc:
        raise DataValidationError.wrap(exc) from None


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


def show_required(cls: type[BaseModel], *names: str) -> None:
    """Make ``inspect.signature(cls)`` show ``names`` as required, as API.md writes them."""
    sig = inspect.signature(cls)
    params = [
        p.replace(default=inspect.Parameter.empty) if p.name in names else p
        for p in sig.parameters.values()
    ]
    setattr(cls, "__signature__", sig.replace(parameters=params))  # noqa: B010


class TextBlock(BaseModel):
    """A block of plain text inside a message's content."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["text"] = "text"
    text: str

    @constructor_only
    def __init__(self, text: str = REQUIRED, **extra: Any) -> None:
        if text is not REQUIRED:
            extra["text"] = text
        _validated(super().__init__, extra)


class ReasoningBlock(BaseModel):
    """The model's thinking; ``signature`` is an opaque provider token sent back unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None

    @constructor_only
    def __init__(self, text: str = REQUIRED, signature: str | None = None, **extra: Any) -> None:
        if text is not REQUIRED:
            extra["text"] = text
        if signature is not None:
            extra["signature"] = signature
        _validated(super().__init__, extra)


ContentBlock = Annotated[TextBlock | ReasoningBlock, Field(discriminator="type")]


#: Defaults shown in signatures; never mutated (pydantic makes fresh ones).
_NO_ARGS: dict[str, Any] = {}


class ToolCall(BaseModel):
    """One call of a tool made by an assistant turn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @constructor_only
    def __init__(
        self,
        id: str = REQUIRED,
        name: str = REQUIRED,
        args: dict[str, Any] = _NO_ARGS,
        **extra: Any,
    ) -> None:
        if id is not REQUIRED:
            extra["id"] = id
        if name is not REQUIRED:
            extra["name"] = name
        if args is not _NO_ARGS:
            extra["args"] = args
        _validated(super().__init__, extra)


_NO_CALLS: list[ToolCall] = []
_NO_METADATA: dict[str, Any] = {}


class Message(BaseModel):
    """A chat message; ``role="tool"`` messages answer the call named by ``tool_call_id``."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str | list[ContentBlock] = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    id: str = Field(default_factory=new_id)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @constructor_only
    def __init__(
        self,
        role: Role = REQUIRED,
        content: str | list[TextBlock | ReasoningBlock] = "",
        tool_calls: list[ToolCall] = _NO_CALLS,
        tool_call_id: str | None = None,
        name: str | None = None,
        id: str = NEW_ID,
        metadata: dict[str, Any] = _NO_METADATA,
        **extra: Any,
    ) -> None:
        # Positionally in API.md's order or by keyword; a left-out id is a fresh one.
        # Only what was given is handed on (pydantic fills and copies the defaults), and
        # ``extra`` only exists so that an unknown field is pydantic's ValidationError.
        if role is not REQUIRED:
            extra["role"] = role
        if content.__class__ is not str or content:
            extra["content"] = content
        if tool_calls is not _NO_CALLS:
            extra["tool_calls"] = tool_calls
        if tool_call_id is not None:
            extra["tool_call_id"] = tool_call_id
        if name is not None:
            extra["name"] = name
        if id is not NEW_ID:
            extra["id"] = id
        if metadata is not _NO_METADATA:
            extra["metadata"] = metadata
        _validated(super().__init__, extra)

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text blocks joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def reasoning(self) -> list[ReasoningBlock]:
        """The reasoning blocks of the content (empty for string content)."""
        if isinstance(self.content, str):
            return []
        return [b for b in self.content if isinstance(b, ReasoningBlock)]

    @property
    def kind(self) -> str | None:
        """``metadata["kind"]`` for framework-made messages, else ``None``."""
        value = self.metadata.get("kind")
        return value if isinstance(value, str) else None

    def to_json(self) -> str:
        """This message as compact JSON (the stored form)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, data: str | bytes) -> Message:
        """Parse one message from its stored JSON form (raises pydantic's ValidationError)."""
        return cls.model_validate_json(data)


show_required(TextBlock, "text")
show_required(ReasoningBlock, "text")
show_required(ToolCall, "id", "name")
show_required(Message, "role")

#: Validates a JSON list of messages in one pass.
MessageList: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


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
_BLOCKS = frozenset({TextBlock, ReasoningBlock})
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
    if call.__class__ is not ToolCall:
        return copy.deepcopy(call)
    fields = call.__dict__.copy()
    fields["args"] = _copy_json(fields["args"])
    new = _new(ToolCall)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_fields_set__", call.__pydantic_fields_set__.copy())
    _set(new, "__pydantic_private__", None)
    return new


def copy_message(msg: Message) -> Message:
    """A deep copy of ``msg``, as ``msg.model_copy(deep=True)`` but several times faster."""
    if msg.__class__ is not Message:  # a subclass may add fields or private state
        return msg.model_copy(deep=True)
    try:
        fields = msg.__dict__.copy()
        content = fields["content"]
        if content.__class__ is list:
            fields["content"] = [b if b.__class__ in _BLOCKS else copy.deepcopy(b) for b in content]
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
    new = _new(Message)
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
FrozenMessage = tuple[str, str, str | None, str | None, str, int] | Message


def freeze_message(msg: Message) -> FrozenMessage:
    """``msg`` in a form nobody else holds or can change, cheap to keep (see above)."""
    fields = msg.__dict__
    if msg.__class__ is Message and len(fields) == len(_FIELD_NAMES):
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
    if isinstance(frozen, Message):
        return copy_message(frozen)
    role, content, call_id, name, mid, mask = frozen
    new = _new(Message)
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
