"""MCPClient against a server written with the official Python SDK (tests/mcp/server.py).

Its tools are called through an agent with a scripted model: results (text, structured
content, images), error results, timeouts, a server that dies mid-call, a result too
large, a tool added at run time, approvals through a checkpointer and resume. Each test
starts the server (a second or two): the quick cases run in ``make test``, the rest are
``slow``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun

pytest.importorskip("mcp", reason="needs the 'mcp' extra (the official MCP SDK)")

import mcp_types

from framework_agents import (
    Agent,
    BackendUnavailableError,
    FileCheckpointer,
    HitlInterrupt,
    InvalidArgumentError,
    Message,
    ScriptedModel,
    ToolCall,
    repair_history,
)
from framework_agents.mcp import MCPClient
from framework_agents.mcp._tools import make_tool

SERVER = str(Path(__file__).with_name("server.py"))


def client(*flags: str) -> MCPClient:
    return MCPClient.stdio(sys.executable, [SERVER, *flags])


def call(name: str, **args: Any) -> Message:
    return Message("assistant", "", tool_calls=[ToolCall(f"c-{name}", name, args)])


def results(messages: list[Message]) -> dict[str, Message]:
    return {m.name or "": m for m in messages if m.role == "tool"}


def test_tool_results_errors_resources_and_prompts_through_an_agent() -> None:
    async def main() -> None:
        async with client() as server:
            tools = await server.tools(
                exclude={"die", "huge", "sleep", "book", "book_twice", "odd_ask", "count"}
            )
            assert [t.name for t in tools] == ["shout", "fail", "grow", "weather"]
            shout = tools[0]
            assert shout.description == "The text in capitals."
            assert shout.parameters["required"] == ["text"]
            model = ScriptedModel(
                [
                    Message(
                        "assistant",
                        "",
                        tool_calls=[
                            ToolCall("1", "shout", {"text": "hi"}),
                            ToolCall("2", "fail", {}),
                            ToolCall("3", "weather", {}),
                            ToolCall("4", "shout", {"wrong": 1}),
                        ],
                    ),
                    "done",
                ]
            )
            result = await Agent(model, tools=tools).run("go")
            tool_messages = [m for m in result.messages if m.role == "tool"]
            shouted, failed, weather, wrong = tool_messages
            assert shouted.content == "HI" and shouted.kind is None
            assert failed.kind == "tool_error" and "the disk is full" in failed.text
            assert weather.text == '{"celsius": 21}\n[image: image/png, 9 bytes]'
            assert weather.metadata["structured_content"] == {"celsius": 21}
            assert weather.metadata["attachments"] == [
                {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="}
            ]
            # The Python server does not validate arguments: the model sees what it did.
            assert wrong.role == "tool"
            model.assert_complete()

            assert [(r.uri, r.mime_type) for r in await server.resources()] == [
                ("memo://readme", "text/plain"),
                ("memo://logo", "image/png"),
            ]
            (readme,) = await server.read("memo://readme")
            assert readme.text == "Read me."
            (logo,) = await server.read("memo://logo")
            assert logo.blob == b"\x00\x01\x02"
            with pytest.raises(InvalidArgumentError, match="memo://nope"):
                await server.read("memo://nope")
            (greet,) = await server.prompts()
            assert greet.name == "greet" and greet.arguments[0]["required"] is True
            messages = await server.prompt("greet", {"who": "Ann"})
            assert [(m.role, m.text) for m in messages] == [
                ("user", "Greet Ann."),
                ("assistant", "Hello!"),
            ]

    arun(main(), timeout=60)


@pytest.mark.slow
def test_a_call_past_its_timeout_is_a_tool_error_the_model_sees() -> None:
    async def main() -> None:
        async with client() as server:
            tools = await server.tools(include=["sleep"], call_timeout=0.3)
            model = ScriptedModel([call("sleep", seconds=1.5), "ok"])
            result = await Agent(model, tools=tools).run("go")
            (answer,) = results(result.messages).values()
            assert answer.kind == "tool_error"
            assert "no answer within 0.3 s" in answer.text

    arun(main(), timeout=60)


@pytest.mark.slow
def test_a_server_that_dies_mid_call_fails_the_run_and_the_history_stays_well_formed(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with client() as server:
            tools = await server.tools(include=["die"])
            checkpointer = FileCheckpointer(tmp_path)
            agent = Agent(ScriptedModel([call("die")]), tools=tools)
            with pytest.raises(BackendUnavailableError) as failed:
                await agent.run("go", checkpointer=checkpointer, thread_id="t")
            assert failed.value.code == "BACKEND_UNAVAILABLE"
            assert "during a call of tool 'die'" in failed.value.message
            assert agent.messages == []  # nothing committed
            saved = await checkpointer.load("t")
            stored = saved.messages if saved is not None else []
            assert repair_history(stored) == stored or stored[-1].tool_calls
            # Every later request fails the same way, coded.
            with pytest.raises(BackendUnavailableError):
                await server.tools()

    arun(main(), timeout=60)


@pytest.mark.parametrize(
    "command",
    [["/nonexistent/mcp-server"], [sys.executable, "-c", "pass"]],
    ids=["missing-command", "exits-at-once"],
)
def test_a_server_that_cannot_start_is_backend_unavailable_naming_it(command: list[str]) -> None:
    async def main() -> None:
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError, match=command[0]) as failed:
            async with MCPClient.stdio(command[0], command[1:], start_timeout=5):
                pass
        assert failed.value.code == "BACKEND_UNAVAILABLE"
        assert time.monotonic() - started < 5

    arun(main(), timeout=30)


def test_a_server_that_never_answers_is_backend_unavailable_within_the_start_timeout() -> None:
    async def main() -> None:
        started = time.monotonic()
        hang = MCPClient.stdio(
            sys.executable, ["-c", "import time; time.sleep(60)"], start_timeout=0.5
        )
        with pytest.raises(BackendUnavailableError, match=r"did not answer within 0\.5 s"):
            async with hang:
                pass
        assert time.monotonic() - started < 10

    arun(main(), timeout=30)


@pytest.mark.slow
def test_a_ten_megabyte_result_is_a_tool_error_the_model_sees() -> None:
    async def main() -> None:
        async with client() as server:
            tools = await server.tools(include=["huge"])
            model = ScriptedModel([call("huge"), "ok"])
            result = await Agent(model, tools=tools).run("go")
            (answer,) = results(result.messages).values()
            assert answer.kind == "tool_error"
            assert "over the limit of 1000000" in answer.text

    arun(main(), timeout=120)


@pytest.mark.slow
def test_tools_after_list_changed_give_the_new_list() -> None:
    async def main() -> None:
        async with client() as server:
            before = [t.name for t in await server.tools()]
            assert "later" not in before
            (grow,) = await server.tools(include={"grow"})
            assert await grow.invoke({}) == "grown"
            (later,) = await server.tools(include={"later"})
            assert await later.invoke({}) == "later ran"

    arun(main(), timeout=60)


@pytest.mark.slow
def test_names_prefixes_and_bad_arguments() -> None:
    async def main() -> None:
        async with client() as one, client() as two:
            first, second = await one.tools(), await two.tools()
            with pytest.raises(InvalidArgumentError, match="duplicate tool names") as dup:
                Agent(ScriptedModel([]), tools=[*first, *second])
            assert dup.value.code == "INVALID_ARGUMENT"
            prefixed = await two.tools(prefix="b_")
            assert prefixed[0].name == "b_shout"
            Agent(ScriptedModel([]), tools=[*first, *prefixed])
            with pytest.raises(InvalidArgumentError, match=r"does not offer: \['nope'\]"):
                await one.tools(include=["nope"])
            with pytest.raises(InvalidArgumentError, match="set, not a string"):
                await one.tools(requires_approval="shout")
            flagged = await one.tools(requires_approval=lambda name: name.startswith("s"))
            assert {t.name for t in flagged if t.requires_approval} == {"shout", "sleep"}
            chosen = await one.tools(requires_approval={"fail"})
            assert [t.name for t in chosen if t.requires_approval] == ["fail"]

    arun(main(), timeout=60)


def test_a_tool_whose_schema_is_not_an_object_schema_is_invalid_argument_naming_it() -> None:
    listed = mcp_types.Tool.model_construct(
        name="listy", description="", input_schema={"type": "array"}
    )
    with pytest.raises(InvalidArgumentError, match="MCP tool 'listy'") as bad:
        make_tool(
            client(),  # never connected: the schema is refused first
            listed,
            prefix="",
            requires_approval=False,
            call_timeout=None,
            max_result_chars=10,
        )
    assert bad.value.code == "INVALID_ARGUMENT"


def test_a_client_used_outside_async_with_is_backend_unavailable() -> None:
    with pytest.raises(BackendUnavailableError, match="not connected"):
        arun(client().tools())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ("approve", "HI"),
        ({"reject": "not now"}, "Rejected: not now"),
        ({"edit": {"text": "bye"}}, "BYE"),
    ],
    ids=["approve", "reject", "edit"],
)
def test_approvals_of_mcp_tools_go_through_the_checkpointer_and_resume(
    tmp_path: Path, decision: object, expected: str
) -> None:
    async def main() -> None:
        async with client() as server:
            tools = await server.tools(include=["shout"], requires_approval=True)
            checkpointer = FileCheckpointer(tmp_path)
            first = Agent(ScriptedModel([call("shout", text="hi")]), tools=tools)
            with pytest.raises(HitlInterrupt) as interrupt:
                await first.run("go", checkpointer=checkpointer, thread_id="t")
            assert interrupt.value.tool == "shout"
            saved = await checkpointer.load("t")
            assert saved is not None and saved.pending is not None
            # A new agent (as after a restart) resumes from the checkpoint.
            second = Agent(ScriptedModel(["finished"]), tools=tools)
            result = await second.resume(
                "t", {interrupt.value.interrupt_id: decision}, checkpointer=checkpointer
            )
            (answer,) = results(result.messages).values()
            assert answer.text == expected
            assert result.text == "finished"

    arun(main(), timeout=60)
