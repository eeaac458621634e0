"""The agent's human-in-the-loop protocol over the database checkpointers.

An approval call suspends a run; the checkpoint (pending call, turn, decisions) lives in
the database; a new agent (as another replica would) resumes it with a decision; the
approved call runs exactly once, even if the resumed run is retried.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from stores_backends import postgres_factory, redis_factory, sqlite_factory

from framework_agents import Agent, FunctionModel, HitlInterrupt, Message, ToolCall, tool
from framework_agents.errors import HitlDecisionError
from framework_agents.models._base import ToolSpec
from framework_agents.testing.conformance import StoreFactory


def _agent(ran: list[str]) -> Agent:
    ids = itertools.count()

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a text."""
        ran.append(text)
        return f"published {text}"

    def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Message | str:
        if not any(m.role == "tool" for m in messages):
            return Message(
                "assistant", "", tool_calls=[ToolCall(f"c{next(ids)}", "publish", {"text": "hi"})]
            )
        return "done"

    return Agent(FunctionModel(model), tools=[publish])


def _approval_round_trip(factory: StoreFactory) -> None:
    ran: list[str] = []

    async def body() -> None:
        first = factory.open()
        try:
            with pytest.raises(HitlInterrupt) as info:
                await _agent(ran).run("go", checkpointer=first.checkpointer, thread_id="t")
            assert info.value.tool == "publish" and ran == []
        finally:
            await first.close()
        second = factory.open()  # another process or replica would open its own
        try:
            stored = await second.checkpointer.load("t")
            assert stored is not None and stored.pending is not None
            result = await _agent(ran).resume(
                "t", {"publish": "approve"}, checkpointer=second.checkpointer
            )
            assert result.text == "done" and ran == ["hi"]
            with pytest.raises(HitlDecisionError):  # a replayed approval answers nothing
                await _agent(ran).resume(
                    "t", {"publish": "approve"}, checkpointer=second.checkpointer
                )
            assert ran == ["hi"]  # never twice
            final = await second.checkpointer.load("t")
            assert final is not None and final.pending is None
            roles = [m.role for m in final.messages]
            assert roles[:4] == ["user", "assistant", "tool", "assistant"]
            assert roles.count("tool") == 1  # the approved call ran and was recorded once
        finally:
            await second.close()

    asyncio.run(body())


def _cases() -> list[object]:
    return [
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
    ]


@pytest.mark.parametrize("backend", _cases())
def test_approval_survives_across_store_instances(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    makers: dict[str, Callable[[], StoreFactory]] = {
        "sqlite": lambda: sqlite_factory(str(tmp_path / "a.db")),
        "postgres": lambda: postgres_factory(request.getfixturevalue("pg_schema")),
        "redis": lambda: redis_factory(request.getfixturevalue("redis_prefix")),
    }
    _approval_round_trip(makers[backend]())
