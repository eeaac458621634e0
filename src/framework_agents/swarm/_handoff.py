"""The handoff tool and the model gate that ends a member's run after its handoff turn.

Each member runs as ``member.with_tools(handoff_to_agent)``. The tool's ``agent_name`` is
an enum of the *other* members (the JSON schema says so, and validation refuses anything
else: a self-handoff or an unknown name comes back to the model as a tool error). A turn
may hold a handoff next to other calls: every call runs and is answered, the first valid
handoff of the turn wins and any other handoff is answered "ignored".

The agent loop ends a run only when the model answers without tool calls, so the clone's
model is wrapped in a :class:`HandoffGate`: once the winning handoff of the turn has run,
the next model call is answered by the gate itself with a short final assistant message
(``metadata["kind"] == "handoff"``) instead of calling the real model. The member's run
then commits like any run, and the next member takes over.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue

from ..agent._base import unique_call_ids
from ..messages import Message
from ..models._base import Model, ModelChunk, ModelDone, StreamingModelBase, ToolSpec
from ..tools import Tool, ToolArgumentsError, ToolContext
from ._state import SwarmRecord
from ._types import Handoff

__all__ = [
    "HANDOFF_KIND",
    "HANDOFF_MESSAGE_KIND",
    "HANDOFF_TOOL",
    "HandoffGate",
    "MemberTurn",
    "TurnSlot",
    "handoff_message",
    "make_handoff_tool",
]

#: The name of the tool every member gets.
HANDOFF_TOOL = "handoff_to_agent"

#: ``metadata["kind"]`` of the final assistant message that closes a handing member's run.
HANDOFF_KIND = "handoff"

#: ``metadata["kind"]`` of the user-role message that gives the next member the handoff.
HANDOFF_MESSAGE_KIND = "handoff_message"


@dataclass(slots=True)
class MemberTurn:
    """What one member's run decided about handoffs (reset before each member runs)."""

    member: str
    record: SwarmRecord
    first_call: str | None = None  # the first valid handoff call of the latest response
    first_target: str | None = None
    handoff: Handoff | None = None  # the handoff that won
    after: SwarmRecord | None = None  # the record once the handoff is followed
    message: Message | None = None  # what the next member is given
    context: dict[str, Any] = field(default_factory=dict)


class TurnSlot:
    """The swarm's current :class:`MemberTurn`, shared by the tool and the gate."""

    def __init__(self) -> None:
        self.turn: MemberTurn | None = None


def handoff_message(handoff: Handoff, context: dict[str, dict[str, Any]]) -> Message:
    """The user-role message that hands the conversation to ``handoff.to_agent``."""
    text = f"[Handoff from {handoff.from_agent} to {handoff.to_agent}] {handoff.message}"
    if context:
        text += "\n\nShared context:\n" + json.dumps(context, sort_keys=True, ensure_ascii=False)
    return Message(
        "user",
        text,
        metadata={
            "kind": HANDOFF_MESSAGE_KIND,
            "from_agent": handoff.from_agent,
            "to_agent": handoff.to_agent,
        },
    )


def make_handoff_tool(member: str, others: Sequence[str], slot: TurnSlot) -> Tool:
    """The ``handoff_to_agent`` tool of ``member``; ``agent_name`` may name ``others`` only."""
    names = tuple(others)
    described = ", ".join(names)

    # Async on purpose: it runs on the event loop, so two handoffs of one turn never race
    # (a sync tool would run in a worker thread).
    async def handoff_to_agent(
        agent_name: str,
        message: str,
        ctx: ToolContext,
        context: dict[str, JsonValue] | None = None,
    ) -> str:
        turn = slot.turn
        if turn is None or turn.member != member:
            return "Error: no swarm run is in progress; the handoff was not followed."
        won = turn.handoff is None and turn.first_call in (None, ctx.call.id)
        if not won:
            target = turn.handoff.to_agent if turn.handoff else turn.first_target
            return "Ignored: only the first handoff of a turn is followed" + (
                f" (this turn hands off to {target})." if target else "."
            )
        handoff = Handoff(member, agent_name, message)
        after = turn.record.followed(handoff, context)
        turn.handoff, turn.after = handoff, after
        turn.context = after.context_dict()
        turn.message = handoff_message(handoff, turn.context)
        return f"Handed off to {agent_name}."

    handoff_to_agent.__annotations__ = {
        "agent_name": Literal[names],
        "message": str,
        "ctx": ToolContext,
        "context": dict[str, JsonValue] | None,
        "return": str,
    }
    handoff_to_agent.__doc__ = f"""Hand the conversation to another member of the swarm.

    Use it when another member is better suited to continue; that member takes the next
    turn and sees the whole conversation. Only the first handoff of a turn is followed.

    Args:
        agent_name: The member to hand off to, one of: {described}.
        message: What the next member should do, with what it needs to know.
        context: Optional JSON facts to share with the next members (merged into yours).
    """
    tool = Tool(handoff_to_agent, name=HANDOFF_TOOL)
    # The schema a model sees: an explicit enum (pydantic writes "const" for one name) and
    # a plain object for the context (no $defs/$ref, which some providers refuse).
    schema = copy.deepcopy(tool.parameters)
    schema.pop("$defs", None)
    props = schema["properties"]
    props["agent_name"] = {
        "type": "string",
        "enum": list(names),
        "description": props["agent_name"].get("description", ""),
    }
    props["context"] = {
        "type": "object",
        "description": props["context"].get("description", ""),
    }
    tool.parameters = schema
    tool.spec = ToolSpec(name=tool.name, description=tool.description, parameters=schema)
    return tool


class HandoffGate(StreamingModelBase):
    """The member's model, wrapped: ends the run once the turn's handoff has run.

    Everything else passes through: the real model answers every other call, streaming
    when it streams. Attributes the gate does not define are the real model's.
    """

    def __init__(self, inner: Model, tool: Tool, slot: TurnSlot, member: str) -> None:
        self.inner = inner
        self._tool = tool
        self._slot = slot
        self._member = member

    def __getattr__(self, name: str) -> Any:
        if name == "inner" or name.startswith("__"):  # copy/pickle probe before __init__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _closing(self) -> Message | None:
        turn = self._slot.turn
        if turn is None or turn.member != self._member or turn.handoff is None:
            return None
        return Message(
            "assistant",
            f"[Handed off to {turn.handoff.to_agent}]",
            metadata={"kind": HANDOFF_KIND, "stop_reason": "handoff"},
        )

    def _seen(self, response: Message) -> Message:
        """Note the first valid handoff call of ``response`` (ids made unique first)."""
        response = unique_call_ids(response)
        turn = self._slot.turn
        if turn is None or turn.member != self._member:
            return response
        turn.first_call = turn.first_target = None
        for call in response.tool_calls:
            if call.name != HANDOFF_TOOL:
                continue
            try:
                args = self._tool.validate(call.args)
            except ToolArgumentsError:
                continue
            turn.first_call, turn.first_target = call.id, str(args["agent_name"])
            break
        return response

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """The closing message after a handoff, else the real model's answer."""
        closing = self._closing()
        if closing is not None:
            return closing
        response = await self.inner.complete(messages, tools, system_prompt=system_prompt)
        return self._seen(response) if isinstance(response, Message) else response

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """Like :meth:`complete`, streaming the real model's deltas when it streams."""
        closing = self._closing()
        if closing is not None:
            yield ModelDone(closing)
            return
        stream = getattr(self.inner, "stream", None)
        if not callable(stream):
            yield ModelDone(await self.complete(messages, tools, system_prompt=system_prompt))
            return
        async for chunk in stream(messages, tools, system_prompt=system_prompt):
            if isinstance(chunk, ModelDone) and isinstance(chunk.message, Message):
                yield ModelDone(self._seen(chunk.message))
            else:
                yield chunk
