"""Messages: the unit of every history, memory, snapshot and checkpoint.

A :class:`Message` round-trips through JSON exactly (id, content blocks, tool calls,
metadata). Documents that hold messages carry ``MESSAGES_FORMAT_VERSION``; readers refuse
newer versions instead of guessing (see ``docs/persistence.md``).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

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
    (a stored ``"id": null`` is corrupt, not a request for a fresh id).
    """

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: A required argument (shown as required by :func:`show_required`).
REQUIRED: Any = Unset("<required>")
#: ``Message(id=...)`` left out: a fresh id.
NEW_ID: Any = Unset("<new>")


def _validated(init: Callable[..., None], data: dict[str, Any]) -> None:
    """Run pydantic's ``init(**data)``; bad data is ``DataValidationError`` (a coded error).

    Only constructors come here: parsing stored data (``model_validate``) keeps pydantic's
    own ``ValidationError``, which readers turn into their ``*_CORRUPT`` codes.
    """
    try:
        init(**data)
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
    """A chat message; ``role="tool"`` messages answer the call named by ``tool_call_id``.

    Messages are immutable: assigning a field raises, and the framework shares one message
    object between the agent, its memory, results and events instead of copying it. Derive
    a changed message with ``model_copy(update=...)``; never change ``tool_calls``,
    ``metadata`` or a content list in place.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

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


show_required(TextBlock, "text")
show_required(ReasoningBlock, "text")
show_required(ToolCall, "id", "name")
show_required(Message, "role")

#: Validates a JSON list of messages in one pass.
MessageList: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


# The fast copies live beside the other pydantic fast paths (re-exported for the memories).
from ._pydantic_fast import FrozenMessage as FrozenMessage  # noqa: E402
from ._pydantic_fast import copy_message as copy_message  # noqa: E402
from ._pydantic_fast import copy_messages as copy_messages  # noqa: E402
from ._pydantic_fast import freeze_message as freeze_message  # noqa: E402
from ._pydantic_fast import thaw_message as thaw_message  # noqa: E402
