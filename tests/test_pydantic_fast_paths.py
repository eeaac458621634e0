"""Canary of the pydantic fast paths (``framework_agents._pydantic_fast``).

They lean on how pydantic v2 builds instances, which is not public API. If one of these
tests fails after a pydantic upgrade, the fast paths must change (or fall back to
``model_copy(deep=True)`` and a plain ``__init__``) before anything else ships.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel

from framework_agents import (
    Message,
    ReasoningBlock,
    Snapshot,
    SnapshotData,
    TextBlock,
    ToolCall,
)
from framework_agents._persist import MAX_JSON_DEPTH
from framework_agents._pydantic_fast import (
    copy_message,
    freeze_message,
    share_fields_set,
    thaw_message,
)
from framework_agents.checkpoint import ThreadCheckpoint
from framework_agents.errors import AgentError
from framework_agents.messages import MessageList

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


@pytest.mark.parametrize(
    "cls",
    [Message, ToolCall, TextBlock, ReasoningBlock, ThreadCheckpoint, Snapshot, SnapshotData],
)
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


# -- the layout is made from the fields: a new field is added to the class alone ----------


def _wider_message_class() -> type[Any]:
    """Message with one field more of each kind a layout treats differently."""
    from typing import Literal

    from pydantic import Field

    from framework_agents.messages import PositionalModel, new_id

    class Wider(PositionalModel):  # the same fields as Message, then three new ones
        role: Literal["system", "user", "assistant", "tool"]
        content: str | list[TextBlock | ReasoningBlock] = ""
        tool_calls: list[ToolCall] = Field(default_factory=list)
        tool_call_id: str | None = None
        name: str | None = None
        id: str = Field(default_factory=new_id)
        metadata: dict[str, Any] = Field(default_factory=dict)
        priority: int | None = None  # immutable: shared, kept in the tuple
        tags: list[str] = Field(default_factory=list)  # empty for the tuple form
        extra_blocks: list[TextBlock] | None = None  # mutable: copied

    return Wider


def test_a_new_field_needs_no_change_to_the_constructor_or_the_fast_paths() -> None:
    import inspect

    from framework_agents._pydantic_fast import message_layout

    wider = _wider_message_class()
    names = list(inspect.signature(wider).parameters)
    assert names[-4:] == ["priority", "tags", "extra_blocks", "extra"]
    layout = message_layout(wider)
    assert layout.fields == tuple(wider.model_fields)

    plain = wider("user", "hi", [], None, None, "m1", {}, 3)  # positional, in field order
    frozen = layout.freeze_message(plain)
    assert isinstance(frozen, tuple) and 3 in frozen[:-1]
    thawed: Any = layout.thaw_message(frozen)
    assert thawed == plain and thawed is not plain
    assert thawed.model_fields_set == plain.model_fields_set
    assert thawed.tags == [] and thawed.tags is not plain.tags

    block = TextBlock("b")
    full = wider("user", "hi", tags=["a"], extra_blocks=[block], metadata={"k": [1]})
    frozen = layout.freeze_message(full)
    assert not isinstance(frozen, tuple)  # a non-empty list field: kept as a deep copy
    copies: list[Any] = [layout.copy_message(full), layout.thaw_message(frozen)]
    for copied in copies:
        assert copied == full
        assert copied.model_dump_json() == full.model_dump_json()
        assert copied.tags is not full.tags and copied.metadata["k"] is not full.metadata["k"]
        assert copied.extra_blocks is not full.extra_blocks
        assert copied.extra_blocks is not None and copied.extra_blocks[0] is block  # frozen


def test_the_bound_layout_is_messages() -> None:
    from framework_agents import _pydantic_fast

    assert tuple(Message.model_fields) == _pydantic_fast._FIELD_NAMES
    made = _pydantic_fast.message_layout(Message)
    message = Message("tool", "r", tool_call_id="c", name="f", id="i")
    assert made.freeze_message(message) == freeze_message(message)


def test_messages_sharing_one_fields_set_copy_pickle_and_compare_as_before() -> None:
    import pickle

    parsed = MessageList.validate_json(MessageList.dump_json(SAMPLES))
    share_fields_set(parsed)
    shared = parsed[0].__pydantic_fields_set__
    assert shared == set(Message.model_fields)
    assert all(m.__pydantic_fields_set__ is shared for m in parsed)
    # model_copy copies the set before adding the updated names; the shared one is untouched.
    changed = parsed[0].model_copy(update={"content": "other"})
    assert changed.model_fields_set == set(Message.model_fields)
    assert changed.model_fields_set is not shared
    assert copy_message(parsed[1]).model_fields_set is not shared
    assert copy.deepcopy(parsed[2]).model_fields_set is not shared
    with pytest.raises(AgentError):  # frozen: assignment is refused before the set is touched
        parsed[0].content = "x"  # type: ignore[misc]
    assert shared == set(Message.model_fields)
    back = pickle.loads(pickle.dumps(parsed))
    assert back == parsed == SAMPLES
    assert back[0].model_fields_set is not shared


def test_only_messages_naming_every_field_share_the_set() -> None:
    partial = Message.model_validate({"role": "user", "content": "x", "id": "p"})
    whole = MessageList.validate_json(MessageList.dump_json([partial]))[0]
    share_fields_set([partial, whole])
    assert partial.model_fields_set == {"role", "content", "id"}
    assert whole.model_fields_set == set(Message.model_fields)


def test_the_json_parser_refuses_nesting_deeper_than_our_bound() -> None:
    # Snapshot._canonical skips the plain-JSON validators for what the JSON parser made:
    # a value nested more deeply than MAX_JSON_DEPTH must never get past the parser.
    nested = "1"
    for _ in range(MAX_JSON_DEPTH):
        nested = f"[{nested}]"
    with pytest.raises(ValueError, match="recursion limit"):
        MessageList.validate_json(f'[{{"role":"user","metadata":{{"k":{nested}}}}}]')
