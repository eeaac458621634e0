"""Checkpoints kept as values (``checkpoint._values``): what a store keeps is what a read gives.

``FileCheckpointer`` answers loads of unchanged files from what it saved, and
``InMemoryCheckpointer`` keeps no JSON at all: both must give back what a fresh read of a
file gives (a tuple as a list, an ``int`` subclass as an ``int``, a Message subclass as a
Message), share the immutable messages, copy every container, and check per save only
what the save adds.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun, some
from framework_agents import (
    FileCheckpointer,
    InMemoryCheckpointer,
    Message,
    ThreadCheckpoint,
    ToolCall,
)
from framework_agents import history as history_module
from framework_agents._persist import reads_back_as_is
from framework_agents.checkpoint import _values

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
    checked: list[int] = []
    real = history_module.well_formed_problems

    def counting(messages: Sequence[Message]) -> list[str]:
        checked.append(len(messages))
        return real(messages)

    monkeypatch.setattr(_values, "well_formed_problems", counting)
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
