"""Checkpoints kept as values (``checkpoint._values``): what a store keeps is what a read gives.

``FileCheckpointer`` answers loads of unchanged files from what it saved, and
``InMemoryCheckpointer`` keeps no JSON at all: both must give back what a fresh read of a
file gives (a tuple as a list, an ``int`` subclass as an ``int``, a Message subclass as a
Message), share the immutable messages, copy every container, and check per save only
what the save adds.
"""

from __future__ import annotations

import asyncio
import enum
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from async_helper import arun, some
from framework_agents import (
    FileCheckpointer,
    InMemoryCheckpointer,
    Message,
    ThreadCheckpoint,
    ToolCall,
)
from framework_agents._persist import reads_back_as_is
from framework_agents.checkpoint import _values
from history_checks import count_well_formed_checks
from property_budget import examples

Factory = Callable[[Path], FileCheckpointer | InMemoryCheckpointer]
STORES = pytest.mark.parametrize(
    "make", [FileCheckpointer, lambda _: InMemoryCheckpointer()], ids=["file", "memory"]
)


class Level(enum.IntEnum):
    HIGH = 2


class Tagged(Message):
    """A Message subclass: its own field is not stored."""

    tag: str = "x"


def _file_read(tmp_path: Path, checkpoint: ThreadCheckpoint) -> dict[str, Any]:
    """What a fresh FileCheckpointer reads back after saving ``checkpoint`` alone."""
    cp = FileCheckpointer(tmp_path / "reference")
    arun(cp.save(checkpoint))
    return some(arun(FileCheckpointer(tmp_path / "reference").load("t"))).model_dump()


@STORES
def test_a_delta_of_odd_but_plain_values_loads_as_a_file_reads_it(
    tmp_path: Path, make: Factory
) -> None:
    cp = make(tmp_path / "store")
    first = Message("user", "a", id="a")
    arun(cp.save(ThreadCheckpoint("t", None, [first], {"n": 1})))
    odd = [
        first,
        Message("assistant", "", tool_calls=[ToolCall("c", "f", {"xs": (1, 2)})], id="b"),
        Message("tool", "r", tool_call_id="c", name="f", id="r", metadata={"l": Level.HIGH}),
        Tagged(role="user", content="c", id="c", tag="y"),
    ]
    checkpoint = ThreadCheckpoint("t", None, odd, {"pair": (1, "x")}, decisions={"f": "approve"})
    arun(cp.save(checkpoint))  # a delta: the first message is stored
    loaded = some(arun(cp.load("t")))
    assert loaded.model_dump() == _file_read(tmp_path, checkpoint)
    assert loaded.messages[1].tool_calls[0].args == {"xs": [1, 2]}
    assert type(loaded.messages[2].metadata["l"]) is int
    assert type(loaded.messages[3]) is Message
    assert loaded.state == {"pair": [1, "x"]}
    assert loaded.messages[0] is first  # the kept message is the very object


@STORES
def test_saved_and_loaded_containers_are_never_shared(tmp_path: Path, make: Factory) -> None:
    cp = make(tmp_path)
    state: dict[str, Any] = {"deep": {"k": [1]}}
    messages = [Message("user", "a", id="a")]
    arun(cp.save(ThreadCheckpoint("t", None, messages, state, app_data={"a": [1]})))
    state["deep"]["k"].append(2)
    messages.append(Message("user", "b", id="b"))
    loaded = some(arun(cp.load("t")))
    assert loaded.state == {"deep": {"k": [1]}} and len(loaded.messages) == 1
    loaded.state["deep"]["k"].append(3)
    loaded.messages.clear()
    assert loaded.app_data is not None
    loaded.app_data["a"].append(2)
    again = some(arun(cp.load("t")))
    assert again.state == {"deep": {"k": [1]}} and again.app_data == {"a": [1]}
    assert [m.id for m in again.messages] == ["a"]


@STORES
def test_a_save_that_extends_the_stored_history_checks_only_what_it_adds(
    tmp_path: Path, make: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = count_well_formed_checks(monkeypatch, _values)
    cp = make(tmp_path)
    history: list[Message] = []
    for i in range(40):
        history += [Message("user", f"q{i}", id=f"q{i}"), Message("assistant", "a", id=f"a{i}")]
        arun(cp.save(ThreadCheckpoint("t", None, list(history), {"i": i})))
    # The first save (and the file's occasional fold) checks it all; the others the tail.
    assert sum(1 for n in checked if n > 3) <= 6, checked
    assert [m.id for m in some(arun(cp.load("t"))).messages] == [m.id for m in history]


@pytest.mark.parametrize(
    ("value", "as_is"),
    [
        ({"a": [1, 2.5, None, True, "s", {"b": []}]}, True),
        ((1, 2), False),
        ({"a": (1,)}, False),
        (Level.HIGH, False),
        ({"a": Level.HIGH}, False),
        ([{"k": "v"}], True),
    ],
    ids=["plain", "tuple", "nested-tuple", "int-enum", "nested-enum", "list-of-dicts"],
)
def test_reads_back_as_is_tells_exact_json_types(value: object, as_is: bool) -> None:
    assert reads_back_as_is(value) is as_is


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=3),
    st.just(Level.HIGH),
)
_values_st = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
    ),
    max_leaves=6,
)
_steps = st.lists(st.tuples(st.integers(0, 4), _values_st, _values_st), min_size=1, max_size=8)


@settings(max_examples=examples(60), deadline=None)
@given(_steps)
def test_both_stores_load_exactly_what_a_file_read_gives(
    steps: list[tuple[int, object, object]],
) -> None:
    # Deltas of random odd-but-plain values (tuples, an IntEnum, nested), a Message
    # subclass, and histories started over (a fold): every load, from either store's
    # in-process view, is exactly (repr: types included) a fresh file read. The file
    # store's view takes its messages from its record of the history while that holds
    # what a read gives, and keeps a list of its own once it does not.
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        memory, files = InMemoryCheckpointer(), FileCheckpointer(root / "files")
        history: list[Message] = []
        for n, (kind, meta, args) in enumerate(steps):
            metadata = {"v": meta}
            if kind == 0:
                history.append(Message("user", f"u{n}", id=f"u{n}", metadata=metadata))
            elif kind == 3:
                history.append(Tagged(role="user", content=f"g{n}", id=f"g{n}", tag="kept out"))
            elif kind == 4:
                history = []  # started over: not an extension of what is stored
            else:
                call = ToolCall(f"c{n}", "f", {"a": args})
                history.append(Message("assistant", "", tool_calls=[call], id=f"a{n}"))
                history.append(
                    Message(
                        "tool", "r", tool_call_id=f"c{n}", name="f", id=f"t{n}", metadata=metadata
                    )
                )
            checkpoint = ThreadCheckpoint("t", None, list(history), {"s": args, "n": n})
            arun(memory.save(checkpoint))
            arun(files.save(checkpoint))
            fresh = some(arun(FileCheckpointer(root / "files").load("t"))).model_dump()
            when = fresh.pop("saved_at")  # the same instant; a read's tzinfo is pydantic's
            for store in (memory, files):
                loaded = some(arun(store.load("t"))).model_dump()
                assert loaded.pop("saved_at") == when
                assert repr(loaded) == repr(fresh)


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_what_a_load_or_a_save_gave_is_left_alone_by_later_saves(tmp_path: Path, kind: str) -> None:
    # A store extends its own record of the history in place (no copy a save): what it
    # handed out (loads) and what it was given (saves) must never change with it.
    async def main() -> None:
        cp = FileCheckpointer(tmp_path) if kind == "file" else InMemoryCheckpointer()
        history = [Message("user", f"m{i}", id=f"m{i}") for i in range(3)]
        given = ThreadCheckpoint("t", None, list(history), {})
        await cp.save(given)
        loaded = await cp.load("t")
        assert loaded is not None
        for i in range(3, 6):
            history.append(Message("user", f"m{i}", id=f"m{i}"))
            await cp.save(ThreadCheckpoint("t", None, list(history), {"i": i}))
        history[1:] = [Message("user", "edited", id="e")]  # not an extension: a fold
        await cp.save(ThreadCheckpoint("t", None, list(history), {}))
        assert [m.id for m in loaded.messages] == ["m0", "m1", "m2"]
        assert [m.id for m in given.messages] == ["m0", "m1", "m2"]
        again = await cp.load("t")
        assert again is not None and [m.id for m in again.messages] == ["m0", "e"]

    asyncio.run(main())


def test_a_load_beside_a_save_gives_the_old_checkpoint_or_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loads take no lock. A load that runs after a delta save extended the instance's
    # record of the messages, but before it replaced the view of the stored checkpoint,
    # must give the old checkpoint whole: a save once extended the kept value's messages
    # in place, and the load returned the new messages with the old state.
    import threading

    # The save that builds the new view runs in ``_file_writer``: its ``kept_fields``.
    from framework_agents.checkpoint import _file_writer

    cp = FileCheckpointer(tmp_path)
    first = [Message("user", "q1", id="q1")]
    asyncio.run(cp.save(ThreadCheckpoint("t", None, first, {"turn": 1})))
    asyncio.run(cp.load("t"))  # the instance knows the files: loads come from its value
    checked, kept, loaded = threading.Event(), threading.Event(), threading.Event()
    unchanged = cp._unchanged
    kept_fields = getattr(_file_writer, "kept_fields")  # noqa: B009 (imported there, not exported)

    def unchanged_then_wait(thread_id: str) -> bool:
        result = unchanged(thread_id)
        if threading.current_thread().name == "loader":
            checked.set()  # the load has taken the old value...
            assert kept.wait(10)  # ...and copies it once the save has built the new one
        return result

    def kept_then_wait(*args: Any) -> Any:
        result = kept_fields(*args)
        kept.set()
        assert loaded.wait(10)
        return result

    monkeypatch.setattr(cp, "_unchanged", unchanged_then_wait)
    monkeypatch.setattr(_file_writer, "kept_fields", kept_then_wait)
    out: dict[str, ThreadCheckpoint | None] = {}

    def load() -> None:
        out["checkpoint"] = cp._load_sync("t")
        loaded.set()

    loader = threading.Thread(target=load, name="loader")
    loader.start()
    assert checked.wait(10)
    grown = [*first, Message("assistant", "a1", id="a1"), Message("user", "q2", id="q2")]
    cp._save_sync(ThreadCheckpoint("t", None, grown, {"turn": 2}))
    loader.join(10)
    got = out["checkpoint"]
    assert got is not None
    assert (got.state["turn"], [m.id for m in got.messages]) in [
        (1, ["q1"]),
        (2, ["q1", "a1", "q2"]),
    ]


def test_a_save_interrupted_before_the_store_holds_it_leaves_the_old_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An exception between building the kept value and storing it (a second Ctrl-C is
    # delivered between any two bytecodes) must leave the stored checkpoint whole.
    cp = InMemoryCheckpointer()
    first = [Message("user", "q1", id="q1")]
    asyncio.run(cp.save(ThreadCheckpoint("t", None, first, {"turn": 1})))
    copy = ThreadCheckpoint.model_copy

    def interrupted(self: ThreadCheckpoint, *args: Any, **kwargs: Any) -> ThreadCheckpoint:
        if sys._getframe(1).f_code.co_name == "kept_value":
            raise KeyboardInterrupt
        return copy(self, *args, **kwargs)

    monkeypatch.setattr(ThreadCheckpoint, "model_copy", interrupted)
    grown = [*first, Message("assistant", "a1", id="a1")]
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cp.save(ThreadCheckpoint("t", None, grown, {"turn": 2})))
    monkeypatch.undo()
    got = asyncio.run(cp.load("t"))
    assert got is not None and got.state == {"turn": 1} and [m.id for m in got.messages] == ["q1"]


def test_a_load_beside_the_first_save_after_a_read_leaves_the_record_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A load once put the record back to the list it had copied (no lock held) while the
    # first save after a read had extended it: later loads from the instance then gave
    # the new state with the old messages. Loads now never change the record.
    import threading

    # A load from the instance copies its view in ``_file_records`` (``View.value``); the
    # save builds the new view in ``_file_writer``.
    from framework_agents.checkpoint import _file_records, _file_writer

    def msgs(n: int) -> list[Message]:
        return [Message("user", f"u{i}", id=f"u{i}") for i in range(n)]

    arun(FileCheckpointer(tmp_path).save(ThreadCheckpoint("t", None, msgs(3), {"s": 0})))
    cp = FileCheckpointer(tmp_path)
    history = list(some(arun(cp.load("t"))).messages)  # read from the files
    in_view, extended, loaded = threading.Event(), threading.Event(), threading.Event()
    detached = getattr(_file_records, "detached")  # noqa: B009 (imported there, not exported)
    kept_fields = getattr(_file_writer, "kept_fields")  # noqa: B009

    def detached_then_wait(*args: Any) -> Any:
        result = detached(*args)  # the load has copied the old view...
        if threading.current_thread().name == "loader" and not in_view.is_set():
            in_view.set()
            assert extended.wait(10)  # ...and goes on once the save extended the record
        return result

    def kept_then_wait(*args: Any) -> Any:
        extended.set()  # the record is extended, the view not yet replaced
        assert loaded.wait(10)
        return kept_fields(*args)

    monkeypatch.setattr(_file_records, "detached", detached_then_wait)
    monkeypatch.setattr(_file_writer, "kept_fields", kept_then_wait)

    def load() -> None:
        cp._load_sync("t")
        loaded.set()

    loader = threading.Thread(target=load, name="loader")
    loader.start()
    assert in_view.wait(10)
    history += msgs(5)[3:]
    cp._save_sync(ThreadCheckpoint("t", None, history, {"s": 1}))
    loader.join(10)
    monkeypatch.undo()
    mine = some(arun(cp.load("t")))
    fresh = some(arun(FileCheckpointer(tmp_path).load("t")))
    assert (mine.state, [m.id for m in mine.messages]) == ({"s": 1}, [f"u{i}" for i in range(5)])
    assert mine.model_dump() == fresh.model_dump()


def test_copies_that_read_back_otherwise_are_not_taken_into_the_record(tmp_path: Path) -> None:
    # A history of copies stored alike (Message.__eq__) but holding a dict subclass: the
    # record must not take them (a load of unchanged files hands the record's objects
    # out, and a read gives a plain dict).
    class AttrDict(dict[str, Any]):
        pass

    cp = FileCheckpointer(tmp_path)
    stored = [Message("user", f"u{i}", id=f"u{i}", metadata={"k": {"a": 1}}) for i in range(3)]
    arun(cp.save(ThreadCheckpoint("t", None, stored)))
    copies = [Message("user", m.content, id=m.id, metadata={"k": AttrDict(a=1)}) for m in stored]
    assert copies[0] == stored[0]
    arun(cp.save(ThreadCheckpoint("t", None, [*copies, Message("user", "new", id="n")])))
    mine = some(arun(cp.load("t")))
    fresh = some(arun(FileCheckpointer(tmp_path).load("t")))
    assert [type(m.metadata["k"]) for m in mine.messages[:3]] == [dict] * 3
    assert mine.model_dump() == fresh.model_dump()


class _S(str):
    """A str subclass: equal to the str, but a read gives a str."""


class _AttrDict(dict[str, Any]):
    pass


@pytest.mark.parametrize(
    "change",
    [
        {"id": "str subclass"},
        {"name": "str subclass"},
        {"metadata": "empty dict subclass"},
        {"tool_calls": "empty list subclass"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_copies_alike_but_of_other_types_are_never_handed_out(
    tmp_path: Path, change: dict[str, str]
) -> None:
    # ``Message.__eq__`` cannot tell a str subclass in a string field, or an empty dict
    # or list subclass, from what a read gives: such copies must not reach the record
    # that loads of unchanged files answer from, nor be kept as the saved messages.
    field = next(iter(change))

    def odd(m: Message) -> Message:
        value: Any = {
            "id": _S(m.id),
            "name": _S(m.name or ""),
            "metadata": _AttrDict(),
            "tool_calls": type("L", (list,), {})(),
        }[field]
        return m.model_copy(update={field: value})

    cp = FileCheckpointer(tmp_path)
    stored = [Message("user", f"u{i}", id=f"u{i}", name="n") for i in range(3)]
    arun(cp.save(ThreadCheckpoint("t", None, stored)))
    copies = [odd(m) for m in stored]
    assert copies[0] == stored[0]
    arun(
        cp.save(ThreadCheckpoint("t", None, [*copies, odd(Message("user", "x", id="x", name="n"))]))
    )
    mine = some(arun(cp.load("t")))
    fresh = some(arun(FileCheckpointer(tmp_path).load("t")))
    assert repr(mine.messages) == repr(fresh.messages)
    for m in mine.messages:
        assert type(m.id) is str and type(m.name) is str
        assert type(m.metadata) is dict and type(m.tool_calls) is list


def test_a_message_whose_class_says_it_equals_anything_never_hides_a_change(
    tmp_path: Path,
) -> None:
    # A stored Message subclass whose ``==`` says yes to anything: the next save, of
    # another history, must store that history, not keep the old message.
    class Loose(Message):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    for make in (FileCheckpointer, lambda _: InMemoryCheckpointer()):
        cp = make(tmp_path / str(id(make)))
        arun(cp.save(ThreadCheckpoint("t", None, [Loose(role="user", content="a", id="a")])))
        later = [Message("user", "b", id="b"), Message("user", "c", id="c")]
        arun(cp.save(ThreadCheckpoint("t", None, later)))
        assert [m.id for m in some(arun(cp.load("t"))).messages] == ["b", "c"]
        if isinstance(cp, FileCheckpointer):
            fresh = some(arun(FileCheckpointer(cp.root).load("t")))
            assert [m.id for m in fresh.messages] == ["b", "c"]
