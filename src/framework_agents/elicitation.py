"""Elicitation: a question a tool asks a human in the middle of a call (an MCP server's).

A tool that cannot finish before a human answers raises :class:`ElicitationRequired`
with an :class:`Elicitation`: the message to show, the requested schema (the protocol's
restricted form: a flat object of primitive properties) and ``state``, the JSON the tool
needs to go on once answered (an MCP server's ``requestState``). The agent stops the run
with a :class:`~framework_agents.hitl.HitlInterrupt` of ``kind == "elicitation"``, saved
in the thread's checkpoint like an approval; ``resume(thread_id, {interrupt_id:
{"answer": {...}}})`` (or ``{"decline": True}``, ``{"cancel": True}``) runs the call
again with an :class:`ElicitationAnswer` in its ``ToolContext``.

The schema forms (MCP 2025-06-18 and later): ``{"type": "object", "properties": {...},
"required": [...]}`` whose properties are each a string (``minLength``, ``maxLength``,
``format`` of ``date``/``date-time``/``email``/``uri``, ``enum`` or titled ``oneOf``), a
number or integer (``minimum``, ``maximum``), a boolean, or an array of enumerated
strings (``items`` with ``enum`` or titled ``anyOf``; ``minItems``, ``maxItems``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal

from .errors import HitlDecisionError

__all__ = [
    "ElicitAction",
    "Elicitation",
    "ElicitationAnswer",
    "ElicitationRequired",
    "content_problem",
    "parse_answer",
    "schema_problem",
]

#: What a human did with a question: answered it, declined it, or dismissed it.
ElicitAction = Literal["accept", "decline", "cancel"]

_STRING_FORMATS = ("date", "date-time", "email", "uri")
_ANSWER_FORMS = '{"answer": {...}}, {"decline": True} or {"cancel": True}'


@dataclass(frozen=True, slots=True)
class Elicitation:
    """A question of a tool: ``message``, the requested ``schema`` and the tool's ``state``."""

    message: str
    schema: dict[str, Any]
    state: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As stored in a checkpoint (JSON values)."""
        return {"message": self.message, "schema": self.schema, "state": self.state}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Elicitation:
        """The question a checkpoint stored (:meth:`to_dict`)."""
        return cls(str(value["message"]), dict(value["schema"]), dict(value.get("state") or {}))


class ElicitationRequired(Exception):
    """Raised by a tool: the call needs a human's answer to ``elicitation`` to finish.

    A signal, not an error: the agent turns it into a
    :class:`~framework_agents.hitl.HitlInterrupt` of ``kind == "elicitation"``.
    """

    def __init__(self, elicitation: Elicitation) -> None:
        super().__init__(elicitation.message)
        self.elicitation = elicitation


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """A human's answer to a tool's question, handed to the call that runs again.

    ``content`` holds the answer (``action == "accept"``), validated against the schema.
    """

    action: ElicitAction
    content: dict[str, Any] | None
    elicitation: Elicitation


def _problem_of_property(name: str, prop: object) -> str | None:
    if not isinstance(prop, Mapping):
        return f"property {name!r} is not a schema object"
    kind = prop.get("type")
    if kind == "string":
        return _problem_of_string_property(name, prop)
    if kind in ("number", "integer"):
        return _bounds(name, prop, ("minimum", "maximum"), float)
    if kind == "boolean":
        return None
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping) or not (
            _strings(items.get("enum")) or _titled(items.get("anyOf"))
        ):
            return f"property {name!r}: an array must list its items (enum or anyOf of strings)"
        return _bounds(name, prop, ("minItems", "maxItems"), int)
    return (
        f"property {name!r} has type {kind!r}: only flat string, number, integer, boolean "
        "and enumerated array properties may be asked for"
    )


def _problem_of_string_property(name: str, prop: Mapping[str, Any]) -> str | None:
    fmt = prop.get("format")
    if fmt is not None and fmt not in _STRING_FORMATS:
        return f"property {name!r}: format {fmt!r} is not one of {list(_STRING_FORMATS)}"
    if "enum" in prop and not _strings(prop["enum"]):
        return f"property {name!r}: enum must be a list of strings"
    if "oneOf" in prop and not _titled(prop["oneOf"]):
        return f"property {name!r}: oneOf must be a list of {{const, title}} strings"
    return _bounds(name, prop, ("minLength", "maxLength"), int)


def _strings(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _titled(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(v, Mapping) and isinstance(v.get("const"), str) and "title" in v
            for v in value
        )
    )


def _bounds(name: str, prop: Mapping[str, Any], keys: tuple[str, str], kind: type) -> str | None:
    for key in keys:
        value = prop.get(key)
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)):
            return f"property {name!r}: {key} must be a number, not {value!r}"
    return None


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` is not a form the protocol allows for a question, or ``None``."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return f"the requested schema must be an object schema, not {schema!r:.200}"
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "the requested schema must have a properties object"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(r in properties for r in required):
        return f"required must list properties of the schema, not {required!r:.200}"
    for name, prop in properties.items():
        problem = _problem_of_property(str(name), prop)
        if problem is not None:
            return problem
    return None


def _format_problem(name: str, value: str, fmt: object) -> str | None:
    try:
        if fmt == "date":
            date.fromisoformat(value)
        elif fmt == "date-time":
            datetime.fromisoformat(value)
    except ValueError:
        return f"{name!r} must be a {fmt}, not {value!r}"
    if fmt == "email" and "@" not in value:
        return f"{name!r} must be an email address, not {value!r}"
    if fmt == "uri" and ":" not in value:
        return f"{name!r} must be a URI, not {value!r}"
    return None


def _string_problem(name: str, value: object, prop: Mapping[str, Any]) -> str | None:
    if not isinstance(value, str):
        return f"{name!r} must be a string, not {value!r:.100}"
    allowed = prop.get("enum") or [o["const"] for o in prop.get("oneOf") or []]
    if allowed and value not in allowed:
        return f"{name!r} must be one of {allowed}, not {value!r}"
    low, high = prop.get("minLength"), prop.get("maxLength")
    if (low is not None and len(value) < low) or (high is not None and len(value) > high):
        return f"{name!r} must have {low or 0} to {high or 'any'} characters"
    return _format_problem(name, value, prop.get("format"))


def _number_problem(name: str, value: object, prop: Mapping[str, Any]) -> str | None:
    integer = prop.get("type") == "integer"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        return f"{name!r} must be {'an integer' if integer else 'a number'}, not {value!r:.100}"
    if not math.isfinite(value):
        return f"{name!r} must be a finite number"
    low, high = prop.get("minimum"), prop.get("maximum")
    if (low is not None and value < low) or (high is not None and value > high):
        return f"{name!r} must be between {low} and {high}, not {value}"
    return None


def _array_problem(name: str, value: object, prop: Mapping[str, Any]) -> str | None:
    items = prop["items"]
    allowed = items.get("enum") or [o["const"] for o in items.get("anyOf") or []]
    if not isinstance(value, list) or not all(isinstance(v, str) and v in allowed for v in value):
        return f"{name!r} must be a list of values among {allowed}, not {value!r:.100}"
    low, high = prop.get("minItems"), prop.get("maxItems")
    if (low is not None and len(value) < low) or (high is not None and len(value) > high):
        return f"{name!r} must hold {low or 0} to {high or 'any'} values"
    return None


def content_problem(content: object, schema: Mapping[str, Any]) -> str | None:
    """Why ``content`` does not answer ``schema`` (an allowed form, checked), or ``None``."""
    if not isinstance(content, Mapping) or not all(isinstance(k, str) for k in content):
        return f"an answer is a mapping of property names to values, not {content!r:.100}"
    properties: Mapping[str, Any] = schema.get("properties") or {}
    unknown = sorted(set(content) - set(properties))
    if unknown:
        return f"{unknown} are not asked for (the properties are {sorted(properties)})"
    missing = [r for r in schema.get("required", []) if r not in content]
    if missing:
        return f"{missing} are required"
    checks = {"string": _string_problem, "array": _array_problem, "boolean": None}
    for name, value in content.items():
        prop = properties[name]
        kind = prop.get("type")
        if kind == "boolean":
            if not isinstance(value, bool):
                return f"{name!r} must be true or false, not {value!r:.100}"
            continue
        check = checks.get(kind, _number_problem)
        assert check is not None
        problem = check(name, value, prop)
        if problem is not None:
            return problem
    return None


def parse_answer(value: object, elicitation: Elicitation, tool: str) -> ElicitationAnswer:
    """A decision for ``tool``'s question as an answer; ``HITL_DECISION`` if it is not one.

    ``{"answer": {...}}`` (a property it leaves out takes the schema's ``default``, if
    it has one; then checked against the requested schema), ``{"decline": True}`` or
    ``{"cancel": True}``.
    """
    if not isinstance(value, Mapping) or len(value) != 1:
        raise HitlDecisionError(
            f"tool {tool!r} asks a question: answer it with {_ANSWER_FORMS}, not {value!r:.200}"
        )
    ((kind, payload),) = value.items()
    if kind in ("decline", "cancel"):
        if payload is not True:
            raise HitlDecisionError(f'{{"{kind}": True}} declines, not {value!r:.200}')
        action: ElicitAction = "decline" if kind == "decline" else "cancel"
        return ElicitationAnswer(action, None, elicitation)
    if kind != "answer":
        raise HitlDecisionError(
            f"tool {tool!r} asks a question: answer it with {_ANSWER_FORMS}, not {value!r:.200}"
        )
    if isinstance(payload, Mapping):
        payload = {**_defaults(elicitation.schema), **payload}
    problem = content_problem(payload, elicitation.schema)
    if problem is not None:
        raise HitlDecisionError(f"the answer to {elicitation.message!r} is invalid: {problem}")
    return ElicitationAnswer("accept", dict(payload), elicitation)


def _defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema's default of each property that has one.

    SEP-1034: an answer that leaves such a property out takes its default.
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, Mapping) and "default" in prop
    }
