"""``copy_message``: equal to a deep copy, and independent of the original at every level."""

from __future__ import annotations

import copy
import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, PrivateAttr

from framework_agents.messages import (
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    copy_message,
    copy_messages,
    freeze_message,
    thaw_message,
)
from property_budget import examples

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
_json: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
_dicts = st.dictionaries(st.text(max_size=4), _json, max_size=4)
_blocks = st.lists(
    st.builds(TextBlock, st.text(max_size=5))
    | st.builds(ReasoningBlock, st.text(max_size=5), st.none() | st.text(max_size=5)),
    max_size=3,
)
_calls = st.lists(st.builds(ToolCall, st.text(max_size=3), st.text(max_size=3), _dicts), max_size=3)


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    """Any message, built with only some of its fields given (so fields_set varies)."""
    fields: dict[str, Any] = {
        "role": draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    }
    if draw(st.booleans()):
        fields["content"] = draw(st.text(max_size=5) | _blocks)
    if draw(st.booleans()):
        fields["tool_calls"] = draw(_calls)
    if draw(st.booleans()):
        fields["tool_call_id"] = draw(st.text(max_size=3))
    if draw(st.booleans()):
        fields["name"] = draw(st.text(max_size=3))
    if draw(st.booleans()):
        fields["id"] = draw(st.text(max_size=3))
    if draw(st.booleans()):
        fields["metadata"] = draw(_dicts)
    return Message(**fields)


def _mutate(value: Any) -> int:
    """Change every dict and list inside ``value`` in place; how many were changed."""
    changed = 0
    if isinstance(value, dict):
        for v in list(value.values()):
            changed += _mutate(v)
        value["__mutated__"] = True
        changed += 1
    elif isinstance(value, list):
        for v in list(value):
            changed += _mutate(v)
        value.append("__mutated__")
        changed += 1
    return changed


def _mutate_message(msg: Message) -> None:
    """Change every mutable container reachable from ``msg`` in place."""
    for call in msg.tool_calls:
        _mutate(call.args)
    _mutate(msg.tool_calls)
    _mutate(msg.metadata)
    if isinstance(msg.content, list):
        msg.content.append(TextBlock("__mutated__"))


def _same(a: Message, b: Message) -> bool:
    """Equal as pydantic sees it, in the stored form, and in which fields were set."""
    return (
        a == b
        and a.model_dump_json() == b.model_dump_json()
        and a.model_fields_set == b.model_fields_set
        and a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)
    )


@settings(max_examples=examples(300), deadline=None)
@given(_messages())
def test_copy_is_equal_and_independent_both_ways(msg: Message) -> None:
    reference = msg.model_copy(deep=True)
    copied = copy_message(msg)
    assert _same(copied, reference)
    assert copied is not msg
    _mutate_message(copied)  # changing the copy leaves the original as it was
    assert _same(msg, reference)
    again = copy_message(msg)
    _mutate_message(msg)  # and changing the original leaves an earlier copy alone
    assert _same(again, reference)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(_messages(), max_size=5))
def test_copy_messages_copies_each(messages: list[Message]) -> None:
    copies = copy_messages(iter(messages))
    assert copies == messages
    assert all(c is not m for c, m in zip(copies, messages, strict=True))


def test_values_outside_json_are_deep_copied() -> None:
    # One tag: two equal sets of several strings may iterate in another order (string
    # hashes vary per process), and messages are equal when stored alike, in that order
    # (the copy of {"a", "b"} was unequal in some runs).
    tags = {"a"}
    nested = ([1], {"k": [2]})
    msg = Message("user", "x")
    metadata: dict[Any, Any] = msg.metadata  # keys outside JSON too, on purpose
    metadata.update({"tags": tags, "nested": nested, (1, 2): "tuple key"})
    copied = copy_message(msg)
    assert copied == msg
    copied.metadata["tags"].add("c")
    copied.metadata["nested"][0].append(9)
    copied_metadata: dict[Any, Any] = copied.metadata
    copied_metadata[(1, 2)] = "changed"
    assert msg.metadata == {"tags": {"a"}, "nested": ([1], {"k": [2]}), (1, 2): "tuple key"}


def test_a_cyclic_value_is_copied_with_its_cycle() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    msg = Message("user", "x", metadata={"loop": loop})
    copied = copy_message(msg)
    assert copied.metadata["loop"] is not loop
    assert copied.metadata["loop"][1] is copied.metadata["loop"]


def test_a_message_changed_after_validation_is_still_copied_deeply() -> None:
    msg = Message("assistant", "x")
    # Forced past the frozen model: values validation never made.
    object.__setattr__(msg, "tool_calls", (ToolCall("c", "f", {"a": [1]}),))
    object.__setattr__(msg, "content", [{"type": "text", "text": "raw"}])
    copied = copy_message(msg)
    assert copied == msg
    copied.tool_calls[0].args["a"].append(2)
    copied.content[0]["text"] = "changed"  # type: ignore[index]
    assert msg.tool_calls[0].args == {"a": [1]}
    assert msg.content == [{"type": "text", "text": "raw"}]  # type: ignore[comparison-overlap]  # stored unvalidated


def test_subclasses_and_private_state_fall_back_to_model_copy() -> None:
    class Tagged(Message):
        extra_note: list[str] = Field(default_factory=list)
        _seen: list[str] = PrivateAttr(default_factory=list)

    msg = Tagged(role="user", content="x", extra_note=["a"])
    msg._seen.append("p")
    copied = copy_message(msg)
    assert type(copied) is Tagged and copied == msg and copied._seen == ["p"]
    copied.extra_note.append("b")
    copied._seen.append("q")
    assert msg.extra_note == ["a"] and msg._seen == ["p"]


def test_blocks_are_shared_because_they_are_frozen() -> None:
    block = TextBlock("t")
    msg = Message("assistant", [block])
    copied = copy_message(msg)
    assert copied.content is not msg.content
    assert copied.content[0] is block
    assert copy.deepcopy(msg) == copied


# -- freeze_message / thaw_message: what InMemoryMemory keeps ------------------------------


def test_the_frozen_field_order_is_the_models() -> None:
    from framework_agents._pydantic_fast import _FIELD_NAMES

    assert tuple(Message.model_fields) == _FIELD_NAMES


@settings(max_examples=examples(300), deadline=None)
@given(_messages())
def test_thawed_equals_the_frozen_message_and_is_independent(msg: Message) -> None:
    reference = msg.model_copy(deep=True)
    frozen = freeze_message(msg)
    _mutate_message(msg)  # changing the original after freezing changes nothing kept
    first = thaw_message(frozen)
    assert _same(first, reference)
    _mutate_message(first)  # nor does changing what was thawed
    assert _same(thaw_message(frozen), reference)


@pytest.mark.parametrize(
    "msg",
    [
        Message("user", "hi"),
        Message("tool", "r", tool_call_id="c1", name="f", id="m1"),
        Message.model_validate({"role": "user", "content": "", "metadata": {}}),
    ],
    ids=["plain", "tool-result", "validated-with-defaults"],
)
def test_a_text_only_message_is_frozen_as_an_untracked_tuple(msg: Message) -> None:
    frozen = freeze_message(msg)
    assert isinstance(frozen, tuple)
    gc.collect(0)  # the collector untracks a tuple of untracked values on its first pass
    assert not gc.is_tracked(frozen)  # so it never walks the kept history again
    assert _same(thaw_message(frozen), msg)


def _odd_fields_set() -> Message:
    msg = Message("user", "x")
    msg.__pydantic_fields_set__.add("not_a_field")
    return msg


def _str_subclass() -> Message:
    class Text(str):
        pass

    msg = Message("user", "x")
    object.__setattr__(msg, "content", Text("x"))  # forced past the frozen model
    return msg


@pytest.mark.parametrize(
    "make",
    [
        lambda: Message("assistant", "", [ToolCall("c", "f", {"a": [1]})]),
        lambda: Message("user", "x", metadata={"k": [1]}),
        lambda: Message("assistant", [TextBlock("t")]),
        _odd_fields_set,
        _str_subclass,
    ],
    ids=["tool-calls", "metadata", "blocks", "odd-fields-set", "str-subclass"],
)
def test_anything_else_is_kept_as_a_deep_copy(make: Any) -> None:
    msg = make()
    frozen = freeze_message(msg)
    assert isinstance(frozen, Message) and frozen is not msg
    thawed = thaw_message(frozen)
    assert thawed == msg and thawed is not frozen
    assert thawed.model_fields_set == msg.model_fields_set
