"""Canary of the pydantic fast paths (``framework_agents._pydantic_fast``).

They lean on how pydantic v2 builds instances, which is not public API. If one of these
tests fails after a pydantic upgrade, the fast paths must change (or fall back to
``model_copy(deep=True)`` and a plain ``__init__``) before anything else ships.
"""

from __future__ import annotations

import copy

import pytest
from pydantic import BaseModel

from framework_agents import Message, ReasoningBlock, TextBlock, ToolCall
from framework_agents._pydantic_fast import (
    copy_message,
    freeze_message,
    thaw_message,
)
from framework_agents.checkpoint import ThreadCheckpoint

SAMPLES = [
    Message("user", "hello"),
    Message("assistant", "", tool_calls=[ToolCall("c1", "f", {"a": [1, {"b": None}]})]),
    Message("tool", "42", tool_call_id="c1", name="f", metadata={"kind": "x", "n": [1, 2]}),
    Message("assistant", [TextBlock("hi"), ReasoningBlock("think", signature="s")]),
    Message("system", "rules", id="fixed-id"),
    Message.model_validate({"role": "user", "content": "parsed", "id": "p1"}),
]


def test_a_model_instance_is_still_dict_plus_three_slots() -> None:
    # The fast constructors set exactly these; a new per-instance slot would be left unset.
    assert set(BaseModel.__slots__) == {
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    }
    message = Message("user", "x")
    assert set(message.__dict__) == set(Message.model_fields)


@pytest.mark.parametrize("cls", [Message, ToolCall, TextBlock, ReasoningBlock, ThreadCheckpoint])
def test_validation_still_skips_our_constructors(cls: type[BaseModel]) -> None:
    # constructor_only marks __init__ with __pydantic_base_init__; pydantic then builds
    # validated instances without calling it (its flag for a custom __init__ stays off).
    assert cls.__pydantic_custom_init__ is False


@pytest.mark.parametrize("message", SAMPLES, ids=range(len(SAMPLES)))
def test_copy_message_equals_pydantics_deep_copy(message: Message) -> None:
    fast, slow = copy_message(message), message.model_copy(deep=True)
    assert fast == slow == message and fast is not message
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ is None and fast.__pydantic_private__ is None
    assert Message.model_validate(fast.model_dump()) == message  # pydantic accepts it
    fast.metadata["mutated"] = True  # the copy shares nothing mutable
    for a, b in zip(fast.tool_calls, message.tool_calls, strict=True):
        assert a.args is not b.args
    assert "mutated" not in message.metadata


@pytest.mark.parametrize("message", SAMPLES, ids=range(len(SAMPLES)))
def test_freeze_then_thaw_gives_an_equal_independent_message(message: Message) -> None:
    frozen = freeze_message(message)
    thawed = thaw_message(frozen)
    assert thawed == message and thawed is not message
    assert thawed.model_dump_json() == message.model_dump_json()
    assert thawed.model_fields_set == message.model_fields_set
    assert thawed.model_copy(update={"content": "new"}).content == "new"
    assert copy.deepcopy(thawed) == message
    if not message.tool_calls and not message.metadata and isinstance(message.content, str):
        assert isinstance(frozen, tuple)  # the untracked form is still taken
