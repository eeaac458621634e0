"""Validation builds messages without their Python constructors, with the same results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from framework_agents.messages import (
    Message,
    MessageList,
    ReasoningBlock,
    TextBlock,
    ToolCall,
)
from property_budget import examples

_MODELS = [Message, ToolCall, TextBlock, ReasoningBlock]


@pytest.mark.parametrize("cls", _MODELS, ids=lambda c: c.__name__)
def test_validation_does_not_go_through_the_constructor(cls: type[Any]) -> None:
    # The positional constructors stay for Python callers; parsing skips them (speed).
    assert cls.__pydantic_custom_init__ is False


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)
_fields = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
    optional={
        "content": st.text(max_size=4)
        | st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=4)})
            | st.fixed_dictionaries(
                {"type": st.just("reasoning"), "text": st.text(max_size=4)},
                optional={"signature": st.none() | st.text(max_size=3)},
            ),
            max_size=3,
        ),
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {"id": st.text(max_size=3), "name": st.text(max_size=3)},
                optional={"args": st.dictionaries(st.text(max_size=3), _json, max_size=3)},
            ),
            max_size=2,
        ),
        "tool_call_id": st.none() | st.text(max_size=3),
        "name": st.none() | st.text(max_size=3),
        "id": st.text(max_size=3),
        "metadata": st.dictionaries(st.text(max_size=3), _json, max_size=3),
    },
)


@settings(max_examples=examples(200), deadline=None)
@given(_fields)
def test_parsed_equals_constructed(data: dict[str, Any]) -> None:
    if "id" not in data:
        data["id"] = "fixed"  # a left-out id is a fresh one on both paths
    built = Message(**data)
    assert Message.model_validate(data) == built
    assert Message.model_validate_json(json.dumps(data)) == built
    assert MessageList.validate_json(json.dumps([data])) == [built]
    assert Message.from_json(built.to_json()) == built


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"role": "robot"},
        {"role": "user", "id": None},
        {"role": "user", "content": None},
        {"role": "user", "surprise": 1},
        {"role": "assistant", "tool_calls": [{"id": "c"}]},
        {"role": "assistant", "tool_calls": [{"id": "c", "name": "t", "extra": 1}]},
        {"role": "user", "content": [{"type": "text"}]},
        {"role": "user", "content": [{"type": "text", "text": "t", "more": 1}]},
    ],
    ids=repr,
)
def test_bad_data_fails_alike_parsed_or_constructed(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Message(**data)
    with pytest.raises(ValidationError):
        Message.model_validate(data)
    with pytest.raises(ValidationError):
        Message.model_validate_json(json.dumps(data))
