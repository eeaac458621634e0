"""GenAI spans and metrics of runs, model calls, tools, resumes, workflows and stores."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs opentelemetry-sdk (the dev extra)")

from opentelemetry.trace import SpanKind, StatusCode

from async_helper import arun
from framework_agents import (
    Agent,
    FileCheckpointer,
    FileMemory,
    HitlInterrupt,
    InMemoryCheckpointer,
    InMemoryStorage,
    MemoryCorruptError,
    Message,
    ModelError,
    ScriptedModel,
    SessionManager,
    ToolCall,
    tool,
)
from framework_agents._telemetry import (
    CAPTURE_CONTENT_ENV,
    trace_run,
    trace_workflow,
    workflow_span,
)

from .conftest import Telemetry


def usage(text: str, inp: int, out: int, **calls: dict[str, Any]) -> Message:
    tool_calls = [ToolCall(f"call_{n}", n, a) for n, a in calls.items()]
    return Message(
        "assistant",
        text,
        tool_calls=tool_calls,
        metadata={
            "usage": {"input_tokens": inp, "output_tokens": out},
            "finish_reason": "tool_calls" if calls else "stop",
        },
    )


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text."""
    return f"published {text}"


def test_run_with_a_tool_call_nests_chat_and_tool_spans_under_invoke_agent(otel: Telemetry) -> None:
    model = ScriptedModel([usage("", 10, 3, add={"a": 2, "b": 3}), usage("5", 20, 1)])
    agent = Agent(model, tools=[add], agent_id="calc")

    result = arun(agent.run("2+3?"))

    assert result.text == "5"
    (run,) = otel.named("invoke_agent")
    chats = otel.named("chat ")
    (execution,) = otel.named("execute_tool")
    assert run.name == "invoke_agent calc"
    assert run.kind is SpanKind.INTERNAL
    attrs = dict(run.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.id"] == attrs["gen_ai.agent.name"] == "calc"
    assert attrs["gen_ai.provider.name"] == "_OTHER"
    assert attrs["gen_ai.request.model"] == "ScriptedModel"
    assert attrs["gen_ai.usage.input_tokens"] == 30
    assert attrs["gen_ai.usage.output_tokens"] == 4
    assert attrs["framework_agents.run.id"] == result.run_id
    assert attrs["framework_agents.run.outcome"] == "completed"
    assert "gen_ai.conversation.id" not in attrs

    assert [c.name for c in chats] == ["chat ScriptedModel", "chat ScriptedModel"]
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert chat.parent is not None and chat.parent.span_id == run.context.span_id
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert "gen_ai.input.messages" not in chat.attributes  # content is off by default
    first = dict(chats[0].attributes or {})
    assert first["gen_ai.usage.input_tokens"] == 10
    assert first["gen_ai.usage.output_tokens"] == 3
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)

    assert execution.name == "execute_tool add"
    assert execution.parent is not None and execution.parent.span_id == run.context.span_id
    tool_attrs = dict(execution.attributes or {})
    assert tool_attrs["gen_ai.tool.name"] == "add"
    assert tool_attrs["gen_ai.tool.call.id"] == "call_add"
    assert "error.type" not in tool_attrs
    assert "gen_ai.tool.call.arguments" not in tool_attrs
    assert execution.status.status_code is StatusCode.UNSET

    memory_spans = {s.name for s in otel.named("memory ")}
    assert memory_spans == {"memory load", "memory save"}
    assert all(s.parent and s.parent.span_id == run.context.span_id for s in otel.named("memory"))


def test_model_call_metrics_record_duration_and_tokens(otel: Telemetry) -> None:
    model = ScriptedModel([usage("", 10, 3, add={"a": 1, "b": 1}), usage("2", 20, 1)])
    arun(Agent(model, tools=[add]).run("1+1?"))

    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert dict(duration.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "_OTHER",
        "gen_ai.request.model": "ScriptedModel",
    }
    tokens = {
        p.attributes["gen_ai.token.type"]: p for p in otel.points("gen_ai.client.token.usage")
    }
    assert tokens["input"].sum == 30 and tokens["input"].count == 2
    assert tokens["output"].sum == 4 and tokens["output"].count == 2


def test_streamed_run_has_one_chat_span_per_model_call(otel: Telemetry) -> None:
    model = ScriptedModel([usage("", 1, 1, add={"a": 1, "b": 2}), usage("3", 2, 2)])
    agent = Agent(model, tools=[add])

    async def consume() -> list[str]:
        return [event.type async for event in agent.stream("1+2?")]

    kinds = arun(consume())

    assert kinds[-1] == "run_finished"
    (run,) = otel.named("invoke_agent")
    chats = otel.named("chat ")
    assert len(chats) == 2
    assert all(c.parent and c.parent.span_id == run.context.span_id for c in chats)
    assert chats[1].attributes is not None
    assert chats[1].attributes["gen_ai.usage.output_tokens"] == 2


def test_message_content_is_recorded_only_when_turned_on(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    model = ScriptedModel([usage("", 1, 1, add={"a": 4, "b": 5}), usage("nine", 1, 1)])
    arun(Agent(model, tools=[add], system_prompt="Be brief.").run("4+5?"))

    first = dict(otel.named("chat ")[0].attributes or {})
    sent = json.loads(str(first["gen_ai.input.messages"]))
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "4+5?"}]}]
    assert json.loads(str(first["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "Be brief."}
    ]
    answered = json.loads(str(first["gen_ai.output.messages"]))
    assert answered[0]["parts"][0]["name"] == "add"
    execution = dict(otel.named("execute_tool")[0].attributes or {})
    assert json.loads(str(execution["gen_ai.tool.call.arguments"])) == {"a": 4, "b": 5}
    assert execution["gen_ai.tool.call.result"] == "9"


def test_failing_model_marks_chat_and_run_spans_with_the_error_code(otel: Telemetry) -> None:
    agent = Agent(ScriptedModel([ModelError("upstream down")]))

    with pytest.raises(ModelError):
        arun(agent.run("hi"))

    (chat,) = otel.named("chat ")
    (run,) = otel.named("invoke_agent")
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "MODEL_ERROR"
    assert chat.parent is not None and chat.parent.span_id == run.context.span_id
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "MODEL_ERROR"


def test_tool_error_result_sets_error_type_on_the_tool_span(otel: Telemetry) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([usage("", 1, 1, broken={}), usage("sorry", 1, 1)])
    arun(Agent(model, tools=[broken]).run("go"))

    (execution,) = otel.named("execute_tool")
    assert execution.attributes is not None
    assert execution.attributes["error.type"] == "tool_error"
    assert execution.status.status_code is StatusCode.ERROR
    (run,) = otel.named("invoke_agent")
    assert run.status.status_code is StatusCode.UNSET  # the run itself went on and finished


@pytest.mark.parametrize("make", [InMemoryCheckpointer, "file"], ids=["memory", "file"])
def test_interrupted_then_resumed_run_links_the_resume_to_the_run(
    otel: Telemetry, make: Any, tmp_path: Any
) -> None:
    checkpointer = FileCheckpointer(tmp_path) if make == "file" else make()
    first = Agent(ScriptedModel([usage("", 5, 2, publish={"text": "hi"})]), tools=[publish])

    with pytest.raises(HitlInterrupt):
        arun(first.run("publish hi", checkpointer=checkpointer, thread_id="t1"))

    (interrupted,) = otel.named("invoke_agent")
    attrs = dict(interrupted.attributes or {})
    assert attrs["framework_agents.run.outcome"] == "interrupted"
    assert attrs["gen_ai.conversation.id"] == "t1"
    assert interrupted.status.status_code is StatusCode.UNSET  # waiting is not failing
    (suspended,) = otel.named("execute_tool")
    suspended_attrs = dict(suspended.attributes or {})
    assert suspended_attrs["error.type"] == "HitlInterrupt"
    assert suspended_attrs["framework_agents.tool.outcome"] == "suspended"
    assert suspended_attrs["gen_ai.tool.call.id"] == "call_publish"
    assert suspended.parent is not None
    assert suspended.parent.span_id == interrupted.context.span_id
    assert {s.name for s in otel.named("checkpoint")} == {"checkpoint load", "checkpoint save"}

    otel.exporter.clear()
    reissued = usage("", 5, 2, publish={"text": "hi"})  # a resume asks the model again
    second = Agent(ScriptedModel([reissued, usage("done", 1, 1)]), tools=[publish])
    result = arun(
        second.resume("t1", {"publish": "approve"}, checkpointer=checkpointer, reissue=True)
    )

    assert result.text == "done"
    (resumed,) = otel.named("invoke_agent")
    resumed_attrs = dict(resumed.attributes or {})
    assert resumed_attrs["framework_agents.run.resume"] is True
    assert resumed_attrs["framework_agents.run.outcome"] == "completed"
    assert resumed_attrs["gen_ai.conversation.id"] == "t1"
    (link,) = resumed.links
    assert link.context.span_id == interrupted.context.span_id
    assert link.context.trace_id == interrupted.context.trace_id
    (ran,) = otel.named("execute_tool")
    assert ran.attributes is not None and "error.type" not in ran.attributes
    assert ran.parent is not None and ran.parent.span_id == resumed.context.span_id


def test_workflow_span_parents_the_runs_of_its_members(otel: Telemetry) -> None:
    handoff = ToolCall("h1", "add", {"a": 1, "b": 1})
    researcher = Agent(
        ScriptedModel([Message("assistant", "", tool_calls=[handoff]), "handing off"]),
        tools=[add],
        agent_id="researcher",
    )
    writer = Agent(ScriptedModel(["final text"]), agent_id="writer")

    async def swarm() -> str:
        with workflow_span("team", conversation_id="s1"):
            await researcher.run("research")
            return (await writer.run("write")).text

    assert arun(swarm()) == "final text"
    (workflow,) = otel.named("invoke_workflow")
    assert workflow.name == "invoke_workflow team"
    assert workflow.attributes is not None
    assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert workflow.attributes["gen_ai.conversation.id"] == "s1"
    runs = otel.named("invoke_agent")
    assert [r.name for r in runs] == ["invoke_agent researcher", "invoke_agent writer"]
    assert all(r.parent and r.parent.span_id == workflow.context.span_id for r in runs)
    assert all(r.context.trace_id == workflow.context.trace_id for r in otel.spans())


def test_workflow_event_stream_records_failure(otel: Telemetry) -> None:
    async def members() -> Any:
        yield "started"
        raise ModelError("member failed")

    async def consume() -> list[str]:
        seen: list[str] = []
        async for event in trace_workflow("team", members()):
            seen.append(event)
        return seen

    with pytest.raises(ModelError):
        arun(consume())
    (workflow,) = otel.named("invoke_workflow")
    assert workflow.status.status_code is StatusCode.ERROR
    assert workflow.attributes is not None
    assert workflow.attributes["error.type"] == "MODEL_ERROR"


def test_a_consumer_that_stops_early_ends_the_span_and_leaves_no_context(otel: Telemetry) -> None:
    from opentelemetry import trace

    agent = Agent(ScriptedModel(["a long answer"]))

    async def first_event() -> str:
        stream = agent.stream("hi")
        event = await anext(stream)
        assert not trace.get_current_span().get_span_context().is_valid  # nothing leaked
        await stream.aclose()
        return event.type

    assert arun(first_event()) == "run_started"
    (run,) = otel.named("invoke_agent")
    assert run.end_time is not None
    assert not agent.running


def test_without_a_provider_wrappers_return_what_they_were_given() -> None:
    async def events() -> Any:
        yield 1

    stream = events()
    assert trace_run(Agent(ScriptedModel(["x"])), stream) is stream
    assert trace_workflow("team", stream) is stream
    with workflow_span("team") as span:
        assert span is None
    arun(stream.aclose())


def test_session_runs_carry_the_session_id_and_trace_session_io(otel: Telemetry) -> None:
    session = SessionManager("s1", InMemoryStorage())
    arun(Agent(ScriptedModel(["hello"]), session_manager=session).run("hi"))

    (run,) = otel.named("invoke_agent")
    assert run.attributes is not None
    assert run.attributes["gen_ai.conversation.id"] == "s1"
    names = sorted(s.name for s in otel.named("session "))
    assert names == ["session load", "session save"]
    load = otel.named("session load")[0]
    assert load.attributes is not None
    assert load.attributes["framework_agents.store.key"] == "s1"
    assert load.attributes["framework_agents.store.backend"] == "SessionManager"


def test_a_store_that_fails_marks_its_span_with_the_error_code(
    otel: Telemetry, tmp_path: Any
) -> None:
    memory = FileMemory(tmp_path)
    memory.path.write_text("{not json", encoding="utf-8")
    agent = Agent(ScriptedModel(["never"]), memory=memory)

    with pytest.raises(MemoryCorruptError):
        arun(agent.run("hi"))

    (load,) = otel.named("memory load")
    assert load.status.status_code is StatusCode.ERROR
    assert load.attributes is not None
    assert load.attributes["error.type"] == "MEMORY_CORRUPT"
    assert load.attributes["framework_agents.store.backend"] == "FileMemory"
    (run,) = otel.named("invoke_agent")
    assert run.attributes is not None and run.attributes["error.type"] == "MEMORY_CORRUPT"
    assert otel.named("chat ") == []  # the model was never called


_CHILD = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from framework_agents import (
    Agent, FileCheckpointer, HitlInterrupt, Message, ScriptedModel, ToolCall, tool,
)

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

@tool(requires_approval=True)
def publish(text: str) -> str:
    '''Publish text.'''
    return "published " + text

call = Message("assistant", tool_calls=[ToolCall("call_publish", "publish", {"text": "hi"})])
agent = Agent(ScriptedModel([call]), tools=[publish])
try:
    asyncio.run(agent.run("publish hi", checkpointer=FileCheckpointer(sys.argv[1]), thread_id="t1"))
except HitlInterrupt:
    pass
(run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
print(json.dumps({"trace_id": run.context.trace_id, "span_id": run.context.span_id}))
"""


def test_a_resume_in_another_process_links_to_the_run_it_continues(
    otel: Telemetry, tmp_path: Any
) -> None:
    """The interrupted run's span is named in the checkpoint; the resume links to it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout.strip().splitlines()[-1])

    second = Agent(ScriptedModel(["done"]), tools=[publish])
    result = arun(
        second.resume(
            "t1", {"publish": "approve"}, checkpointer=FileCheckpointer(tmp_path), reissue=False
        )
    )
    assert result.text == "done"
    (resumed,) = otel.named("invoke_agent")
    (link,) = resumed.links
    assert (link.context.trace_id, link.context.span_id) == (
        child["trace_id"],
        child["span_id"],
    )
    assert dict(link.attributes or {}) == {"framework_agents.link": "resumes"}


def test_a_swarm_handoff_is_one_workflow_span_over_both_members(otel: Telemetry) -> None:
    """A real Swarm: triage hands off to billing; both members' runs sit under the workflow."""
    from framework_agents import Swarm
    from framework_agents.swarm import HANDOFF_TOOL

    handoff = ToolCall("h1", HANDOFF_TOOL, {"agent_name": "billing", "message": "refund"})
    triage = Agent(
        ScriptedModel([Message("assistant", "", tool_calls=[handoff])]), agent_id="triage"
    )
    billing = Agent(ScriptedModel(["refunded"]), agent_id="billing")
    swarm = Swarm([triage, billing], swarm_id="support")

    result = arun(swarm.run("I want a refund", checkpointer=InMemoryCheckpointer(), thread_id="s9"))

    assert (result.agent, result.text) == ("billing", "refunded")
    (workflow,) = otel.named("invoke_workflow")
    assert workflow.name == "invoke_workflow support"
    assert workflow.attributes is not None
    assert workflow.attributes["gen_ai.conversation.id"] == "s9"
    runs = otel.named("invoke_agent")
    assert [r.name for r in runs] == ["invoke_agent triage", "invoke_agent billing"]
    assert all(r.parent and r.parent.span_id == workflow.context.span_id for r in runs)
    tools = [s for s in otel.named("execute_tool") if s.name == f"execute_tool {HANDOFF_TOOL}"]
    assert len(tools) == 1 and tools[0].context.trace_id == workflow.context.trace_id
