"""Messages: constructors, ``text``, and the exact JSON round trip."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from framework_agents import InvalidArgumentError, Message, ReasoningBlock, TextBlock, ToolCall
from framework_agents.messages import MESSAGES_FORMAT_VERSION, MessageList


def test_positional_constructors() -> None:
    msg = Message("user", "hi")
    assert (msg.role, msg.content) == ("user", "hi")
    call = ToolCall("c1", "f", {})
    assert (call.id, call.name, call.args) == ("c1", "f", {})
    assert TextBlock("x").text == "x"
    assert TextBlock("x").type == "text"
    block = ReasoningBlock("t", "sig")
    assert (block.type, block.text, block.signature) == ("reasoning", "t", "sig")
    assert ReasoningBlock("t").signature is None


def test_keyword_constructors_match_positional_ones() -> None:
    assert Message(role="user", content="hi", id="m") == Message("user", "hi", id="m")
    assert ToolCall(id="c1", name="f", args={"a": 1}) == ToolCall("c1", "f", {"a": 1})
    assert TextBlock(text="x") == TextBlock("x")
    assert ReasoningBlock(text="t", signature="s") == ReasoningBlock("t", "s")


def test_defaults() -> None:
    msg = Message("assistant")
    assert msg.content == ""
    assert msg.tool_calls == []
    assert msg.tool_call_id is None
    assert msg.name is None
    assert msg.metadata == {}
    assert isinstance(msg.id, str) and msg.id
    assert ToolCall("c", "f").args == {}


def test_ids_are_fresh_and_defaults_not_shared() -> None:
    a, b = Message("user"), Message("user")
    assert a.id != b.id
    a.metadata["x"] = 1
    assert b.metadata == {}


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ([TextBlock("a"), TextBlock("b")], "ab"),
        ([ReasoningBlock("thinking"), TextBlock("answer")], "answer"),
        ([ReasoningBlock("only thinking")], ""),
        ([], ""),
    ],
    ids=["string", "blocks", "reasoning-skipped", "reasoning-only", "empty-list"],
)
def test_text(content: str | list[TextBlock | ReasoningBlock], text: str) -> None:
    assert Message("assistant", content).text == text


def test_reasoning_and_kind() -> None:
    msg = Message(
        "assistant", [ReasoningBlock("r", "s"), TextBlock("t")], metadata={"kind": "summary"}
    )
    assert msg.reasoning == [ReasoningBlock("r", "s")]
    assert msg.kind == "summary"
    assert Message("user", "x").kind is None
    assert Message("user", "x", metadata={"kind": 3}).kind is None


def _rich() -> list[Message]:
    return [
        Message("system", "be brief", id="s1"),
        Message("user", "héllo ☃", id="u1", metadata={"source": "cli", "n": [1, 2.5, None]}),
        Message(
            "assistant",
            [ReasoningBlock("let me think", "opaque=="), TextBlock("calling")],
            tool_calls=[ToolCall("c1", "lookup", {"q": "x", "nested": {"k": [1, True]}})],
            id="a1",
        ),
        Message("tool", "42", tool_call_id="c1", name="lookup", id="t1"),
        Message("assistant", "done", id="a2", metadata={"kind": "summary"}),
    ]


def test_json_round_trip_is_exact() -> None:
    for msg in _rich():
        back = Message.from_json(msg.to_json())
        assert back == msg
        assert back.id == msg.id
        assert back.to_json() == msg.to_json()
        assert type(back.content) is type(msg.content)


def test_json_shape() -> None:
    data = json.loads(_rich()[2].to_json())
    assert data["role"] == "assistant"
    assert data["content"] == [
        {"type": "reasoning", "text": "let me think", "signature": "opaque=="},
        {"type": "text", "text": "calling"},
    ]
    assert data["tool_calls"] == [
        {"id": "c1", "name": "lookup", "args": {"q": "x", "nested": {"k": [1, True]}}}
    ]
    assert data["id"] == "a1"


def test_message_list_round_trip() -> None:
    messages = _rich()
    raw = MessageList.dump_json(messages)
    assert MessageList.validate_json(raw) == messages
    assert isinstance(MESSAGES_FORMAT_VERSION, int) and MESSAGES_FORMAT_VERSION >= 1


def test_python_dump_round_trip() -> None:
    for msg in _rich():
        assert Message.model_validate(msg.model_dump()) == msg


@pytest.mark.parametrize(
    "raw",
    [
        '{"role": "robot", "content": "x"}',
        '{"role": "user", "content": 5}',
        '{"role": "user", "content": [{"type": "image", "url": "x"}]}',
        '{"role": "user", "surprise": 1}',
        '{"role": "assistant", "tool_calls": [{"id": "c"}]}',
        '{"content": "no role"}',
        "not json",
    ],
    ids=["bad-role", "bad-content", "unknown-block", "unknown-key", "bad-call", "no-role", "junk"],
)
def test_wrong_shapes_are_rejected(raw: str) -> None:
    with pytest.raises(ValidationError):
        Message.from_json(raw)


def test_a_message_is_immutable_with_a_coded_error() -> None:
    msg = Message("user", "hi")
    with pytest.raises(InvalidArgumentError) as caught:
        msg.content = "changed"  # type: ignore[misc]
    assert caught.value.code == "INVALID_ARGUMENT" and msg.content == "hi"
    changed = msg.model_copy(update={"content": "changed"})
    assert changed.content == "changed" and changed.id == msg.id and msg.content == "hi"


def test_a_long_conversation_is_summarised_in_a_snapshot_or_checkpoint_repr() -> None:
    # Every message in a repr made asyncio.run(manager.load_latest()) of a long session
    # spend four times the load formatting the finished task (CPython 3.11).
    from framework_agents import Snapshot, SnapshotData, ThreadCheckpoint
    from framework_agents.messages import REPR_MESSAGES

    many = [Message("user", f"m{i}", id=f"m{i}") for i in range(10_000)]
    for model in (
        Snapshot(SnapshotData(many, {"k": 1})),
        ThreadCheckpoint("t", None, many, {}),
        ThreadCheckpoint("t", None, many, {}).model_copy(update={"results": many}),
    ):
        text = repr(model)
        assert len(text) < 2_000 and "<9998 more messages>" in text
        assert "id='m0'" in text and "id='m9999'" in text and len(str(model)) < 2_000
    few = many[:REPR_MESSAGES]
    assert repr(few) in repr(ThreadCheckpoint("t", None, few, {}))  # short lists: as before
