"""Messages: the unit of every history, memory, snapshot and checkpoint.

A :class:`Message` round-trips through JSON exactly (id, content blocks, tool calls,
metadata). Documents that hold messages carry ``MESSAGES_FORMAT_VERSION``; readers refuse
newer versions instead of guessing (see ``docs/persistence.md``).
"""

from __future__ import annotations

import inspect
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ._pydantic_fast import constructor_only as constructor_only
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


def new_id() -> str:
    """A fresh unique message or call id."""
    return uuid.uuid4().hex


class Unset:
    """Default of a constructor argument that is left out, so pydantic applies the field's.

    ``Message(**data)`` must fail as validating ``data`` does, so a required argument
    cannot be a plain required parameter (a missing field would be a ``TypeError``
    instead of a ``ValidationError``), and an explicit ``None`` must reach the validator
    (a stored ``"id": null`` is corrupt, not a request for a fresh id). Its ``repr`` is
    what a signature shows for the default (``id=<new>``).
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: A required argument (shown as required by :func:`show_required`).
REQUIRED: Any = Unset("<required>")
#: ``Message(id=...)`` left out: a fresh id.
NEW_ID: Any = Unset("<new>")


def validate_into(model: BaseModel, data: dict[str, Any]) -> None:
    """Validate ``data`` into ``model`` as pydantic's ``__init__`` does; bad data is coded.

    Bad data is :class:`DataValidationError` (``INVALID_ARGUMENT``, and still a pydantic
    ``ValidationError``). Only constructors come here (messages, snapshots, checkpoints):
    parsing stored data (``model_validate``) keeps pydantic's own ``ValidationError``,
    which readers turn into their ``*_CORRUPT`` codes.
    """
    try:
        BaseModel.__init__(model, **data)
    except ValidationError as exc:
        raise DataValidationError.wrap(exc) from None


def show_required(cls: type[BaseModel], *names: str) -> None:
    """Make ``inspect.signature(cls)`` show ``names`` as required, as API.md writes them."""
    sig = inspect.signature(cls)
    params = [
        p.replace(default=inspect.Parameter.empty) if p.name in names else p
        for p in sig.parameters.values()
    ]
    setattr(cls, "__signature__", sig.replace(parameters=params))  # noqa: B010


class PositionalModel(BaseModel):
    """A model whose fields may also be given positionally, in the order they are declared.

    The constructor and its signature are made from the fields themselves, so a field is
    added in one place. A field typed as a one-value ``Literal`` (a content block's
    ``type`` tag) is not positional: it can only hold its default. Everything given is
    handed to pydantic as keywords, so ``Cls(**data)`` fails exactly as validating ``data``
    does (an unknown or missing field, an explicit ``None`` where none is allowed), as a
    coded :class:`~framework_agents.errors.DataValidationError`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The fields that may be given positionally, in order (made from the fields).
    __positional__: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Make the constructor and the shown signature from the fields."""
        super().__pydantic_init_subclass__(**kwargs)
        cls.__positional__ = tuple(
            name for name, field in cls.model_fields.items() if not _is_tag(field.annotation)
        )
        init = _positional_init(cls.__positional__)
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = constructor_only(init)  # type: ignore[method-assign]
        params = [
            inspect.Parameter(
                name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=_shown_default(cls.model_fields[name]),
                annotation=cls.model_fields[name].annotation,
            )
            for name in cls.__positional__
        ]
        params.append(inspect.Parameter("extra", inspect.Parameter.VAR_KEYWORD, annotation=Any))
        setattr(cls, "__signature__", inspect.Signature(params, return_annotation=None))  # noqa: B010


#: A constructor argument left out (pydantic then applies the field's default).
_ABSENT: Any = Unset("<absent>")


def _positional_init(names: tuple[str, ...]) -> Callable[..., None]:
    """``__init__(self, <names>=_ABSENT, **extra)`` handing on only what was given.

    Made as source, as ``dataclasses`` makes its ``__init__``: Python itself then binds
    the arguments (its own ``TypeError`` for too many or repeated ones), at the cost of
    a hand-written constructor.
    """
    if not all(name.isidentifier() and name not in ("self", "extra") for name in names):
        raise TypeError(f"field names {names!r} cannot all be constructor parameters")
    lines = [f"def __init__(self, {''.join(f'{n}=_ABSENT, ' for n in names)}**extra):"]
    lines += [f"    if {n} is not _ABSENT: extra[{n!r}] = {n}" for n in names]
    lines.append("    validate_into(self, extra)")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), {"_ABSENT": _ABSENT, "validate_into": validate_into}, namespace)
    init: Callable[..., None] = namespace["__init__"]
    return init


def _is_tag(annotation: Any) -> bool:
    return get_origin(annotation) is Literal and len(get_args(annotation)) == 1


#: How a default made by a factory is shown in a signature (``id=<new>`` in API.md).
_FACTORY_SHOWN: dict[Callable[[], Any], Any] = {new_id: NEW_ID}


def _shown_default(field: FieldInfo) -> Any:
    if field.default_factory is None:
        return inspect.Parameter.empty if field.is_required() else field.default
    factory: Any = field.default_factory
    if factory in (list, dict):
        return factory()
    return _FACTORY_SHOWN.get(factory, Unset(f"<{getattr(factory, '__name__', 'new')}()>"))


class TextBlock(PositionalModel):
    """A block of plain text inside a message's content."""

    type: Literal["text"] = "text"
    text: str

    if TYPE_CHECKING:  # the constructor made from the fields, spelled for type checkers

        def __init__(self, text: str, **extra: Any) -> None: ...


class ReasoningBlock(PositionalModel):
    """The model's thinking; ``signature`` is an opaque provider token sent back unchanged."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None

    if TYPE_CHECKING:  # the constructor made from the fields, spelled for type checkers

        def __init__(self, text: str, signature: str | None = ..., **extra: Any) -> None: ...


ContentBlock = Annotated[TextBlock | ReasoningBlock, Field(discriminator="type")]


class ToolCall(PositionalModel):
    """One call of a tool made by an assistant turn."""

    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    if TYPE_CHECKING:  # the constructor made from the fields, spelled for type checkers

        def __init__(
            self, id: str, name: str, args: dict[str, Any] = ..., **extra: Any
        ) -> None: ...


class _StrictEquality(threading.local):
    """Per OS thread: whether ``Message.__eq__`` answers a non-message itself (internal).

    Set while a record of stored or validated messages is compared with a caller's list
    (``_persist.strict_equality``, in every prefix check): an object that is no
    message then never equals one, whatever its own ``__eq__`` says
    (``unittest.mock.ANY`` says yes to anything).
    """

    on = False


STRICT_EQUALITY = _StrictEquality()


class Message(PositionalModel):
    """A chat message; ``role="tool"`` messages answer the call named by ``tool_call_id``.

    Messages are immutable: assigning a field raises, and the framework shares one message
    object between the agent, its memory, results and events instead of copying it. Derive
    a changed message with ``model_copy(update=...)``; never change ``tool_calls``,
    ``metadata`` or a content list in place.

    The fields are the whole layout: the constructor (positional in this order, as API.md
    writes it), the signature, and the compact form memories keep
    (``_pydantic_fast.freeze_message``) are all made from them.
    """

    role: Role
    content: str | list[ContentBlock] = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    id: str = Field(default_factory=new_id)
    metadata: dict[str, Any] = Field(default_factory=dict)

    if TYPE_CHECKING:  # the constructor made from the fields, spelled for type checkers

        def __init__(
            self,
            role: Role,
            content: str | list[TextBlock | ReasoningBlock] = ...,
            tool_calls: list[ToolCall] = ...,
            tool_call_id: str | None = ...,
            name: str | None = ...,
            id: str = ...,
            metadata: dict[str, Any] = ...,
            **extra: Any,
        ) -> None: ...

    def __eq__(self, other: object) -> bool:
        """Equal when stored alike: of one class, and the same JSON once serialised.

        Stricter than pydantic's ``==``, which holds for ``True`` and ``1``, ``1`` and
        ``1.0``, ``0.0`` and ``-0.0`` or dicts in another key order, all of which JSON
        writes differently. So two lists of messages compare as the histories they would
        store, and at C speed where they hold the same objects (a save's check that the
        caller's history extends the stored one). Exact for validated messages; values
        put in with ``model_copy(update=...)`` are compared by ``repr`` (an ``OrderedDict``
        is then unequal to the ``dict`` JSON would write alike), and a message that
        cannot be stored (an integer past the interpreter's digit limit) equals only
        itself.
        """
        if self is other:
            return True
        if not isinstance(other, BaseModel):
            # Strict (a private record being compared): not the other object's to decide.
            return False if STRICT_EQUALITY.on else NotImplemented
        if type(other) is not type(self):
            return False
        a, b = self.__dict__, other.__dict__
        if a != b:
            return False
        if (
            a["content"].__class__ is str
            and b["content"].__class__ is str
            and not (a["tool_calls"] or a["metadata"])
        ):
            return True  # text only: strings and None are equal exactly when JSON is
        # Free-form values: repr tells apart, in C, what == confuses (1 and True, 1.0, -0.0,
        # key order).
        try:
            return repr(a) == repr(b)
        except (ValueError, RecursionError):
            return False

    def __setattr__(self, name: str, value: Any) -> None:
        """Refused: messages are immutable (a coded ``INVALID_ARGUMENT``)."""
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise DataValidationError.wrap(exc) from None

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


#: Message lists longer than this are shown as a count in the ``repr`` of a snapshot or
#: checkpoint (see :func:`summary_repr_args`).
REPR_MESSAGES = 6


class _Elided:
    """Stands for a long list (messages, timeline entries) in a ``repr``: length, first, last."""

    __slots__ = ("messages",)

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages

    def __repr__(self) -> str:
        first, last = self.messages[0], self.messages[-1]
        what = "messages" if isinstance(first, Message) else "entries"
        return f"[{first!r}, <{len(self.messages) - 2} more {what}>, {last!r}]"


def summary_repr_args(
    args: Iterable[tuple[str | None, Any]], names: Collection[str]
) -> Iterator[tuple[str | None, Any]]:
    """A model's ``__repr_args__`` with the long lists among ``names`` summarised.

    A snapshot or checkpoint of a long conversation would otherwise ``repr`` every
    message: in a log line, a debugger, or CPython 3.11's ``asyncio.run``, which formats
    the finished task, result included, when it ends (``asyncio.run(manager.load_latest())``
    of 10,000 messages spent ~190 ms there, four times the load).
    """
    for name, value in args:
        if name in names and isinstance(value, list) and len(value) > REPR_MESSAGES:
            yield name, _Elided(value)
        else:
            yield name, value


#: Validates a JSON list of messages in one pass.
MessageList: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


# The fast copies live beside the other pydantic fast paths, made from Message's fields.
from . import _pydantic_fast  # noqa: E402

_pydantic_fast.bind_message_class(Message)

from ._pydantic_fast import FrozenMessage as FrozenMessage  # noqa: E402
from ._pydantic_fast import copy_message as copy_message  # noqa: E402
from ._pydantic_fast import copy_messages as copy_messages  # noqa: E402
from ._pydantic_fast import freeze_message as freeze_message  # noqa: E402
from ._pydantic_fast import frozen_field as frozen_field  # noqa: E402
from ._pydantic_fast import thaw_message as thaw_message  # noqa: E402
