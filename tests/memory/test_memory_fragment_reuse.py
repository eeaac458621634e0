"""FileMemory reuses a text-only message's fragment only while it would serialise the same;
text-only messages are encoded without the read-back check, exactly as with it."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework_agents import FileMemory, Message
from framework_agents._persist import encode_message, strict_loads
from framework_agents.errors import InvalidArgumentError
from framework_agents.memory import file as file_module
from property_budget import examples


def _count_encodes(monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    encoded: list[Message] = []
    real = file_module.encode_message  # type: ignore[attr-defined]  # patched below

    def counting(msg: Message) -> Any:
        encoded.append(msg)
        return real(msg)

    monkeypatch.setattr(file_module, "encode_message", counting)
    return encoded


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", "changed"),
        ("content", ""),
        ("role", "assistant"),
        ("name", "someone"),
        ("tool_call_id", "c1"),
        ("metadata", {"k": 1}),
    ],
)
def test_a_text_message_changed_in_place_is_encoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: object
) -> None:
    encoded = _count_encodes(monkeypatch)
    memory = FileMemory(tmp_path)
    history = [Message("user", "a", id="m1"), Message("user", "b", id="m2")]
    asyncio.run(memory.replace(history))
    assert len(encoded) == 2
    object.__setattr__(history[1], field, value)  # forced: messages refuse assignment
    asyncio.run(memory.replace(history))
    assert [m.id for m in encoded[2:]] == ["m2"]  # m1 reused, m2 encoded again
    assert asyncio.run(FileMemory(tmp_path).load()) == history


def test_unchanged_text_messages_are_not_encoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded = _count_encodes(monkeypatch)
    memory = FileMemory(tmp_path)
    history = [Message("user", "a", id="m1"), Message("assistant", "b", id="m2", name="n")]
    asyncio.run(memory.replace(history))
    loaded = asyncio.run(memory.load())  # fresh objects, equal: the agent's next commit
    asyncio.run(memory.replace(loaded))
    assert len(encoded) == 2


def test_an_empty_value_of_the_wrong_type_is_not_taken_for_the_stored_one(
    tmp_path: Path,
) -> None:
    memory = FileMemory(tmp_path)
    msg = Message("user", "a", id="m1")
    asyncio.run(memory.replace([msg]))
    object.__setattr__(msg, "metadata", [])  # forced; would be written as [], not {}
    with pytest.raises(InvalidArgumentError), pytest.warns(UserWarning):  # pydantic's
        asyncio.run(memory.replace([msg]))
    (back,) = asyncio.run(FileMemory(tmp_path).load())
    assert back.metadata == {}


# -- encoding a text-only message without the read-back check ---------------------------------


@settings(max_examples=examples(200), deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    content=st.text(st.characters(exclude_categories=["Cs"])),
    name=st.none() | st.text(max_size=5),
    call_id=st.none() | st.text(max_size=5),
)
def test_a_text_only_message_encodes_as_the_checked_path_does(
    role: str, content: str, name: str | None, call_id: str | None
) -> None:
    msg = Message(role, content, name=name, tool_call_id=call_id)  # type: ignore[arg-type]
    fragment, back = encode_message(msg)
    assert fragment == msg.model_dump_json().encode()
    assert Message.model_validate(strict_loads(fragment)) == back == msg
    assert back is not msg and back.tool_calls is not msg.tool_calls  # independent copy
    assert back.metadata is not msg.metadata


@pytest.mark.parametrize(
    ("field", "value"),
    [("content", "a\ud800b"), ("name", "\udfff"), ("id", "x\ud801")],
)
def test_a_lone_surrogate_in_a_text_only_message_is_refused(field: str, value: str) -> None:
    msg = Message("user", "ok", id="m1")
    object.__setattr__(msg, field, value)  # a surrogate the constructor would also take
    with pytest.raises(InvalidArgumentError, match="cannot be stored as JSON"):
        encode_message(msg)


def test_a_string_subclass_takes_the_checked_path() -> None:
    class Tagged(str):
        pass

    msg = Message("user", "plain", id="m1")
    object.__setattr__(msg, "content", Tagged("tagged"))
    fragment, back = encode_message(msg)
    assert back.content == "tagged" and type(back.content) is str
    assert fragment == b'{"role":"user","content":"tagged","tool_calls":[],' + (
        b'"tool_call_id":null,"name":null,"id":"m1","metadata":{}}'
    )


@pytest.mark.parametrize(
    "update",
    [
        {"role": "developer"},
        {"content": None},
        {"id": None},
        {"name": 5},
        {"tool_call_id": b"c1"},
        {"bogus": "x"},
    ],
    ids=["role", "content-none", "id-none", "name-int", "call-id-bytes", "extra-key"],
)
def test_a_message_built_without_validation_is_refused_not_stored(
    tmp_path: Path, update: dict[str, Any]
) -> None:
    # model_copy(update=...) does not validate: the fast path must not write what a load
    # would then refuse (the whole memory would become unreadable).
    bad = Message("user", "ok", id="m1").model_copy(update=update)
    with pytest.raises(InvalidArgumentError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic's serializer warnings
        encode_message(bad)
    memory = FileMemory(tmp_path)
    asyncio.run(memory.save([Message("user", "kept", id="k")]))
    with pytest.raises(InvalidArgumentError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asyncio.run(memory.save([bad]))
    assert [m.id for m in asyncio.run(FileMemory(tmp_path).load())] == ["k"]
