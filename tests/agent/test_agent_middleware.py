"""Middleware hooks: one typed context each, in order, able to replace what flows through."""

from __future__ import annotations

import asyncio

import pytest

from async_helper import arun
from framework_agents import (
    Agent,
    Message,
    Middleware,
    ModelCallContext,
    ScriptedModel,
    ToolCall,
    ToolCallContext,
    tool,
)


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def tool_turn(text: str = "hi") -> Message:
    return Message("assistant", "", tool_calls=[ToolCall("c1", "echo", {"text": text})])


class Recorder:
    """Records every hook (sync hooks)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def before_model(self, ctx: ModelCallContext) -> None:
        assert isinstance(ctx, ModelCallContext) and ctx.response is None
        self.log.append(f"{self.name}.before_model:{ctx.turn}")

    def after_model(self, ctx: ModelCallContext) -> None:
        assert ctx.response is not None
        self.log.append(f"{self.name}.after_model:{ctx.turn}")

    def before_tool(self, ctx: ToolCallContext) -> None:
        assert isinstance(ctx, ToolCallContext) and ctx.result is None
        self.log.append(f"{self.name}.before_tool:{ctx.call.name}")

    def after_tool(self, ctx: ToolCallContext) -> None:
        assert ctx.result is not None
        self.log.append(f"{self.name}.after_tool:{ctx.result.text}")


class AsyncPartial:
    """Only some hooks, async."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def after_model(self, ctx: ModelCallContext) -> None:
        await asyncio.sleep(0)
        self.log.append("async.after_model")


def test_hooks_run_in_order_with_typed_contexts() -> None:
    log: list[str] = []
    agent = Agent(
        ScriptedModel([tool_turn(), "done"]),
        tools=[echo],
        middleware=[Recorder("a", log), AsyncPartial(log), Recorder("b", log)],
    )
    arun(agent.run("go"))
    assert log == [
        "a.before_model:1",
        "b.before_model:1",
        "a.after_model:1",
        "async.after_model",
        "b.after_model:1",
        "a.before_tool:echo",
        "b.before_tool:echo",
        "a.after_tool:hi",
        "b.after_tool:hi",
        "a.before_model:2",
        "b.before_model:2",
        "a.after_model:2",
        "async.after_model",
        "b.after_model:2",
    ]


def test_before_model_changes_what_is_sent_not_what_is_stored() -> None:
    class Redact(Middleware):
        def before_model(self, ctx: ModelCallContext) -> None:
            ctx.messages = [
                m.model_copy(update={"content": m.text.replace("secret", "***")})
                for m in ctx.messages
            ]
            ctx.system_prompt = "redacted prompt"

    model = ScriptedModel(["ok"])
    agent = Agent(model, middleware=[Redact()], system_prompt="orig")
    result = arun(agent.run("my secret"))
    assert model.calls[0].messages[0].text == "my ***"
    assert model.calls[0].system_prompt == "redacted prompt"
    assert result.messages[0].text == "my secret"


def test_after_model_may_replace_the_response() -> None:
    class Rewrite:
        def after_model(self, ctx: ModelCallContext) -> None:
            assert ctx.response is not None
            ctx.response = Message("assistant", ctx.response.text.upper())

    result = arun(Agent(ScriptedModel(["quiet"]), middleware=[Rewrite()]).run("q"))
    assert result.text == "QUIET"
    assert result.messages[-1].text == "QUIET"


def test_before_tool_may_change_the_call_or_answer_it() -> None:
    class Change:
        def before_tool(self, ctx: ToolCallContext) -> None:
            if ctx.call.args.get("text") == "change me":
                ctx.call = ctx.call.model_copy(update={"args": {"text": "changed"}})
            if ctx.call.args.get("text") == "cached":
                ctx.result = Message("tool", "from cache")

    ran: list[str] = []

    @tool
    def record(text: str) -> str:
        """Record."""
        ran.append(text)
        return text

    model = ScriptedModel(
        [
            Message(
                "assistant",
                "",
                tool_calls=[
                    ToolCall("c1", "record", {"text": "change me"}),
                    ToolCall("c2", "record", {"text": "cached"}),
                ],
            ),
            "ok",
        ]
    )
    messages = arun(Agent(model, tools=[record], middleware=[Change()]).run("go")).messages
    assert ran == ["changed"]
    assert [(m.tool_call_id, m.text) for m in messages if m.role == "tool"] == [
        ("c1", "changed"),
        ("c2", "from cache"),
    ]
    # The assistant turn keeps what the model said.
    assert messages[1].tool_calls[0].args == {"text": "change me"}


def test_after_tool_may_replace_the_result() -> None:
    class Wrap:
        async def after_tool(self, ctx: ToolCallContext) -> None:
            assert ctx.result is not None
            ctx.result = ctx.result.model_copy(update={"content": f"[{ctx.result.text}]"})

    model = ScriptedModel([tool_turn("x"), "ok"])
    messages = arun(Agent(model, tools=[echo], middleware=[Wrap()]).run("go")).messages
    assert messages[2].text == "[x]" and messages[2].tool_call_id == "c1"


def test_a_raising_hook_fails_the_run() -> None:
    class Broken:
        def before_tool(self, ctx: ToolCallContext) -> None:
            raise RuntimeError("middleware bug")

    agent = Agent(ScriptedModel([tool_turn()]), tools=[echo], middleware=[Broken()])
    with pytest.raises(RuntimeError, match="middleware bug"):
        arun(agent.run("go"))
    assert agent.messages == [] and not agent.running


def test_the_base_class_does_nothing() -> None:
    result = arun(
        Agent(ScriptedModel([tool_turn(), "ok"]), tools=[echo], middleware=[Middleware()]).run("q")
    )
    assert result.text == "ok"


def test_a_hook_that_sets_a_wrong_type_is_a_clear_error() -> None:
    from framework_agents import InvalidArgumentError

    class Wrong:
        def after_model(self, ctx: ModelCallContext) -> None:
            ctx.response = "not a message"  # type: ignore[assignment]

    with pytest.raises(InvalidArgumentError, match="after_model"):
        arun(Agent(ScriptedModel(["x"]), middleware=[Wrong()]).run("q"))
