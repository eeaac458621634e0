"""SummarizingConversationManager: ratio, preserve_recent, pins, sources, rolling, apply."""

from __future__ import annotations

import asyncio
import math

import pytest

from framework_agents import (
    AgentError,
    ConversationManager,
    FunctionModel,
    Message,
    ScriptedModel,
    SummarizingConversationManager,
    ToolCall,
    is_well_formed,
)
from framework_agents.conversation.summarizing import (
    DEFAULT_SUMMARY_PREFIX,
    SUMMARY_SYSTEM_PROMPT,
)


def user(text: str) -> Message:
    return Message("user", text, id=text)


def answer(text: str) -> Message:
    return Message("assistant", text, id=text)


def calls(name: str, *ids: str, text: str = "") -> Message:
    return Message("assistant", text, tool_calls=[ToolCall(i, "f", {"i": i}) for i in ids], id=name)


def result(call_id: str) -> Message:
    return Message("tool", f"result {call_id}", tool_call_id=call_id, name="f", id=f"r-{call_id}")


def chat(n: int, start: int = 0) -> list[Message]:
    return [user(f"u{i}") if i % 2 == 0 else answer(f"a{i}") for i in range(start, start + n)]


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def reduce(manager: SummarizingConversationManager, history: list[Message]) -> list[Message]:
    return asyncio.run(manager.reduce(history))


def test_defaults() -> None:
    manager = SummarizingConversationManager()
    assert manager.summary_ratio == 0.3
    assert manager.preserve_recent == 10
    assert manager.pin_first == 0
    assert manager.summarizer is None and manager.model is None
    assert manager.summary_prefix == DEFAULT_SUMMARY_PREFIX
    assert manager.max_messages is None
    assert manager.last_summary is None
    assert isinstance(manager, ConversationManager)


@pytest.mark.parametrize(
    ("given", "effective"),
    [(0.0, 0.1), (0.05, 0.1), (0.5, 0.5), (0.9, 0.8), (3, 0.8), (-1, 0.1)],
)
def test_ratio_is_clamped(given: float, effective: float) -> None:
    assert SummarizingConversationManager(summary_ratio=given).summary_ratio == effective


def test_reduce_condenses_the_oldest_ratio_into_one_assistant_summary() -> None:
    history = chat(20)
    manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent=5)
    out = reduce(manager, history)
    summary = out[0]
    assert summary.role == "assistant"
    assert summary.kind == "summary"
    assert summary.text.startswith(DEFAULT_SUMMARY_PREFIX)
    assert manager.last_summary == summary.text
    assert out[1:] == history[6:]  # 30 % of 20 condensed, the rest untouched and in order
    assert "u0" in summary.text and "a5" in summary.text  # the extractive stub keeps content
    assert "u6" not in summary.text


def test_ratio_clamp_shows_in_what_is_condensed() -> None:
    history = chat(20)
    low = SummarizingConversationManager(summary_ratio=0.0, preserve_recent=0)
    assert reduce(low, history)[1:] == history[2:]  # 0.1 of 20
    high = SummarizingConversationManager(summary_ratio=1.0, preserve_recent=0)
    assert reduce(high, history)[1:] == history[16:]  # 0.8 of 20


def test_preserve_recent_is_never_touched() -> None:
    history = chat(20)
    manager = SummarizingConversationManager(summary_ratio=0.8, preserve_recent=10)
    out = reduce(manager, history)
    assert out[1:] == history[10:]


def test_nothing_to_condense_returns_the_history_unchanged() -> None:
    history = chat(10)
    manager = SummarizingConversationManager(preserve_recent=10)
    out = reduce(manager, history)
    assert out == history and out is not history
    assert manager.last_summary is None


def test_cut_moves_forward_to_a_group_boundary() -> None:
    history = [user("u0"), answer("a1"), calls("c", "x", "y"), result("x"), result("y")]
    history += chat(5, start=5)
    # 10 messages, ratio 0.3 -> 3, which falls inside the tool group (2..5): take it whole.
    manager = SummarizingConversationManager(summary_ratio=0.3, preserve_recent=2)
    out = reduce(manager, history)
    assert ids(out[1:]) == ids(history[5:])
    assert is_well_formed(out)
    assert "called f" in (manager.last_summary or "")


def test_cut_moves_back_when_a_group_reaches_into_the_preserved_messages() -> None:
    history = [*chat(4), calls("c", "x", "y"), result("x"), result("y"), answer("end")]
    # ratio 0.8 -> 6, limit 8 - 3 = 5 is inside the group (4..7): condense only 4; and the
    # newest user turn (u2) is never condensed: only 2.
    manager = SummarizingConversationManager(summary_ratio=0.8, preserve_recent=3)
    out = reduce(manager, history)
    assert ids(out[1:]) == ids(history[2:])
    assert is_well_formed(out)


def test_summary_before_an_assistant_turn_is_well_formed() -> None:
    history = [user("u0"), answer("a1"), user("u2"), calls("c", "x"), result("x"), answer("a5")]
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=3)
    out = reduce(manager, history)
    # u2 is the newest user turn: it is never condensed.
    assert [m.role for m in out] == ["assistant", "user", "assistant", "tool", "assistant"]
    assert is_well_formed(out)


def test_pins_stay_in_front() -> None:
    history = [Message("system", "rules", id="sys"), *chat(20)]
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=2, pin_first=1)
    out = reduce(manager, history)
    assert out[0].id == "sys"
    assert out[1].kind == "summary"
    assert out[2:] == history[11:]


def test_pin_inside_a_tool_group_keeps_the_whole_group() -> None:
    history = [user("u0"), calls("c", "x", "y"), result("x"), result("y"), *chat(12, start=4)]
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=2, pin_first=2)
    out = reduce(manager, history)
    assert ids(out[:4]) == ["u0", "c", "r-x", "r-y"]
    assert out[4].kind == "summary"
    assert out[5:] == history[10:]


def test_summarizer_sync_gets_the_head_and_wins_over_model() -> None:
    seen: list[list[Message]] = []

    def summarizer(messages: list[Message]) -> str:
        seen.append(messages)
        return f"{len(messages)} messages"

    model = ScriptedModel([])  # would raise if it were called
    manager = SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent=0, summarizer=summarizer, model=model
    )
    history = chat(8)
    out = reduce(manager, history)
    assert seen == [history[:4]]
    assert out[0].text == DEFAULT_SUMMARY_PREFIX + "4 messages"
    assert model.calls == []


def test_summarizer_async() -> None:
    async def summarizer(messages: list[Message]) -> str:
        await asyncio.sleep(0)
        return "async summary"

    manager = SummarizingConversationManager(preserve_recent=0, summarizer=summarizer)
    reduce(manager, chat(10))
    assert manager.last_summary == DEFAULT_SUMMARY_PREFIX + "async summary"


def test_model_summarises_through_the_model_protocol() -> None:
    model = ScriptedModel(["The user counted to five."])
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=0, model=model)
    history = [*chat(2), calls("c", "x", text="Checking."), result("x"), *chat(4, start=4)]
    out = reduce(manager, history)
    assert out[0].text == DEFAULT_SUMMARY_PREFIX + "The user counted to five."
    model.assert_complete()
    call = model.calls[0]
    assert call.tools == []
    assert call.system_prompt == SUMMARY_SYSTEM_PROMPT
    (prompt,) = call.messages
    assert prompt.role == "user"
    assert "Summarise" in prompt.text
    for needle in (
        "user: u0",
        "assistant: a1",
        'called f({"i": "x"})',
        "tool f returned: result x",
    ):
        assert needle in prompt.text
    assert "u4" not in prompt.text


def test_model_with_empty_reply_falls_back_to_the_extractive_stub() -> None:
    model = FunctionModel(lambda messages, tools: "   ")
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=0, model=model)
    reduce(manager, chat(4))
    assert manager.last_summary is not None
    assert "u0" in manager.last_summary
    assert len(model.calls) == 1


def test_summaries_roll_up() -> None:
    seen: list[list[Message]] = []

    def summarizer(messages: list[Message]) -> str:
        seen.append(messages)
        return f"S{len(seen)}"

    manager = SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent=2, summarizer=summarizer
    )
    first = reduce(manager, chat(12))
    second = reduce(manager, [*first, *chat(4, start=12)])
    head = seen[1]
    assert head[0].kind == "summary"
    assert head[0].text == "S1"  # the earlier summary, its prefix stripped
    assert head[0].id == first[0].id
    assert second[0].text == DEFAULT_SUMMARY_PREFIX + "S2"
    assert sum(m.kind == "summary" for m in second) == 1
    assert first[0].text == DEFAULT_SUMMARY_PREFIX + "S1"  # the stored summary is untouched


def test_extractive_rolling_keeps_earlier_content() -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=2)
    first = reduce(manager, chat(12))
    second = reduce(manager, [*first, *chat(6, start=12)])
    text = second[0].text
    assert text.startswith(DEFAULT_SUMMARY_PREFIX)
    assert text.count(DEFAULT_SUMMARY_PREFIX.strip()) == 1
    assert "u0" in text and "u6" in text


def test_an_earlier_summary_alone_is_not_resummarised() -> None:
    manager = SummarizingConversationManager(summary_ratio=0.1, preserve_recent=3)
    first = reduce(manager, chat(5))  # 0.1 of 5 rounds up to one message
    assert ids(first[1:]) == ["a1", "u2", "a3", "u4"]
    # The target (1) would take the earlier summary alone: it takes the next message along.
    second = reduce(manager, first)
    assert second[0].kind == "summary" and second[0].id != first[0].id
    assert ids(second[1:]) == ["u2", "a3", "u4"]
    # Now only the summary sits outside the preserved 3: nothing is left to condense.
    previous = manager.last_summary
    third = reduce(manager, second)
    assert third == second
    assert manager.last_summary == previous


def test_custom_prefix() -> None:
    manager = SummarizingConversationManager(preserve_recent=0, summary_prefix="[memo] ")
    out = reduce(manager, chat(10))
    assert out[0].text.startswith("[memo] ")


def test_apply_leaves_the_history_alone_without_max_messages() -> None:
    manager = SummarizingConversationManager(preserve_recent=0)
    history = chat(100)
    out = asyncio.run(manager.apply(history))
    assert out == history and out is not history
    assert manager.last_summary is None
    assert asyncio.run(manager.before_model(history)) == history


def test_apply_reduces_until_within_max_messages() -> None:
    manager = SummarizingConversationManager(preserve_recent=4, max_messages=10)
    history = chat(40)
    out = asyncio.run(manager.apply(history))
    assert len(out) <= 10
    assert out[-4:] == history[-4:]
    assert sum(m.kind == "summary" for m in out) == 1
    assert out[0].kind == "summary"
    assert asyncio.run(manager.apply(chat(10))) == chat(10)  # within the bound: untouched


def test_apply_stops_when_nothing_more_can_be_condensed() -> None:
    manager = SummarizingConversationManager(preserve_recent=8, pin_first=2, max_messages=5)
    history = chat(20)
    out = asyncio.run(manager.apply(history))
    assert out[:2] == history[:2]
    assert out[-8:] == history[-8:]
    assert len(out) == 2 + 1 + 8


def test_input_is_never_mutated() -> None:
    history = [Message("system", "s", id="s"), *chat(15)]
    before = [m.model_copy(deep=True) for m in history]
    manager = SummarizingConversationManager(preserve_recent=2, pin_first=1, max_messages=5)
    asyncio.run(manager.apply(history))
    reduce(manager, history)
    assert history == before


def test_summarizer_errors_propagate() -> None:
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("summariser down")

    manager = SummarizingConversationManager(preserve_recent=0, summarizer=broken)
    with pytest.raises(RuntimeError, match="summariser down"):
        reduce(manager, chat(10))


def test_summarizer_must_return_text() -> None:
    manager = SummarizingConversationManager(preserve_recent=0, summarizer=lambda m: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(AgentError) as info:
        reduce(manager, chat(10))
    assert info.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"summary_ratio": "0.3"},
        {"summary_ratio": math.nan},
        {"summary_ratio": True},
        {"preserve_recent": -1},
        {"pin_first": 1.5},
        {"summarizer": "not callable"},
        {"model": object()},
        {"summary_prefix": None},
        {"max_messages": 0},
    ],
    ids=[
        "ratio-str",
        "ratio-nan",
        "ratio-bool",
        "preserve",
        "pin",
        "summarizer",
        "model",
        "prefix",
        "max",
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(AgentError) as info:
        SummarizingConversationManager(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
