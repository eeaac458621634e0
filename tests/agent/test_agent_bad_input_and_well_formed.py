"""The agent loop: bad input is a clear AgentError, histories stay well formed."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from async_helper import arun
from framework_agents import (
    Agent,
    ContextOverflowError,
    FunctionModel,
    HitlDecisionError,
    HitlInterrupt,
    InMemoryMemory,
    InvalidArgumentError,
    MaxTurnsError,
    Message,
    ModelError,
    OutputInvalidError,
    ScriptedModel,
    ToolCall,
    hitl_key,
    is_well_formed,
    tool,
)
from framework_agents.history import well_formed_problems
from property_budget import examples


@tool(requires_approval=True)
def danger(x: int) -> str:
    """A tool that needs approval."""
    return f"ran {x}"


def _approval_agent() -> Agent:
    script: list[Any] = [
        Message("assistant", tool_calls=[ToolCall("c1", "danger", {"x": 1})]),
        "done",
    ]
    return Agent(ScriptedModel(script), tools=[danger])


@pytest.mark.parametrize(
    "decisions",
    [
        pytest.param(["danger"], id="list"),
        pytest.param("danger", id="str"),
        pytest.param({1: "approve"}, id="int-key"),
        pytest.param({None: "approve"}, id="none-key"),
    ],
)
def test_decisions_that_are_not_a_str_keyed_mapping_are_hitl_decision(decisions: Any) -> None:
    agent = _approval_agent()
    with pytest.raises(HitlDecisionError) as info:
        arun(agent.run("go", decisions=decisions))
    assert info.value.code == "HITL_DECISION"
    assert not agent.running and agent.messages == []


def test_bad_decisions_in_a_stream_are_hitl_decision_too() -> None:
    agent = _approval_agent()

    async def consume() -> None:
        async for _ in agent.stream("go", decisions=[1, 2]):  # type: ignore[arg-type]
            pass

    with pytest.raises(HitlDecisionError):
        arun(consume())
    assert not agent.running


def test_resume_checks_the_decisions_container_too(tmp_path: Any) -> None:
    from framework_agents import FileCheckpointer

    agent = _approval_agent()
    with pytest.raises(HitlDecisionError):
        arun(agent.resume("t1", ["danger"], checkpointer=FileCheckpointer(tmp_path)))  # type: ignore[arg-type]


# -- test models: a wrong answer is a clear error -------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(None, id="none"),
        pytest.param(5, id="int"),
        pytest.param(Message("user", "nope"), id="user-message"),
        pytest.param({"role": "assistant"}, id="dict"),
    ],
)
def test_a_function_model_answer_of_the_wrong_shape_is_a_model_error(answer: Any) -> None:
    agent = Agent(FunctionModel(lambda m, t: answer))
    with pytest.raises(ModelError) as info:
        arun(agent.run("q"))
    assert info.value.code == "MODEL_ERROR"
    assert agent.messages == [] and not agent.running


def test_a_scripted_reply_of_an_unknown_kind_is_refused_when_built() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        ScriptedModel(["ok", 5])  # type: ignore[list-item]
    assert "reply 1" in str(info.value)
    with pytest.raises(InvalidArgumentError):
        ScriptedModel("not a list")  # a bare string would be a script of characters
    # What a reply may be: text, a message, a function, an exception to raise.
    ScriptedModel(["ok", Message("assistant", "x"), lambda m, t: "y", ModelError("down")])


@pytest.mark.parametrize("fn", [42, "answer", None], ids=["int", "str", "none"])
def test_a_function_model_of_something_not_callable_is_refused_when_built(fn: object) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        FunctionModel(fn)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
    assert "FunctionModel takes a function" in info.value.message


def test_a_scripted_function_reply_of_the_wrong_shape_is_a_model_error() -> None:
    agent = Agent(ScriptedModel([lambda m, t: None]))  # type: ignore[list-item,return-value]
    with pytest.raises(ModelError):
        arun(agent.run("q"))


# -- middleware and managers that hand back the wrong type ------------------------------


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _echo_turn() -> Message:
    return Message("assistant", tool_calls=[ToolCall("c1", "echo", {"text": "hi"})])


class _Setter:
    """A middleware that assigns ``values`` to the context in one hook."""

    def __init__(self, hook: str, **values: Any) -> None:
        self.hook, self.values = hook, values

    def _set(self, hook: str, ctx: Any) -> None:
        if hook == self.hook:
            for name, value in self.values.items():
                setattr(ctx, name, value)

    def before_model(self, ctx: Any) -> None:
        self._set("before_model", ctx)

    def before_tool(self, ctx: Any) -> None:
        self._set("before_tool", ctx)


@pytest.mark.parametrize(
    ("hook", "values"),
    [
        pytest.param("before_model", {"messages": None}, id="messages-none"),
        pytest.param("before_model", {"messages": ["text"]}, id="messages-of-str"),
        pytest.param("before_model", {"messages": "text"}, id="messages-str"),
        pytest.param("before_model", {"tools": None}, id="tools-none"),
        pytest.param("before_model", {"tools": [{"name": "x"}]}, id="tools-of-dict"),
        pytest.param("before_model", {"system_prompt": 5}, id="system-prompt-int"),
        pytest.param("before_tool", {"call": None}, id="call-none"),
        pytest.param("before_tool", {"call": {"id": "c1"}}, id="call-dict"),
    ],
)
def test_a_hook_that_sets_a_wrong_type_is_invalid_argument(
    hook: str, values: dict[str, Any]
) -> None:
    model = ScriptedModel([_echo_turn(), "done"])
    agent = Agent(model, tools=[echo], middleware=[_Setter(hook, **values)])
    with pytest.raises(InvalidArgumentError) as info:
        arun(agent.run("go"))
    assert hook in str(info.value)
    assert agent.messages == [] and not agent.running


def test_a_hook_may_still_send_a_tuple_of_messages() -> None:
    seen: list[list[Message]] = []

    def answer(messages: list[Message], tools: Any) -> str:
        seen.append(messages)
        return "ok"

    class Tuple:
        def before_model(self, ctx: Any) -> None:
            ctx.messages = tuple(ctx.messages)

    assert arun(Agent(FunctionModel(answer), middleware=[Tuple()]).run("q")).text == "ok"
    assert [m.text for m in seen[0]] == ["q"]


class _WrongManager:
    """A manager whose ``method`` returns ``value``; the others keep the history."""

    def __init__(self, method: str, value: Any) -> None:
        self.method, self.value = method, value

    async def _answer(self, method: str, messages: Any) -> Any:
        return self.value if method == self.method else list(messages)

    async def apply(self, messages: Any) -> Any:
        return await self._answer("apply", messages)

    async def before_model(self, messages: Any) -> Any:
        return await self._answer("before_model", messages)

    async def reduce(self, messages: Any) -> Any:
        return await self._answer("reduce", messages)


@pytest.mark.parametrize("method", ["apply", "before_model", "reduce"])
@pytest.mark.parametrize("value", [None, ["text"], 5], ids=["none", "list-of-str", "int"])
def test_a_manager_result_of_the_wrong_type_is_invalid_argument(method: str, value: Any) -> None:
    replies: list[Any] = ["done"]
    if method == "reduce":
        replies = [ContextOverflowError("too long"), "done"]
    agent = Agent(ScriptedModel(replies), conversation_manager=_WrongManager(method, value))
    with pytest.raises(InvalidArgumentError) as info:
        arun(agent.run("go"))
    assert "conversation manager" in str(info.value)
    assert agent.messages == [] and not agent.running


# -- tool results that cannot be encoded ------------------------------------------------


def _circular() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    "value",
    [pytest.param(b"\xff\x00", id="invalid-utf8-bytes"), pytest.param(_circular(), id="circular")],
)
def test_a_tool_result_that_cannot_be_encoded_is_a_tool_error_the_model_sees(value: Any) -> None:
    @tool
    def weird() -> Any:
        """Return something JSON cannot hold."""
        return value

    seen: list[list[Message]] = []

    def answer(messages: list[Message], tools: Any) -> Message | str:
        seen.append(messages)
        if len(seen) == 1:
            return Message("assistant", tool_calls=[ToolCall("c1", "weird", {})])
        return "recovered"

    result = arun(Agent(FunctionModel(answer), tools=[weird]).run("go"))
    assert result.text == "recovered"
    error = seen[1][-1]
    assert error.role == "tool" and error.tool_call_id == "c1"
    assert error.kind == "tool_error"
    assert "weird" in error.text and "encode" in error.text


# -- constructor arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"tools": 5}, id="tools-int"),
        pytest.param({"tools": "abc"}, id="tools-str"),
        pytest.param({"middleware": 5}, id="middleware-int"),
        pytest.param({"memory": "x"}, id="memory-str"),
        pytest.param({"memory": object()}, id="memory-object"),
        pytest.param({"conversation_manager": "x"}, id="manager-str"),
        pytest.param({"initial_messages": 5}, id="initial-int"),
        pytest.param({"initial_messages": Message("user", "x")}, id="initial-one-message"),
    ],
)
def test_constructor_arguments_of_the_wrong_kind_are_invalid_argument(
    kwargs: dict[str, Any],
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        Agent(ScriptedModel(["ok"]), **kwargs)
    assert next(iter(kwargs)) in str(info.value)


def test_none_for_tools_or_middleware_means_none() -> None:
    agent = Agent(ScriptedModel(["ok"]), tools=None, middleware=None)  # type: ignore[arg-type]
    assert agent.tools == () and agent.middleware == ()
    assert arun(agent.run("q")).text == "ok"


def test_initial_messages_from_a_generator_are_all_kept() -> None:
    seed = (Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(2))
    agent = Agent(ScriptedModel(["ok"]), initial_messages=seed)  # type: ignore[arg-type]
    assert [m.text for m in agent.initial_messages] == ["m0", "m1"]
    assert [m.text for m in arun(agent.run("q")).messages] == ["m0", "m1", "q", "ok"]


# -- property: whatever managers, middleware, tools and the model do, histories stay sendable


class _Chaos:
    """A manager and middleware that hand back random sub-sequences (order kept, or not)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def _mangle(self, messages: Any) -> list[Message]:
        items = list(messages)
        if not items or not self.data.draw(st.booleans(), label="mangle"):
            return items
        keep = self.data.draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
        out = [m for m, k in zip(items, keep, strict=True) if k]
        if out and self.data.draw(st.booleans(), label="duplicate"):
            out.append(out[self.data.draw(st.integers(0, len(out) - 1))])
        if self.data.draw(st.booleans(), label="reverse"):
            out.reverse()
        return out

    async def apply(self, messages: Any) -> list[Message]:
        return self._mangle(messages)

    async def before_model(self, messages: Any) -> list[Message]:
        return self._mangle(messages)

    async def reduce(self, messages: Any) -> list[Message]:
        return self._mangle(messages)[: max(len(messages) - 1, 0)]

    def before_model_hook(self, ctx: Any) -> None:
        ctx.messages = self._mangle(ctx.messages)


class _ChaosMiddleware:
    def __init__(self, chaos: _Chaos) -> None:
        self.chaos = chaos

    def before_model(self, ctx: Any) -> None:
        self.chaos.before_model_hook(ctx)


class _Answer(BaseModel):
    value: int


@tool
def boom(n: int) -> str:
    """Always fails."""
    raise RuntimeError(f"boom {n}")


_CALLS = st.sampled_from(
    [
        ("echo", {"text": "hi"}),
        ("echo", {"wrong": 1}),
        ("boom", {"n": 1}),
        ("danger", {"x": 2}),
        ("missing", {}),
    ]
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_history_sent_or_stored_is_well_formed_under_chaos(data: Any) -> None:
    chaos = _Chaos(data)
    structured = data.draw(st.booleans(), label="structured")
    sent: list[list[Message]] = []
    counter = iter(range(10_000))

    def answer(messages: list[Message], tools: Any) -> Message | str:
        sent.append(list(messages))
        kind = data.draw(st.sampled_from(["calls", "overflow", "bad-output", "final"]))
        if kind == "calls":
            calls = data.draw(st.lists(_CALLS, min_size=1, max_size=3))
            return Message(
                "assistant",
                tool_calls=[ToolCall(f"c{next(counter)}", name, args) for name, args in calls],
            )
        if kind == "overflow":
            raise ContextOverflowError("too long")
        if kind == "bad-output":
            return "not json"
        return '{"value": 1}' if structured else "done"

    def decide(tool_name: str, args: dict[str, Any]) -> Any:
        return data.draw(st.sampled_from(["approve", {"reject": "no"}, {"suspend": True}]))

    memory = InMemoryMemory(max_messages=1000)
    agent = Agent(
        FunctionModel(answer),
        tools=[echo, boom, danger],
        memory=memory,
        conversation_manager=chaos,
        middleware=[_ChaosMiddleware(chaos)],
        response_format=_Answer if structured else None,
        decide=decide,
        max_turns=6,
    )
    for prompt in ("one", "two", None):
        expected: tuple[type[Exception], ...] = (
            HitlInterrupt,
            MaxTurnsError,
            OutputInvalidError,
            ContextOverflowError,
        )
        if prompt is None:  # the chaos may have emptied the history: run(None) is refused
            expected = (*expected, InvalidArgumentError)
        with contextlib.suppress(*expected):
            arun(agent.run(prompt))
        assert is_well_formed(agent.messages)
        assert is_well_formed(arun(memory.load()))
        assert not agent.running
    for messages in sent:
        assert is_well_formed(messages), well_formed_problems(messages)


# -- a decide callback that raises HitlInterrupt itself --------------------------------


def test_a_decide_callback_raising_hitl_interrupt_suspends_like_a_suspend_decision() -> None:
    def raising(tool_name: str, args: dict[str, Any]) -> Any:
        raise HitlInterrupt(tool_name, args, "made-up-id", reason="needs a manager")

    outcomes, reasons = [], []
    for decide in (lambda n, a: {"suspend": True}, raising):
        script = [
            Message("assistant", tool_calls=[ToolCall("e1", "echo", {"text": "x"})]),
            Message("assistant", tool_calls=[ToolCall("c1", "danger", {"x": 1})]),
        ]
        agent = Agent(ScriptedModel(script), tools=[echo, danger], decide=decide)
        with pytest.raises(HitlInterrupt) as info:
            arun(agent.run("go"))
        reasons.append(info.value.reason)
        outcomes.append(
            (
                info.value.call_id,
                info.value.key,
                [(m.role, m.text) for m in agent.messages],
                agent.timeline[-1].label,
            )
        )
    assert outcomes[1] == outcomes[0]
    assert outcomes[0][0] == "c1"
    assert reasons == [None, "needs a manager"]
    # The earlier, finished tool turn of this run is kept; only the interrupted turn is not.
    assert [role for role, _ in outcomes[0][2]] == ["user", "assistant", "tool"]


# -- run() and stream() are the same loop -----------------------------------------------


def _scenario() -> Agent:
    script: list[Any] = [
        Message("assistant", tool_calls=[ToolCall("e1", "echo", {"text": "a"})]),
        Message(
            "assistant",
            tool_calls=[ToolCall("e2", "echo", {"bad": 1}), ToolCall("b1", "boom", {"n": 2})],
        ),
        "not json",
        '{"value": 7}',
    ]
    return Agent(ScriptedModel(script), tools=[echo, boom], response_format=_Answer)


def _shape(messages: list[Message]) -> list[tuple[str, str, str | None, str | None]]:
    return [(m.role, m.text, m.tool_call_id, m.kind) for m in messages]


def test_run_and_stream_give_the_same_result_and_history() -> None:
    ran = _scenario()
    result = arun(ran.run("go"))

    streamed = _scenario()

    async def consume() -> Any:
        finished = None
        async for event in streamed.stream("go"):
            if event.type == "run_finished":
                finished = event.result
        return finished

    other = arun(consume())
    assert other is not None
    assert _shape(other.messages) == _shape(result.messages) == _shape(streamed.messages)
    assert _shape(ran.messages) == _shape(streamed.messages)
    assert (other.text, other.output, other.turns, other.stop_reason) == (
        result.text,
        result.output,
        result.turns,
        result.stop_reason,
    )
    assert other.usage == result.usage
    assert result.output == _Answer(value=7)


def test_an_interrupt_raised_by_middleware_keeps_the_run_up_to_the_interrupted_turn() -> None:
    class Gate:
        def before_tool(self, ctx: Any) -> None:
            if ctx.call.name == "boom":
                raise HitlInterrupt(ctx.call.name, ctx.call.args, ctx.call.id, reason="gated")

    script = [
        Message("assistant", tool_calls=[ToolCall("e1", "echo", {"text": "x"})]),
        Message("assistant", tool_calls=[ToolCall("b1", "boom", {"n": 1})]),
    ]
    agent = Agent(ScriptedModel(script), tools=[echo, boom], middleware=[Gate()])
    with pytest.raises(HitlInterrupt) as info:
        arun(agent.run("go"))
    assert info.value.reason == "gated"
    # Like a suspend: the prompt and the finished tool turn stay; the gated turn does not.
    assert [(m.role, m.text) for m in agent.messages] == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "x"),
    ]
    assert is_well_formed(arun(agent.memory.load()))
    assert agent.timeline[-1].label == "interrupted"


@pytest.mark.parametrize(
    "decision",
    [
        {"edit": "not a dict"},
        {"reject": 5},
        {"approve": 1, "reject": "x"},
        {"approve": 1},
        {"approve": True},
    ],
    ids=["edit-not-a-dict", "reject-int", "two-kinds", "approve-int", "approve-mapping"],
)
@pytest.mark.parametrize("keyed", ["exact", "wildcard"])
def test_malformed_decisions_given_to_a_run_are_hitl_decision(decision: Any, keyed: str) -> None:
    ran: list[int] = []

    @tool(requires_approval=True)
    def guarded(x: int) -> str:
        """Needs approval."""
        ran.append(x)
        return "ran"

    key = hitl_key("guarded", {"x": 1}) if keyed == "exact" else "guarded"
    script: list[Any] = [
        Message("assistant", tool_calls=[ToolCall("c1", "guarded", {"x": 1})]),
        "done",
    ]
    agent = Agent(ScriptedModel(script), tools=[guarded])
    with pytest.raises(HitlDecisionError) as info:
        arun(agent.run("go", decisions={key: decision}))
    assert info.value.code == "HITL_DECISION"
    assert ran == [] and agent.messages == [] and not agent.running
