"""The built-in assistant of ``framework-agents serve`` (no ``APP`` given).

A chat agent on the chosen model with one demo tool that needs a human's approval,
``save_note``. Small offline models rarely call tools on their own, so a user message
starting with ``/note `` calls ``save_note`` directly (the model is not asked for that
turn): the approval flow can be shown on any model, the offline one included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..agent import Agent, ToolContext, tool
from ..messages import Message, ToolCall, new_id
from ..models._base import ModelChunk, ModelDone, StreamingModelBase, ToolSpec

__all__ = ["COMMAND", "CommandModel", "builtin_factory", "save_note"]

#: The prefix of a user message that calls ``save_note`` with the rest of the text.
COMMAND = "/note "

_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer briefly. To keep a note for the user, call "
    "save_note; a human approves each note before it is saved."
)


@tool(requires_approval=True, allowed_decisions=("approve", "edit", "reject"))
def save_note(text: str, ctx: ToolContext) -> str:
    """Save a short note for the user (a human approves it first)."""
    notes = list(ctx.agent.state.get("notes", []))
    notes.append(text)
    ctx.agent.state["notes"] = notes
    return f"saved note #{len(notes)}: {text}"


class CommandModel(StreamingModelBase):
    """Wraps a model: ``/note <text>`` calls ``save_note``; anything else goes to the model."""

    def __init__(self, inner: Any) -> None:
        """Answer with ``inner`` except for ``/note`` commands."""
        self.inner = inner

    @staticmethod
    def _command(messages: Sequence[Message]) -> Message | None:
        last = messages[-1] if messages else None
        if last is None or last.role != "user" or not last.text.startswith(COMMAND):
            return None
        call = ToolCall(f"note-{new_id()}", "save_note", {"text": last.text[len(COMMAND) :]})
        return Message(role="assistant", tool_calls=[call])

    async def _complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> Message:
        """The command's call, or the inner model's answer."""
        command = self._command(messages)
        if command is not None:
            return command
        answer: Message = await self.inner.complete(messages, tools, system_prompt=system_prompt)
        return answer

    async def _stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], system_prompt: str | None
    ) -> AsyncIterator[ModelChunk]:
        """Stream the inner model's answer as it comes (a command: its call at once)."""
        command = self._command(messages)
        if command is not None:
            yield ModelDone(command)
            return
        stream = getattr(self.inner, "stream", None)
        if stream is None:
            yield ModelDone(await self.inner.complete(messages, tools, system_prompt=system_prompt))
            return
        async for chunk in stream(messages, tools, system_prompt=system_prompt):
            yield chunk


def builtin_factory(model: Any) -> Callable[[], Agent]:
    """A factory of the built-in assistant on ``model`` (one model shared by every run)."""
    wrapped = CommandModel(model)

    def factory() -> Agent:
        return Agent(wrapped, tools=[save_note], system_prompt=_SYSTEM_PROMPT)

    return factory
