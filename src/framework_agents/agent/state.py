"""``agent.state``: a dict-like store of JSON values that snapshots and checkpoints copy."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, MutableMapping
from typing import Any

from .._persist import json_problem
from .._util import DictMapping
from ..errors import StateNotJsonError

__all__ = ["AgentState", "check_json_value"]


def check_json_value(value: Any, path: str = "value") -> None:
    """Raise ``STATE_NOT_JSON`` unless ``value`` is plain JSON (no NaN, str keys, lists).

    The persistence layer's rule comes first (iterative, with the one nesting limit every
    store applies), so state an agent accepts is state every snapshot and checkpoint can
    hold; then the stricter shape of agent state (lists, not tuples).
    """
    problem = json_problem(value, path)
    if problem is not None:
        raise StateNotJsonError(problem)
    _check_shape(value, path)


def _check_shape(value: Any, path: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StateNotJsonError(f"{path} is {value!r}, which JSON cannot hold")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_shape(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise StateNotJsonError(f"{path} has a non-string key {key!r}")
            _check_shape(item, f"{path}[{key!r}]")
        return
    raise StateNotJsonError(
        f"{path} is a {type(value).__name__}; agent state holds JSON values only "
        "(None, bool, int, float, str, list, dict with str keys)"
    )


class AgentState(DictMapping, MutableMapping[str, Any]):
    """A mutable mapping of JSON values; setting anything else raises ``STATE_NOT_JSON``.

    Values are deep-copied on the way in, so later changes to the caller's object do not
    leak in. Values read out are the stored objects: mutate them in place only with JSON
    values (``to_dict()`` re-checks everything and raises if a nested edit broke the rule).
    """

    __slots__ = ()

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self._data = {}
        if initial is not None:
            self.replace(initial)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise StateNotJsonError(f"state keys are strings, not {type(key).__name__}")
        check_json_value(value, f"state[{key!r}]")
        self._data[key] = copy.deepcopy(value)

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __repr__(self) -> str:
        return f"AgentState({self._data!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AgentState):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def replace(self, values: Mapping[str, Any]) -> None:
        """Replace the whole state with ``values`` (all checked before anything changes)."""
        if not isinstance(values, Mapping):
            raise StateNotJsonError(f"state must be a mapping, not {type(values).__name__}")
        check_json_value(dict(values), "state")
        self._data = copy.deepcopy(dict(values))

    def to_dict(self) -> dict[str, Any]:
        """A deep copy as a plain dict (what snapshots and checkpoints store)."""
        check_json_value(self._data, "state")
        return copy.deepcopy(self._data)
