"""A session save makes no list of the history's size (issue 34: saves flat in history).

An agent's save hands the manager its history list, which it replaces and never
changes: the data built then holds that very list (checked only past the stored
prefix); a caller's list is still copied, so changing it afterwards changes nothing.
"""

from __future__ import annotations

import pytest

from async_helper import arun
from framework_agents import InMemoryStorage, Message, SessionManager, Snapshot
from framework_agents.errors import StateNotJsonError


def _history(n: int) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(n)]


def _stored(n: int) -> tuple[SessionManager, list[Message]]:
    manager = SessionManager("s", InMemoryStorage())
    history = _history(n)
    arun(manager.save_latest(Snapshot(manager.snapshot_data(history, {}))))
    return manager, history


def test_an_owned_history_is_held_as_it_is() -> None:
    manager, history = _stored(6)
    grown = [*history, *_history(2)]
    data = manager.snapshot_data(grown, {}, owned=True)
    assert data.messages is grown
    arun(manager.save_latest(Snapshot(data)))
    latest = arun(SessionManager("s", manager.storage).load_latest())
    assert latest is not None and latest.data.messages == grown


def test_a_callers_list_is_copied() -> None:
    manager, history = _stored(6)
    grown = [*history, Message("user", "new")]
    data = manager.snapshot_data(grown, {})
    assert data.messages == grown and data.messages is not grown
    grown.append(Message("assistant", "later"))
    assert data.messages is not None and len(data.messages) == 7


def test_an_owned_history_still_checks_what_is_new() -> None:
    manager, history = _stored(4)
    bad = Message("user", "x", metadata={"when": {1, 2}})  # a set is not JSON
    with pytest.raises(StateNotJsonError):
        manager.snapshot_data([*history, bad], {}, owned=True)


def test_an_owned_history_that_is_not_the_stored_one_is_validated_whole() -> None:
    manager, _ = _stored(4)
    other = _history(3)
    data = manager.snapshot_data(other, {}, owned=True)
    assert data.messages == other


def test_a_save_of_the_checked_list_appends_what_is_new() -> None:
    manager, history = _stored(6)
    grown = [*history, *_history(2)]
    arun(manager.save_latest(Snapshot(manager.snapshot_data(grown, {}, owned=True))))
    # The manager's record moved on: a list checked before it did is looked at again.
    stale = [*history, Message("user", "other")]
    data = manager.snapshot_data(stale, {}, owned=True)
    arun(manager.load_latest())  # the record is read again: no check of before holds
    arun(manager.save_latest(Snapshot(data)))
    latest = arun(SessionManager("s", manager.storage).load_latest())
    assert latest is not None and latest.data.messages == stale
