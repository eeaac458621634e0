"""``agent.state`` (JSON values only) and the timeline's rules."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from framework_agents import (
    Agent,
    InvalidArgumentError,
    ScriptedModel,
    StateNotJsonError,
    TimelineEntry,
)
from framework_agents.agent import AgentState
from framework_agents.agent.timeline import Timeline

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(key=st.text(), value=json_values)
def test_any_json_value_round_trips(key: str, value: Any) -> None:
    state = AgentState()
    state[key] = value
    assert state[key] == value
    assert state.to_dict() == {key: value}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(math.nan, id="nan"),
        pytest.param(math.inf, id="inf"),
        pytest.param(object(), id="object"),
        pytest.param((1, 2), id="tuple"),
        pytest.param({1: "a"}, id="int-key"),
        pytest.param({"a": [1, {2.0, 3.0}]}, id="nested-set"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param({"deep": {"x": math.nan}}, id="nested-nan"),
    ],
)
def test_non_json_values_are_refused(value: Any) -> None:
    state = AgentState({"keep": 1})
    with pytest.raises(StateNotJsonError) as info:
        state["bad"] = value
    assert info.value.code == "STATE_NOT_JSON"
    assert dict(state) == {"keep": 1}


def test_keys_must_be_strings() -> None:
    with pytest.raises(StateNotJsonError):
        AgentState()[1] = "x"  # type: ignore[index]


def test_values_are_copied_in() -> None:
    source = {"items": [1, 2]}
    state = AgentState()
    state["data"] = source
    source["items"].append(3)
    assert state["data"] == {"items": [1, 2]}


def test_to_dict_is_a_deep_copy_and_rechecks_nested_edits() -> None:
    state = AgentState({"xs": [1]})
    copy = state.to_dict()
    copy["xs"].append(2)
    assert state["xs"] == [1]
    state["xs"].append(object())  # a nested in-place edit bypasses __setitem__...
    with pytest.raises(StateNotJsonError):
        state.to_dict()  # ...and is caught when the state is copied out


def test_mutable_mapping_behaviour() -> None:
    state = AgentState({"a": 1, "b": 2})
    del state["a"]
    state.update(c=3)
    assert list(state) == ["b", "c"] and len(state) == 2
    assert state == {"b": 2, "c": 3}
    assert state.get("zzz") is None
    state.replace({"z": None})
    assert dict(state) == {"z": None}


def test_agent_state_from_constructor_and_assignment() -> None:
    agent = Agent(ScriptedModel([]), state={"user": "ada"})
    assert agent.state["user"] == "ada"
    agent.state["n"] = 1
    agent.state = {"fresh": True}
    assert dict(agent.state) == {"fresh": True}
    with pytest.raises(StateNotJsonError):
        agent.state = {"bad": math.nan}
    assert dict(agent.state) == {"fresh": True}
    with pytest.raises(StateNotJsonError):
        Agent(ScriptedModel([]), state={"bad": object()})


def test_timeline_entries_are_validated() -> None:
    entry = TimelineEntry(
        rev=1, kind="run", at=datetime(2030, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    )
    assert entry.at.tzinfo == UTC and entry.at.hour == 10
    with pytest.raises(ValidationError):
        TimelineEntry(rev=0, kind="run")
    with pytest.raises(ValidationError):
        TimelineEntry(rev=1, kind="bogus")
    with pytest.raises(ValidationError):
        TimelineEntry(rev=1, kind="run", at=datetime(2030, 1, 1))  # naive
    assert TimelineEntry.model_validate_json(entry.model_dump_json()) == entry


def test_timeline_revs_only_grow() -> None:
    timeline = Timeline([TimelineEntry(rev=3, kind="run")])
    assert timeline.record("snapshot").rev == 4
    with pytest.raises(InvalidArgumentError):
        Timeline([TimelineEntry(rev=2, kind="run"), TimelineEntry(rev=2, kind="edit")])
    assert [e.rev for e in timeline.entries()] == [3, 4]


def test_state_nested_deeper_than_any_store_holds_is_refused_up_front() -> None:
    """The agent and the stores share one nesting limit: no run fails later at the save."""
    from framework_agents._persist import MAX_JSON_DEPTH
    from framework_agents.errors import StateNotJsonError

    agent = Agent(ScriptedModel(["x"]))
    deep: list[object] = []
    for _ in range(MAX_JSON_DEPTH + 50):
        deep = [deep]
    with pytest.raises(StateNotJsonError):
        agent.state["deep"] = deep
    assert "deep" not in agent.state
    fine: list[object] = []
    for _ in range(MAX_JSON_DEPTH // 2):
        fine = [fine]
    agent.state["fine"] = fine
    assert agent.take_snapshot().data.state == {"fine": fine}
