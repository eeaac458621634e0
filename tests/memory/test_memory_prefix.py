"""A save's prefix check (``shared_prefix``/``stored_prefix``) and the equality it rests on.

Messages are equal when stored alike, so a history compares in C; the check that a
caller's history extends the stored one must say exactly what the element-by-element
JSON comparison says, and leave the stored list as it was.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Message, TextBlock, ToolCall
from framework_agents.memory._document import shared_prefix, stored_prefix

# Pairs pydantic's == calls equal although JSON writes them differently.
CONFUSED: dict[str, tuple[Any, Any]] = {
    "int-and-bool": (1, True),
    "int-and-float": (1, 1.0),
    "zero-signs": (0.0, -0.0),
    "key-order": ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    "nested": ([{"x": 0}], [{"x": False}]),
}


@pytest.mark.parametrize(("a", "b"), CONFUSED.values(), ids=CONFUSED.keys())
def test_messages_are_equal_only_when_stored_alike(a: Any, b: Any) -> None:
    assert a == b  # what pydantic's == compared
    shapes = [
        lambda v: Message("user", "x", id="m", metadata={"k": v}),
        lambda v: Message("assistant", "", [ToolCall("c", "t", {"k": v})], id="m"),
    ]
    for make in shapes:
        x, y = make(a), make(b)
        assert x.to_json() != y.to_json()
        assert x != y and not x == y  # noqa: SIM201
        assert x == make(a) and x.model_copy() == x


def test_equality_of_plain_messages_is_unchanged() -> None:
    assert Message("user", "x", id="1") == Message("user", "x", id="1")
    assert Message("user", "x", id="1") != Message("user", "y", id="1")
    assert Message("user", [TextBlock("x")], id="1") == Message("user", [TextBlock("x")], id="1")
    assert Message("user", "x", id="1") != {"role": "user", "content": "x", "id": "1"}
    assert Message("user", "x") != ToolCall("c", "t")
    with pytest.raises(TypeError):
        hash(Message("user", "x"))  # lists inside: unhashable, as before


_VALUES = st.sampled_from(
    [1, True, 1.0, 0.0, -0.0, "1", None, [1], {"a": 1, "b": 2}, {"b": 2, "a": 1}]
)


@st.composite
def _message(draw: st.DrawFn) -> Message:
    text = draw(st.sampled_from(["", "x", "y"]))
    if draw(st.booleans()):
        return Message("user", text, id=draw(st.sampled_from(["a", "b"])))
    return Message(
        "assistant",
        text,
        [ToolCall("c", "t", {"v": draw(_VALUES)})] if draw(st.booleans()) else [],
        id="a",
        metadata={"m": draw(_VALUES)} if draw(st.booleans()) else {},
    )


@given(a=_message(), b=_message())
def test_equal_exactly_when_the_stored_json_is_the_same(a: Message, b: Message) -> None:
    assert (a == b) is (a.to_json() == b.to_json())


def _reference(known: list[Message], messages: list[Any]) -> int:
    """The element-by-element prefix, by stored JSON."""
    for i, (old, new) in enumerate(zip(known, messages, strict=False)):
        same = old is new or (type(new) is Message and old.to_json() == new.to_json())
        if not same:
            return i
    return min(len(known), len(messages))


@settings(max_examples=300)
@given(
    pool=st.lists(_message(), min_size=1, max_size=6),
    data=st.data(),
)
def test_the_prefix_checks_agree_with_the_json_comparison(pool: list[Message], data: Any) -> None:
    known = data.draw(st.lists(st.sampled_from(pool), max_size=8))
    # Mostly a history that extends the stored one (same objects, or copies), or not.
    how = data.draw(st.sampled_from(["extends", "copies", "random"]))
    if how == "random":
        messages = data.draw(st.lists(st.sampled_from([*pool, "x", None]), max_size=10))
    else:
        head = known if how == "extends" else [m.model_copy() for m in known]
        messages = [*head, *data.draw(st.lists(st.sampled_from(pool), max_size=3))]
        if head and data.draw(st.booleans()):
            messages[data.draw(st.integers(0, len(head) - 1))] = data.draw(st.sampled_from(pool))
    expected = _reference(known, messages)
    assert shared_prefix(known, messages) == expected
    before = list(known)
    assert stored_prefix(known, messages) == expected
    assert len(known) == len(before) and all(a is b for a, b in zip(known, before, strict=True))


def test_stored_prefix_leaves_the_stored_list_as_it_was_when_a_comparison_raises() -> None:
    class Boom:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("boom")

        __hash__ = None  # type: ignore[assignment]

    known = [Message("user", "x", id="a"), Message("user", "y", id="b")]
    before = list(known)
    with pytest.raises(RuntimeError, match="boom"):
        stored_prefix(known, [known[0], Boom(), Message("user", "z")])
    assert known == before and all(a is b for a, b in zip(known, before, strict=True))
