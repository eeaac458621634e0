"""Messages: the unit of every history, memory, snapshot and checkpoint.

A :class:`Message` round-trips through JSON exactly (id, content blocks, tool calls,
metadata). Documents that hold messages carry ``MESSAGES_FORMAT_VERSION``; readers refuse
newer versions instead of guessing (see ``docs/persistence.md``).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

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


class TextBlock(BaseModel):
    """A block of plain text inside a message's content."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["text"] = "text"
    text: str

    def __init__(self, text: str | None = None, /, **data: Any) -> None:
        if text is not None:
            data["text"] = text
        super().__init__(**data)


class ReasoningBlock(BaseModel):
    """The model's thinking; ``signature`` is an opaque provider token sent back unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["reasoning"] = "reasoning"
    text: str
    signature: str | None = None

    def __init__(
        self, text: str | None = None, signature: str | None = None, /, **data: Any
    ) -> None:
        if text is not None:
            data["text"] = text
        if signature is not None:
            data["signature"] = signature
        super().__init__(**data)


ContentBlock = Annotated[TextBlock | ReasoningBlock, Field(discriminator="type")]


class ToolCall(BaseModel):
    """One call of a tool made by an assistant turn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    def __init__(
        self,
        id: str | None = None,
        name: str | None = None,
        args: dict[str, Any] | None = None,
        /,
        **data: Any,
    ) -> None:
        if id is not None:
            data["id"] = id
        if name is not None:
            data["name"] = name
        if args is not None:
            data["args"] = args
        super().__init__(**data)


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

    def __init__(
        self,
        role: Role | None = None,
        content: str | list[TextBlock | ReasoningBlock] | None = None,
        /,
        **data: Any,
    ) -> None:
        if role is not None:
            data["role"] = role
        if content is not None:
            data["content"] = content
        super().__init__(**data)

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


#: Validates a JSON list of messages in one pass.
MessageList: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
