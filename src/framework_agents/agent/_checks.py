"""The checks of ``Agent``'s arguments: each refuses bad input with ``INVALID_ARGUMENT``."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidArgumentError
from ..messages import Message
from ..tools import Tool, as_tool

__all__ = [
    "as_prompt",
    "at_least",
    "check_options",
    "checked_overrides",
    "items_of",
    "seed_of",
    "tool_list",
]


def checked_overrides(cls: type, overrides: object) -> dict[str, Any]:
    """Branch overrides: a mapping of constructor arguments, else ``INVALID_ARGUMENT``."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise InvalidArgumentError("branch overrides must be a dict of constructor arguments")
    known = set(inspect.signature(cls).parameters)
    unknown = sorted(str(k) for k in overrides if k not in known)
    if unknown:
        raise InvalidArgumentError(
            f"unknown branch override(s) {unknown}; use constructor arguments: {sorted(known)}"
        )
    return dict(overrides)


def tool_list(tools: object) -> tuple[Tool, ...]:
    """The tools as :class:`Tool` objects, with unique names, else ``INVALID_ARGUMENT``."""
    checked = tuple(as_tool(t) for t in items_of(tools, "tools"))
    names = [t.name for t in checked]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidArgumentError(f"duplicate tool names: {duplicates}")
    return checked


def seed_of(initial_messages: object) -> list[Message]:
    """``initial_messages`` as a list of messages, else ``INVALID_ARGUMENT``."""
    seed = items_of(initial_messages, "initial_messages")
    if not all(isinstance(m, Message) for m in seed):
        raise InvalidArgumentError("initial_messages must be Message objects")
    return list(seed)


def check_options(
    response_format: object, output_version: object, decide: object, agent_id: object
) -> None:
    """``INVALID_ARGUMENT`` for a bad response format, output version, decide or agent id."""
    if response_format is not None and not (
        isinstance(response_format, type) and issubclass(response_format, BaseModel)
    ):
        raise InvalidArgumentError("response_format must be a pydantic model class")
    if output_version not in ("v0", "v1"):
        raise InvalidArgumentError(f'output_version must be "v0" or "v1", not {output_version!r}')
    if decide is not None and not callable(decide):
        raise InvalidArgumentError("decide must be a callable or None")
    if not isinstance(agent_id, str) or not agent_id:
        raise InvalidArgumentError("agent_id must be a non-empty str")


def at_least(value: object, label: str, low: int) -> int:
    """``value`` if it is an int (not a bool) of at least ``low``, else ``INVALID_ARGUMENT``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise InvalidArgumentError(f"{label} must be an int >= {low}, not {value!r}")
    return value


def items_of(value: object, label: str) -> tuple[Any, ...]:
    """``value`` as a tuple (``None``: empty); ``INVALID_ARGUMENT`` unless a collection."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping | Message) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{label} must be a list or tuple, not {value!r:.100}")
    return tuple(value)


def as_prompt(prompt: object) -> Message | None:
    """``prompt`` as a user message (``None`` stays ``None``: continue as is).

    ``INVALID_ARGUMENT`` for anything but a str or a ``role="user"`` message, and for an
    empty one (nothing for the model to answer, and an empty message stored for good).
    """
    if prompt is None:
        return None
    if isinstance(prompt, str):
        message = Message("user", prompt)
    elif isinstance(prompt, Message) and prompt.role == "user":
        message = prompt
    else:
        raise InvalidArgumentError(
            f"a prompt is a str or a role='user' Message, got {prompt!r:.100}"
        )
    if not message.content or (isinstance(message.content, str) and not message.content.strip()):
        raise InvalidArgumentError("a prompt must not be empty (the model would answer nothing)")
    return message
