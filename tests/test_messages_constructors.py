"""The constructors take their arguments positionally in API.md's order."""

from __future__ import annotations

from datetime import UTC, datetime

from framework_agents import Message, Snapshot, SnapshotData, ToolCall
from framework_agents.messages import NEW_ID
from framework_agents.sessions.snapshot import _NEW_SNAPSHOT_ID, _NOW


def test_message_takes_every_argument_positionally_in_api_order() -> None:
    call = ToolCall("c1", "add", {"a": 1})
    by_position = Message("assistant", "hi", [call], None, None, "m1", {"kind": "x"})
    by_keyword = Message(
        role="assistant",
        content="hi",
        tool_calls=[call],
        tool_call_id=None,
        name=None,
        id="m1",
        metadata={"kind": "x"},
    )
    assert by_position == by_keyword
    result = Message("tool", "3", [], "c1", "add")
    assert (result.tool_call_id, result.name) == ("c1", "add")


def test_message_defaults_are_the_api_defaults() -> None:
    msg = Message("user")
    assert msg.content == ""
    assert msg.tool_calls == []
    assert msg.tool_call_id is None and msg.name is None
    assert msg.metadata == {}
    assert isinstance(msg.id, str) and msg.id


def test_snapshot_data_takes_its_fields_positionally() -> None:
    msgs = [Message("user", "q", id="u")]
    assert SnapshotData(msgs, {"k": 1}, "p") == SnapshotData(
        messages=msgs, state={"k": 1}, system_prompt="p"
    )
    assert SnapshotData(None, {"k": 1}).fields == {"state"}


def test_snapshot_takes_app_data_snapshot_id_and_created_at_positionally() -> None:
    data = SnapshotData(state={})
    at = datetime(2024, 1, 1, tzinfo=UTC)
    sid = "01900000-0000-7000-8000-000000000000"
    snap = Snapshot(data, {"tab": 2}, sid, at)
    assert snap == Snapshot(data, app_data={"tab": 2}, snapshot_id=sid, created_at=at)
    assert Snapshot(data, {"tab": 2}).app_data == {"tab": 2}


def _params(obj: object) -> list[tuple[str, object]]:
    import inspect

    return [
        (p.name, p.default)
        for p in inspect.signature(obj).parameters.values()  # type: ignore[arg-type]
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]


def test_signatures_match_api_md() -> None:
    import inspect

    empty = inspect.Parameter.empty
    assert _params(Message) == [
        ("role", empty),
        ("content", ""),
        ("tool_calls", []),
        ("tool_call_id", None),
        ("name", None),
        ("id", NEW_ID),  # API.md: id=<new>
        ("metadata", {}),
    ]
    assert _params(ToolCall) == [("id", empty), ("name", empty), ("args", {})]
    assert _params(SnapshotData) == [("messages", None), ("state", None), ("system_prompt", None)]
    assert _params(Snapshot) == [
        ("data", empty),
        ("app_data", None),
        ("snapshot_id", _NEW_SNAPSHOT_ID),  # API.md: snapshot_id=...
        ("created_at", _NOW),  # API.md: created_at=...
    ]


def test_blocks_take_their_fields_positionally_or_by_keyword() -> None:
    from framework_agents import ReasoningBlock, TextBlock

    assert TextBlock("a") == TextBlock(text="a")
    assert ReasoningBlock("t", "sig") == ReasoningBlock(text="t", signature="sig")
    assert ReasoningBlock("t").signature is None


def test_unknown_fields_are_still_validation_errors() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Message("user", "x", mood="happy")
    with pytest.raises(ValidationError):
        SnapshotData(memory=[])
    with pytest.raises(ValidationError):
        Snapshot(SnapshotData(), surprise=1)


def test_null_for_a_non_nullable_field_is_rejected_not_defaulted() -> None:
    import pytest
    from pydantic import ValidationError

    for raw in (
        '{"role": "user", "content": null}',
        '{"role": "user", "metadata": null}',
        '{"role": "assistant", "tool_calls": null}',
        '{"role": "assistant", "tool_calls": [{"id": "c", "name": "t", "args": null}]}',
        '{"role": "user", "content": [{"type": "reasoning", "text": null}]}',
        '{"role": "user", "id": null}',
    ):
        with pytest.raises(ValidationError):
            Message.from_json(raw)


def test_the_typed_constructors_spell_the_fields_constructors() -> None:
    # Each class's constructor is made from its fields at runtime; type checkers read the
    # ``if TYPE_CHECKING`` stub beside the fields, which must name the same parameters in
    # the same order, a required field without a default.
    import ast
    import inspect

    from framework_agents import ReasoningBlock, TextBlock, messages

    tree = ast.parse(inspect.getsource(messages))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    for cls in (Message, ToolCall, TextBlock, ReasoningBlock):
        (stub,) = [
            fn
            for branch in classes[cls.__name__].body
            if isinstance(branch, ast.If) and ast.unparse(branch.test) == "TYPE_CHECKING"
            for fn in branch.body
            if isinstance(fn, ast.FunctionDef) and fn.name == "__init__"
        ]
        params = stub.args.args[1:]  # after self
        defaults = [None] * (len(params) - len(stub.args.defaults)) + stub.args.defaults
        spelled = [(p.arg, d is not None) for p, d in zip(params, defaults, strict=True)]
        made = [(n, not cls.model_fields[n].is_required()) for n in cls.__positional__]
        assert spelled == made, cls.__name__
        assert stub.args.kwarg is not None and stub.args.kwarg.arg == "extra"


def test_positional_arguments_are_checked_as_python_checks_them() -> None:
    import pytest

    with pytest.raises(TypeError, match="multiple values for argument 'role'"):
        Message("user", role="assistant")  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional arguments"):
        ToolCall("c", "t", {}, "surplus")  # type: ignore[call-arg]
