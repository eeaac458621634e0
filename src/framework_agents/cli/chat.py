r"""``framework-agents chat``: an interactive conversation, line by line from stdin.

Reads one prompt per line, so it works at a terminal and behind a pipe
(``printf 'hi\n/exit\n' | framework-agents chat``). ``/exit`` (or ``/quit``) and end of
input end it; ``/history`` shows the stored history, ``/help`` the commands. With
``--session ID`` the conversation is kept by a :class:`SessionManager` in a
:class:`LocalFileStorage` under ``<data-dir>/sessions`` and resumed next time.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from ..agent import (
    Agent,
    MessageCompletedEvent,
    MessageStartedEvent,
    RunFinishedEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ..conversation import SlidingWindowConversationManager
from ..errors import AgentError
from ..messages import Message
from ..models import Model
from ..sessions import LocalFileStorage, SessionManager
from ._models import describe_model
from ._render import history_table, preview, start_model

__all__ = ["ChatOptions", "run_chat", "session_storage"]

_HELP = "commands: /history (show the stored history), /help, /exit (or /quit, or end of input)"


def session_storage(data_dir: Path) -> LocalFileStorage:
    """Where the command line keeps sessions: ``<data_dir>/sessions``."""
    return LocalFileStorage(data_dir / "sessions")


class ChatOptions:
    """What ``chat`` was asked for."""

    def __init__(
        self,
        *,
        session_id: str | None,
        data_dir: Path,
        system_prompt: str | None,
        window: int,
    ) -> None:
        self.session_id = session_id
        self.data_dir = data_dir
        self.system_prompt = system_prompt
        self.window = window


async def _read_line(stdin: TextIO, console: Console, interactive: bool) -> str | None:
    if interactive:
        try:
            return await asyncio.to_thread(console.input, "[bold cyan]you>[/bold cyan] ")
        except EOFError:
            return None
    line = await asyncio.to_thread(stdin.readline)
    return None if line == "" else line


async def _answer(console: Console, agent: Agent, prompt: str) -> None:
    open_line = False
    async for event in agent.stream(prompt):
        if isinstance(event, MessageStartedEvent):
            console.print("[bold green]assistant>[/bold green] ", end="")
            open_line = True
        elif isinstance(event, TextDeltaEvent):
            console.print(event.delta, end="", markup=False)
        elif isinstance(event, MessageCompletedEvent):
            if open_line:
                console.print()
                open_line = False
        elif isinstance(event, ToolCallEvent):
            call = escape(f"{event.call.name}({event.call.args})")
            console.print(f"[magenta]  tool call[/magenta] {call}")
        elif isinstance(event, ToolResultEvent):
            result = escape(preview(event.message.text))
            console.print(f"[magenta]  tool result[/magenta] {result}")
        elif isinstance(event, RunFinishedEvent):
            usage = event.result.usage
            console.print(
                f"[dim]  {usage.input_tokens} tokens in, {usage.output_tokens} out, "
                f"{len(event.result.messages)} messages in history[/dim]"
            )


async def run_chat(
    console: Console, model: Model, options: ChatOptions, stdin: TextIO | None = None
) -> int:
    """Run the chat loop until ``/exit`` or end of input; the process exit status."""
    stdin = stdin if stdin is not None else sys.stdin
    interactive = stdin.isatty()
    session: SessionManager | None = None
    if options.session_id is not None:
        session = SessionManager(options.session_id, session_storage(options.data_dir))
    agent = Agent(
        model,
        system_prompt=options.system_prompt,
        session_manager=session,
        conversation_manager=SlidingWindowConversationManager(window_size=options.window),
    )
    console.print(f"[bold]framework-agents chat[/bold] with {describe_model(model)}")
    restored: list[Message] = []
    if session is not None:
        snapshot = await session.load_latest()
        restored = list(snapshot.data.messages or []) if snapshot is not None else []
        count = len(restored)
        where = options.data_dir / "sessions"
        if count:
            console.print(f"session {session.session_id!r}: resumed {count} messages from {where}")
        else:
            console.print(f"session {session.session_id!r}: new, kept under {where}")
    await start_model(console, model)
    console.print(f"[dim]{_HELP}[/dim]")
    while True:
        line = await _read_line(stdin, console, interactive)
        if line is None:
            break
        prompt = line.strip()
        if not prompt:
            continue
        if not interactive:
            console.print(f"[bold cyan]you>[/bold cyan] {escape(prompt)}")
        if prompt in ("/exit", "/quit"):
            break
        if prompt == "/help":
            console.print(_HELP)
            continue
        if prompt == "/history":
            # Before the first run the agent has not restored the session yet.
            shown = agent.messages if agent.timeline else restored
            console.print(history_table("history", shown))
            continue
        if prompt.startswith("/"):
            console.print(f"[yellow]unknown command {prompt!r}[/yellow]; {_HELP}")
            continue
        try:
            await _answer(console, agent, prompt)
        except AgentError as exc:
            console.print()
            console.print(f"[bold red]error[/bold red] {escape(str(exc))}")
    if session is not None:
        console.print(f"[dim]session {session.session_id!r} saved[/dim]")
    return 0
