"""``@tool``: schema from the signature, description from the docstring, validation, calls."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from framework_agents import HitlDecisionError, InvalidArgumentError, ToolCall, ToolSpec
from framework_agents.tools import (
    DECISION_KINDS,
    Tool,
    ToolArgumentsError,
    ToolContext,
    as_tool,
    encode_tool_result,
    tool,
)


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number,
            defaulting to one.

    Returns:
        The sum.
    """
    return a + b


class Point(BaseModel):
    x: float
    y: float


@tool(name="move", description="Move a point.", requires_approval=True)
async def move_point(point: Point, unit: Literal["m", "km"] = "m") -> Point:
    return Point(x=point.x + 1, y=point.y)


def test_bare_decorator_builds_schema_and_description() -> None:
    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.description.startswith("Add two integers.")
    assert "Args:" not in add.description
    assert "Returns:" in add.description  # other sections stay in the description
    params = add.parameters
    assert params["type"] == "object"
    assert params["required"] == ["a"]
    assert params["properties"]["a"]["type"] == "integer"
    assert params["properties"]["a"]["description"] == "The first number."
    assert params["properties"]["b"]["default"] == 1
    assert params["properties"]["b"]["description"] == "The second number, defaulting to one."
    assert params["additionalProperties"] is False
    assert add.requires_approval is False
    assert add.allowed_decisions == DECISION_KINDS


def test_spec_is_a_model_tool_spec() -> None:
    spec = add.spec
    assert isinstance(spec, ToolSpec)
    assert spec.name == "add"
    assert spec.parameters == add.parameters


def test_decorator_with_options_and_nested_models() -> None:
    assert move_point.name == "move"
    assert move_point.description == "Move a point."
    assert move_point.requires_approval is True
    schema = move_point.parameters
    assert schema["properties"]["unit"]["enum"] == ["m", "km"]
    assert "Point" in schema["$defs"]
    assert move_point.is_async


def test_validate_coerces_and_rejects() -> None:
    assert add.validate({"a": "2"}) == {"a": 2, "b": 1}
    with pytest.raises(ToolArgumentsError, match="a"):
        add.validate({"b": 2})
    with pytest.raises(ToolArgumentsError, match=r"(?i)extra"):
        add.validate({"a": 1, "c": 3})
    with pytest.raises(ToolArgumentsError):
        add.validate({"a": "not a number"})


def test_invoke_sync_and_async() -> None:
    assert asyncio.run(add.invoke({"a": 2, "b": 5})) == 7
    moved = asyncio.run(move_point.invoke({"point": {"x": 1, "y": 2}}))
    assert moved == Point(x=2, y=2)


def test_sync_tools_run_in_a_worker_thread() -> None:
    import threading

    main = threading.get_ident()

    @tool
    def where() -> int:
        """Which thread am I on?"""
        return threading.get_ident()

    assert asyncio.run(where.invoke({})) != main


def test_decorated_function_stays_callable() -> None:
    assert add(2, 3) == 5


def test_tool_context_is_injected_and_hidden_from_schema() -> None:
    seen: list[ToolContext] = []

    @tool
    def remember(note: str, ctx: ToolContext) -> str:
        """Remember a note."""
        seen.append(ctx)
        return note

    assert list(remember.parameters["properties"]) == ["note"]
    call = ToolCall("c1", "remember", {"note": "x"})
    ctx = ToolContext(agent=None, call=call)  # type: ignore[arg-type]
    assert asyncio.run(remember.invoke({"note": "x"}, context=ctx)) == "x"
    assert seen == [ctx]
    with pytest.raises(InvalidArgumentError):
        asyncio.run(remember.invoke({"note": "x"}))


def test_untyped_parameters_accept_anything() -> None:
    @tool
    def echo(value):  # type: ignore[no-untyped-def]
        """Echo."""
        return value

    assert asyncio.run(echo.invoke({"value": [1, "a"]})) == [1, "a"]


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda *args: None, id="var-positional"),
        pytest.param(lambda **kw: None, id="var-keyword"),
    ],
)
def test_unsupported_signatures_are_clear_errors(fn: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        Tool(fn, name="bad")


def test_positional_only_is_refused() -> None:
    def f(a: int, /) -> int:
        return a

    with pytest.raises(InvalidArgumentError, match="positional-only"):
        tool(f)


@pytest.mark.parametrize(
    "name",
    ["", "has space", "has.dot", "ns.tool", "x" * 65, "café", "a/b", "a:b", "tab\t", "x\n"],
)
def test_invalid_names(name: str) -> None:
    # The providers' rule, ^[a-zA-Z0-9_-]{1,64}$: a "." is refused by OpenAI and Anthropic.
    with pytest.raises(
        InvalidArgumentError, match=r"invalid tool name .*\^\[A-Za-z0-9_-\]\{1,64\}\$"
    ):
        tool(name=name)(lambda: None)


@pytest.mark.parametrize("name", ["9starts", "0", "-dash", "_", "a-b_C9", "x" * 64])
def test_names_the_providers_accept_are_accepted(name: str) -> None:
    made = tool(name=name)(lambda: None)
    assert made.name == made.spec.name == name


def test_a_function_name_that_does_not_fit_is_invalid_argument() -> None:
    def long_name_function_that_goes_on_and_on_well_past_the_sixty_four_limit() -> None:
        """Too long a name for a provider."""

    with pytest.raises(InvalidArgumentError, match="function name") as info:
        tool(long_name_function_that_goes_on_and_on_well_past_the_sixty_four_limit)
    assert info.value.code == "INVALID_ARGUMENT"
    assert "name=" in str(info.value)  # it says how to fix it

    def café() -> None:
        """A non-ASCII identifier."""

    with pytest.raises(InvalidArgumentError, match="function name"):
        tool(café)
    assert tool(name="cafe")(café).name == "cafe"
    with pytest.raises(InvalidArgumentError, match="function name"):
        Tool(lambda: None)  # "<lambda>"


def test_a_non_string_name_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="tool name"):
        Tool(lambda: None, name=5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "allowed", [(), ("approve", "maybe"), "approve"], ids=["empty", "unknown", "string"]
)
def test_invalid_allowed_decisions(allowed: Any) -> None:
    with pytest.raises(HitlDecisionError) as info:
        tool(name="t", requires_approval=True, allowed_decisions=allowed)(lambda: None)
    assert info.value.code == "HITL_DECISION"


def test_not_callable() -> None:
    with pytest.raises(InvalidArgumentError):
        Tool(42)  # type: ignore[arg-type]


def test_as_tool_wraps_plain_functions() -> None:
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    wrapped = as_tool(double)
    assert isinstance(wrapped, Tool) and wrapped.name == "double"
    assert as_tool(add) is add


def test_async_callable_object() -> None:
    class Caller:
        async def __call__(self, q: str) -> str:
            return q.upper()

    t = Tool(Caller(), name="caller")
    assert t.is_async
    assert asyncio.run(t.invoke({"q": "hi"})) == "HI"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (3, "3"),
        ({"a": [1, None]}, '{"a":[1,null]}'),
        (Point(x=1, y=2), '{"x":1.0,"y":2.0}'),
        (None, "null"),
    ],
    ids=["str", "int", "dict", "model", "none"],
)
def test_results_are_encoded(value: Any, text: str) -> None:
    assert encode_tool_result(value) == text
