"""``@tool``: parameter names pydantic's BaseModel reserves still work."""

from __future__ import annotations

import asyncio
import enum
import warnings
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from framework_agents.tools import ToolArgumentsError, tool

# Names that collide with BaseModel attributes, its protected ``model_`` namespace, or its
# private-attribute rule: all are ordinary parameter names in user code.
RESERVED = [
    "model_config",
    "model_dump",
    "model_fields",
    "model_name",
    "schema",
    "json",
    "copy",
    "dict",
    "validate",
    "construct",
    "_private",
]


def _tool_with(name: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(
        f"def t({name}: str, count: int = 1):\n    '''T.'''\n    return ({name}, count)\n",
        namespace,
    )
    return namespace["t"]


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_parameter_names_build_a_schema_and_validate(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "shadows an attribute" noise at decoration time
        made = tool(_tool_with(name))
    schema = made.parameters
    assert list(schema["properties"]) == [name, "count"]
    assert schema["required"] == [name]
    assert schema["additionalProperties"] is False
    assert made.validate({name: "v"}) == {name: "v", "count": 1}
    assert asyncio.run(made.invoke({name: "v", "count": 2})) == ("v", 2)
    with pytest.raises(ToolArgumentsError, match=name):
        made.validate({"count": 2})


def test_titles_and_descriptions_are_those_of_the_parameters() -> None:
    @tool
    def convert(unit_name: str, amount: float = 1.0) -> str:
        """Convert.

        Args:
            unit_name: The unit.
        """
        return unit_name

    props = convert.parameters["properties"]
    assert props["unit_name"]["title"] == "Unit Name"
    assert props["unit_name"]["description"] == "The unit."
    assert props["amount"] == {"default": 1.0, "title": "Amount", "type": "number"}


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


@tool
def paint(
    ids: list[int],
    color: Color = Color.RED,
    label: str | None = None,
    mode: Literal["fill", "stroke"] = "fill",
    origin: Point | None = None,
) -> str:
    """Paint shapes."""
    return f"{ids} {color.value} {label} {mode} {origin}"


def test_common_typed_signatures_make_the_expected_schema() -> None:
    schema = paint.parameters
    props = schema["properties"]
    assert schema["required"] == ["ids"]
    assert props["ids"] == {"items": {"type": "integer"}, "title": "Ids", "type": "array"}
    assert props["color"]["default"] == "red"
    assert schema["$defs"]["Color"]["enum"] == ["red", "blue"]
    assert props["label"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert props["label"]["default"] is None
    assert props["mode"]["enum"] == ["fill", "stroke"]
    assert {"$ref": "#/$defs/Point"} in props["origin"]["anyOf"]
    assert schema["$defs"]["Point"]["required"] == ["x"]


def test_common_typed_signatures_validate_into_python_values() -> None:
    args = paint.validate({"ids": ["1", 2], "color": "blue", "origin": {"x": 3}})
    assert args == {
        "ids": [1, 2],
        "color": Color.BLUE,
        "label": None,
        "mode": "fill",
        "origin": Point(x=3),
    }
    assert asyncio.run(paint.invoke({"ids": [1]})) == "[1] red None fill None"
    for bad in ({"ids": ["x"]}, {"ids": [1], "color": "green"}, {"ids": [1], "mode": "dots"}):
        with pytest.raises(ToolArgumentsError):
            paint.validate(bad)
