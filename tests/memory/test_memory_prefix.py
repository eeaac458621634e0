"""A save's prefix check (``shared_prefix``/``stored_prefix``) and the equality it rests on.

Messages are equal when stored alike, so a history compares in C; the check that a
caller's history extends the stored one must say exactly what the element-by-element
JSON comparison says, and leave the stored list as it was.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import Message, TextBlock, ToolCall
from framework_agents._persist import shared_prefix, stored_prefix
from property_budget import examples

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
    shapes: list[Callable[[Any], Message]] = [
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


@settings(max_examples=examples(300))
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
    # The stored list keeps its length and what it stores; on a match it may take the
    # caller's objects (stored alike), never otherwise.
    assert [m.to_json() for m in known] == [m.to_json() for m in before]
    kept = before if expected < len(before) else None
    if kept is not None:
        assert all(a is b for a, b in zip(known, kept, strict=True))


def test_a_history_of_copies_is_adopted_so_the_next_check_is_by_pointer() -> None:
    known = [Message("user", f"m{i}", id=f"m{i}", metadata={"i": i}) for i in range(50)]
    copies = [m.model_copy() for m in known]
    assert stored_prefix(known, [*copies, Message("user", "new")]) == 50
    assert all(a is b for a, b in zip(known, copies, strict=True))


def test_stored_prefix_leaves_the_stored_list_as_it_was_when_a_comparison_raises() -> None:
    class Boom:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("boom")

        __hash__ = None  # type: ignore[assignment]

    # A message's own ``==`` compares the values: a value's ``__eq__`` may raise. (An
    # object that is no message is never asked: the comparison is strict.)
    known = [Message("user", "x", id="a"), Message("user", "y", id="b", metadata={"v": Boom()})]
    before = list(known)
    copy = known[1].model_copy(update={"metadata": {"v": Boom()}})
    with pytest.raises(RuntimeError, match="boom"):
        stored_prefix(known, [known[0], copy, Message("user", "z")])
    assert known == before and all(a is b for a, b in zip(known, before, strict=True))
    assert stored_prefix(known, [known[0], Boom(), Message("user", "z")]) == 1  # type: ignore[list-item]


def test_equality_is_symmetric_and_never_raises() -> None:
    class Text(str):
        pass

    a = Message("user", "x", id="1")
    b = a.model_copy(update={"content": Text("x")})  # not validated: a str subclass
    assert (a == b) is (b == a) is True  # JSON writes both as "x"
    with digit_limit_lowered():
        big = Message("user", "x", id="1", metadata={"n": 10**700})
        twin = big.model_copy(update={"metadata": {"n": 10**700}})
        assert big == big and (big == twin) is False  # cannot be stored: equal only to itself


@contextlib.contextmanager
def digit_limit_lowered() -> Iterator[None]:
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(before)
