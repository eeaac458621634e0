"""``ThreadCheckpoint(...)`` validates only the messages its OS thread has not validated.

A checkpoint of a growing history is built again for each save from a list whose first
items are the objects of the last one. The constructor keeps a private record per OS
thread of what it validated and compares pointers to skip them. Whatever the sequence of
lists, it must accept and refuse exactly what pydantic's validation of the whole list
does, give the same objects, and never hand out (or be changed through) a list it keeps.
"""

from __future__ import annotations

import threading
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import AgentError, Message, ThreadCheckpoint
from framework_agents.checkpoint import model as model_module
from framework_agents.messages import MessageList
from property_budget import examples


class Tagged(Message):
    """A Message subclass (an instance is a message to pydantic too)."""

    tag: str = "x"


_POOL: list[object] = [Message("user", f"u{i}", id=f"u{i}") for i in range(6)]
_POOL += [Message("user", "u0", id="u0")]  # a copy stored alike of _POOL[0], another object
_POOL += [
    Tagged(role="user", content="t", id="t"),
    {"role": "user", "content": "from a dict", "id": "d"},
]


class Liar:
    """No message, but says it equals anything (as ``unittest.mock.ANY`` does)."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


class Loose(Message):
    """A message (pydantic accepts it) whose ``==`` says yes to anything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


_POOL += [Loose(role="user", content="loose", id="l")]
_BAD: list[object] = ["not a message", {"role": "nobody"}, 7, None, Liar(), mock.ANY]

# One construction's list, made from the last one: extended, an item replaced (by another
# message, a copy, or something that is no message), cut short, or new altogether.
_ops = st.lists(
    st.tuples(
        st.sampled_from(["extend", "replace", "cut", "new"]),
        st.integers(0, 50),
        st.lists(st.sampled_from(_POOL + _BAD), min_size=0, max_size=4),
    ),
    min_size=1,
    max_size=12,
)


def _reference(items: list[object]) -> list[Message] | None:
    """What validating the whole list gives (``None``: refused)."""
    try:
        return MessageList.validate_python(items)
    except Exception:
        return None


def _build(items: list[object]) -> ThreadCheckpoint | None:
    try:
        return ThreadCheckpoint("t", None, items)  # type: ignore[arg-type]
    except AgentError as exc:
        assert exc.code == "INVALID_ARGUMENT"
        return None


def _same(got: list[Message], want: list[Message], given: list[object]) -> None:
    assert len(got) == len(want) == len(given)
    for g, w, item in zip(got, want, given, strict=True):
        if isinstance(item, Message):
            assert g is item  # the caller's own objects, never copies
        else:  # built from a dict: a new object either way
            assert type(g) is type(w) and g.to_json() == w.to_json()


@settings(max_examples=examples(150), deadline=None)
@given(_ops)
def test_it_accepts_and_refuses_what_validating_the_whole_list_does(
    ops: list[tuple[str, int, list[object]]],
) -> None:
    items: list[object] = []
    for op, at, more in ops:
        if op == "extend":
            items.extend(more)  # in place: the next list starts with the same objects
        elif op == "replace" and items:
            items[at % len(items)] = more[0] if more else _BAD[0]
        elif op == "cut":
            del items[at % (len(items) + 1) :]
        else:
            items = list(more)
        got = _build(items)
        want = _reference(items)
        assert (got is None) == (want is None), (items, got, want)
        if got is not None and want is not None:
            _same(got.messages, want, items)
            assert got.messages is not items


def test_a_bad_item_after_a_known_prefix_is_refused_where_it_is() -> None:
    history: list[object] = [Message("user", f"q{i}", id=f"q{i}") for i in range(50)]
    ThreadCheckpoint("t", None, history)  # type: ignore[arg-type]
    history.append({"role": "nobody"})
    with pytest.raises(AgentError) as info:
        ThreadCheckpoint("t", None, history)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
    assert ("messages", 50) in [tuple(e["loc"][:2]) for e in info.value.errors()]  # type: ignore[attr-defined]
    history[50] = Message("assistant", "a", id="a")
    history[10] = "no longer a message"  # inside the prefix validated before
    with pytest.raises(AgentError) as info:
        ThreadCheckpoint("t", None, history)  # type: ignore[arg-type]
    assert ("messages", 10) in [tuple(e["loc"][:2]) for e in info.value.errors()]  # type: ignore[attr-defined]


def test_changing_a_built_checkpoint_does_not_reach_the_record() -> None:
    # The record is the constructor's own: a checkpoint's list changed afterwards (models
    # are not frozen) must not make a later list with that change pass unchecked.
    history: list[object] = [Message("user", f"q{i}", id=f"q{i}") for i in range(5)]
    built = ThreadCheckpoint("t", None, history)  # type: ignore[arg-type]
    built.messages.append("smuggled")  # type: ignore[arg-type]
    with pytest.raises(AgentError):
        ThreadCheckpoint("t", None, [*history, "smuggled"])  # type: ignore[list-item]


def test_each_os_thread_validates_its_own_histories() -> None:
    # Two threads building checkpoints of two histories at once, each extending its own:
    # every checkpoint holds exactly its thread's history, and bad items are refused.
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(name: str) -> None:
        try:
            start.wait(10)
            history: list[Any] = []
            for i in range(300):
                history.append(Message("user", f"{name}{i}", id=f"{name}{i}"))
                built = ThreadCheckpoint(name, None, history)
                assert [m.id for m in built.messages] == [f"{name}{k}" for k in range(i + 1)]
                if i % 50 == 0:
                    with pytest.raises(AgentError):
                        ThreadCheckpoint(name, None, [*history, {"role": "nobody"}])  # type: ignore[list-item]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors


def test_only_what_is_new_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    validate = MessageList.validate_python

    class Counting:
        @staticmethod
        def validate_python(items: list[object]) -> list[Message]:
            seen.append(len(items))
            return validate(items)

    monkeypatch.setattr(model_module, "MessageList", Counting)
    history: list[Message] = []
    for i in range(20):
        history.append(Message("user", f"q{i}", id=f"q{i}"))
        ThreadCheckpoint("t", None, history)
    assert seen[1:] == [1] * 19  # after the first: the one new message each time
    rebuilt = [Message("user", m.content, id=m.id) for m in history]  # copies, stored alike
    ThreadCheckpoint("t", None, rebuilt)
    ThreadCheckpoint("t", None, [*rebuilt, Message("user", "new", id="new")])
    assert seen[-2:] == [0, 1]  # copies are known by value once, then by pointer


@pytest.mark.parametrize("impostor", [Liar(), mock.ANY], ids=["liar", "mock.ANY"])
def test_an_object_saying_it_equals_a_known_message_is_refused(impostor: object) -> None:
    # The record is compared with the caller's list: an object that is no message must
    # not get in by its own ``__eq__`` (it is asked when a message's ``==`` declines).
    history = [Message("user", f"q{i}", id=f"q{i}") for i in range(3)]
    ThreadCheckpoint("t", None, history)
    for swapped in ([impostor, *history[1:]], [impostor, *history[1:], history[0]]):
        with pytest.raises(AgentError) as info:
            ThreadCheckpoint("t", None, swapped)  # type: ignore[arg-type]
        assert info.value.code == "INVALID_ARGUMENT"
    assert Message("user", "q") == mock.ANY  # outside the record's check, as ever


def test_a_message_with_a_loose_equality_is_never_recorded() -> None:
    # Such a message is valid, but were it in the record, anything would equal it.
    loose = Loose(role="user", content="l", id="l")
    ThreadCheckpoint("t", None, [loose, Message("user", "q", id="q")])
    with pytest.raises(AgentError):
        ThreadCheckpoint("t", None, ["junk", Message("user", "q", id="q")])  # type: ignore[list-item]
    plain = [Message("user", "a", id="a"), Message("user", "b", id="b")]
    ThreadCheckpoint("t", None, plain)
    # A loose copy of a recorded message is a valid message, but not taken into the
    # record (as copies stored alike are): junk would equal it next time.
    ThreadCheckpoint("t", None, [Loose(role="user", content="a", id="a"), plain[1]])
    with pytest.raises(AgentError):
        ThreadCheckpoint("t", None, ["junk", plain[1]])  # type: ignore[list-item]


def test_a_checkpoint_built_while_the_record_is_compared_does_not_use_it() -> None:
    # A value's ``__eq__`` runs during the comparison, when the record holds the caller's
    # tail, not yet validated: a checkpoint built there must validate all it is given.
    seen: dict[str, object] = {}
    junk = object()

    class Hook:
        def __eq__(self, other: object) -> bool:
            if "inner" not in seen:
                inner = [first, junk]  # the very objects the record holds at this moment
                try:
                    seen["inner"] = ThreadCheckpoint("t", None, inner).messages  # type: ignore[arg-type]
                except AgentError as exc:
                    seen["inner"] = exc.code
            return True

        __hash__ = None  # type: ignore[assignment]

    first = Message("user", "q", id="q", metadata={"h": Hook()})
    ThreadCheckpoint("t", None, [first])
    copy = Message("user", "q", id="q", metadata={"h": Hook()})
    with pytest.raises(AgentError):
        ThreadCheckpoint("t", None, [copy, junk])  # type: ignore[list-item]
    assert seen["inner"] == "INVALID_ARGUMENT"


def test_a_list_changed_while_it_is_compared_is_checked_as_it_was_given() -> None:
    # A value's ``__eq__`` runs during the comparison with the record: it replaces an
    # item the comparison already passed (by junk, or by an object whose class borrows
    # ``Message.__eq__``). The checkpoint holds the list as it was given, and nothing
    # that is no message reaches it or the record.
    class Borrowed:
        __eq__ = Message.__eq__
        __hash__ = None  # type: ignore[assignment]

    for swap in ("junk", Borrowed()):
        items: list[object] = []

        class Hook:
            def __eq__(self, other: object) -> bool:
                if items:  # noqa: B023 (this iteration's list)
                    items[0] = swap  # noqa: B023 (this iteration's list and swap)
                return True

            __hash__ = None  # type: ignore[assignment]

        m0 = Message("user", "q0", id="q0")
        m1 = Message("user", "q1", id="q1", metadata={"h": Hook()})
        ThreadCheckpoint("t", None, [m0, m1])
        items[:] = [m0, m1.model_copy(update={"metadata": {"h": Hook()}})]  # a copy alike
        built = ThreadCheckpoint("t", None, items)  # type: ignore[arg-type]
        assert [type(m) for m in built.messages] == [Message, Message]
        assert built.messages[0] is m0
        assert all(isinstance(m, Message) for m in model_module._VALIDATED.messages)
        with pytest.raises(AgentError):
            ThreadCheckpoint("t", None, [swap, items[1]])  # type: ignore[list-item]
