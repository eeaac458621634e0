"""Property: whatever the members do (handoffs to anyone, several per turn, next to other
calls and approvals, under any limits and window), every history stays well formed and the
thread holds exactly what the runs report."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework_agents import (
    Agent,
    FunctionModel,
    HitlInterrupt,
    InMemoryCheckpointer,
    Message,
    SlidingWindowConversationManager,
    Swarm,
    ToolCall,
    is_well_formed,
    tool,
)
from framework_agents.swarm import HANDOFF_MESSAGE_KIND, HANDOFF_TOOL, SWARM_STATE_KEY

MEMBERS = ("a", "b", "c")
TARGETS = (*MEMBERS, "zed")  # "zed" is no member: a tool error

_call = st.one_of(
    st.tuples(st.just("handoff"), st.sampled_from(TARGETS)),
    st.tuples(st.just("echo"), st.integers(0, 9)),
    st.tuples(st.just("approve_me"), st.integers(0, 9)),
)
#: One model answer: a final text (empty list) or a turn of 1-4 calls.
_answer = st.lists(_call, min_size=0, max_size=4)


@tool
def echo(n: int) -> int:
    """Echo a number."""
    return n


@tool(requires_approval=True)
def approve_me(n: int) -> str:
    """A call a callback decides."""
    return f"approved {n}"


def _decide(name: str, args: dict[str, Any]) -> Any:
    n = args.get("n", 0)
    if n % 3 == 0:
        return {"suspend": True}  # a human must answer: the swarm stops and is resumed
    return "approve" if n % 2 == 0 else {"reject": "odd"}


def _model(script: list[list[tuple[str, Any]]], member: str) -> FunctionModel:
    def answer(messages: list[Message], tools: Any) -> Message | str:
        if not script:
            return f"{member} done"
        calls = script.pop(0)
        if not calls:
            return f"{member} answers"
        made = []
        for i, (name, value) in enumerate(calls):
            args: dict[str, Any] = (
                {"agent_name": value, "message": f"from {member}", "context": {member: i}}
                if name == "handoff"
                else {"n": value}
            )
            made.append(
                ToolCall(f"c{len(messages)}-{i}", name if name != "handoff" else HANDOFF_TOOL, args)
            )
        return Message("assistant", "", tool_calls=made)

    return FunctionModel(answer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(_answer, max_size=14),
    prompts=st.integers(1, 3),
    max_handoffs=st.integers(0, 4),
    max_iterations=st.integers(1, 6),
    window=st.sampled_from([0, 3]),
    trimmed=st.booleans(),
)
def test_every_history_stays_well_formed_under_random_handoff_scripts(
    script: list[list[tuple[str, Any]]],
    prompts: int,
    max_handoffs: int,
    max_iterations: int,
    window: int,
    trimmed: bool,
) -> None:
    manager = SlidingWindowConversationManager(window_size=5 if trimmed else 1000)
    agents = [
        Agent(
            _model(script, m),
            agent_id=m,
            tools=[echo, approve_me],
            decide=_decide,
            conversation_manager=manager,
            max_turns=50,
        )
        for m in MEMBERS
    ]
    swarm = Swarm(
        agents,
        max_handoffs=max_handoffs,
        max_iterations=max_iterations,
        repetition_window=window,
    )
    cp = InMemoryCheckpointer()

    async def _run_to_end(prompt: str) -> Any:
        """Run, answering every approval a member suspends on, until the run ends."""
        try:
            return await swarm.run(prompt, checkpointer=cp, thread_id="t")
        except HitlInterrupt as first:
            interrupt: HitlInterrupt | None = first
        for _ in range(30):
            assert interrupt is not None
            stored = await cp.load("t")
            assert stored is not None and is_well_formed(stored.messages)
            assert stored.pending is not None and stored.pending.name == "approve_me"
            assert stored.state[SWARM_STATE_KEY]["active"] == interrupt.agent
            try:
                return await swarm.resume("t", {"approve_me": "approve"}, checkpointer=cp)
            except HitlInterrupt as again:
                interrupt = again
        raise AssertionError("the swarm kept interrupting")

    async def scenario() -> None:
        for p in range(prompts):
            result = await _run_to_end(f"prompt {p}")
            assert is_well_formed(result.messages)
            stored = await cp.load("t")
            assert stored is not None and stored.messages == result.messages
            record = stored.state[SWARM_STATE_KEY]
            assert record["active"] in MEMBERS
            if result.status == "completed":
                assert record["active"] == result.agent
            else:
                assert result.stop_reason in ("max_handoffs", "max_iterations", "repetition")
            assert len(result.handoffs) <= max_handoffs + 1
            assert result.iterations <= max_iterations
            for h in result.handoffs:
                assert h.from_agent != h.to_agent and h.to_agent in MEMBERS
            # The record holds every handoff (interrupted runs' too); this run's are its tail.
            stored_handoffs = record["handoffs"]
            assert len(stored_handoffs) == record["handoff_count"]
            if result.handoffs:
                tail = stored_handoffs[-len(result.handoffs) :]
                assert [h.to_dict() for h in result.handoffs] == tail
            if not trimmed:
                given_msgs = [
                    m for m in result.messages if m.metadata.get("kind") == HANDOFF_MESSAGE_KIND
                ]
                assert len(given_msgs) == record["handoff_count"]

    asyncio.run(scenario())
