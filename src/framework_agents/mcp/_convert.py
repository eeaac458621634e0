"""What the server sends, as framework values: tool results, resources, prompt messages.

A tool result becomes the text the model reads (text blocks joined by newlines; when there
is none, the structured content as JSON) and, when there is more, a
:class:`~framework_agents.tools.ToolOutput` whose metadata keeps it in the stored tool
message: ``structured_content``, and ``attachments`` (images, audio, binary resources:
``{"type", "mime_type", "data"(, "uri")}`` with base64 data). The framework's messages have
no image block (no model adapter sends one back to a provider), so the model reads a
placeholder such as ``[image: image/png, 68 bytes]`` where an image was.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from ..messages import Message
from ..tools import ToolOutput
from ._sdk import types

__all__ = ["MCPPrompt", "MCPResource", "ResourceContents", "prompt_messages", "tool_output"]


@dataclass(frozen=True, slots=True)
class MCPResource:
    """A resource a server lists: read it with ``await client.read(resource.uri)``."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceContents:
    """One part of a read resource: ``text``, or ``blob`` (bytes) for binary contents."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: bytes | None = None


@dataclass(frozen=True, slots=True)
class MCPPrompt:
    """A prompt a server offers; ``arguments``: ``{"name", "description", "required"}`` each."""

    name: str
    description: str | None = None
    arguments: list[dict[str, Any]] = field(default_factory=list)


def _size(data: str) -> int:
    """The decoded size of base64 ``data`` (an estimate for data that is not base64)."""
    return len(data) * 3 // 4


def _attachment(
    kind: str, mime_type: str | None, data: str, uri: str | None = None
) -> dict[str, Any]:
    item: dict[str, Any] = {"type": kind, "mime_type": mime_type, "data": data}
    if uri is not None:
        item["uri"] = uri
    return item


def _part(block: Any, attachments: list[dict[str, Any]]) -> str:
    """The text the model reads for one content block (attachments collected aside)."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        attachments.append(_attachment(block.type, block.mime_type, block.data))
        return f"[{block.type}: {block.mime_type}, {_size(block.data)} bytes]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        attachments.append(_attachment("resource", resource.mime_type, resource.blob, resource.uri))
        return f"[resource: {resource.uri} ({resource.mime_type}), {_size(resource.blob)} bytes]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def tool_output(result: Any) -> tuple[str | ToolOutput, int]:
    """A call's result as a tool's return value, and its size in characters (for the limit)."""
    attachments: list[dict[str, Any]] = []
    text = "\n".join(_part(block, attachments) for block in result.content)
    structured = result.structured_content
    if not result.content and structured is not None:
        text = to_json(structured).decode()
    size = len(text) + sum(len(a["data"]) for a in attachments)
    metadata: dict[str, Any] = {}
    if structured is not None:
        metadata["structured_content"] = structured
    if attachments:
        metadata["attachments"] = attachments
    return (ToolOutput(text, metadata) if metadata else text), size


def error_text(result: Any) -> str:
    """The text of an error result (what the model reads)."""
    return "\n".join(_part(block, []) for block in result.content) or "the tool failed"


def resource(item: Any) -> MCPResource:
    """A listed resource."""
    return MCPResource(str(item.uri), item.name, item.description, item.mime_type)


def contents(item: Any) -> ResourceContents:
    """One part of a read resource (base64 blobs decoded)."""
    if isinstance(item, types.TextResourceContents):
        return ResourceContents(str(item.uri), item.mime_type, text=item.text)
    try:
        blob = base64.b64decode(item.blob, validate=True)
    except (binascii.Error, ValueError):
        blob = item.blob.encode()
    return ResourceContents(str(item.uri), item.mime_type, blob=blob)


def prompt(item: Any) -> MCPPrompt:
    """A listed prompt."""
    arguments = [
        {"name": a.name, "description": a.description, "required": bool(a.required)}
        for a in item.arguments or []
    ]
    return MCPPrompt(item.name, item.description, arguments)


def prompt_messages(result: Any) -> list[Message]:
    """A fetched prompt as messages (``user`` and ``assistant``; non-text parts as placeholders).

    Attachments ride in ``metadata["attachments"]`` as in a tool result.
    """
    messages = []
    for item in result.messages:
        attachments: list[dict[str, Any]] = []
        text = _part(item.content, attachments)
        metadata = {"attachments": attachments} if attachments else {}
        messages.append(Message(item.role, text, metadata=metadata))
    return messages
