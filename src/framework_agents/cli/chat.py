r"""``framework-agents chat``: an interactive conversation, line by line from stdin.

Reads one prompt per line, so it works at a terminal and behind a pipe
(``printf 'hi\n/exit\n' | framework-agents chat``). ``/exit`` (or ``/quit``) and end of
input end it; ``/history`` shows the stored history, ``/help`` the commands. With
``--session ID`` the conversation is kept by a :class:`SessionManager` in a
:class:`LocalFileStorage` under ``<data-dir>/sessions`` and resumed next time; with
``--store URL`` the sessions live in that store instead (``open_store``: a directory,
``sqlite:///<path>``, ``postgresql://...``, ``redis://...``), shared by every machine
that opens it.

Ctrl-C while the model answers stops that answer (the run is cancelled, so the history
stays as it was before the prompt) and the chat goes on; Ctrl-C at the prompt leaves at
once (exit status 130). Lines are read by a daemon thread, so leaving never waits for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from .._util import redact
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
from ..stores import open_store
from ._models import describe_model
from ._render import history_table, preview, start_model

__all__ = ["ChatOptions", "run_chat", "session_storage"]

_HELP = "commands: /history (show the stored history), /help, /exit (or /quit, or end of input)"


def session_storage(data_dir: Path) -> LocalFileStorage:
    """Where the command line keeps sessions: ``<data_dir>/sessions``."""
    return LocalFileStorage(data_dir / "sessions")


@dataclass(frozen=True, kw_only=True)
class ChatOptions:
    """What ``chat`` was asked for."""

    session_id: str | None
    data_dir: Path
    system_prompt: str | None
    window: int
    store: str | None = None


class _CtrlC:
    """Where Ctrl-C goes: the answer being written, else the prompt (which then leaves)."""

    def __init__(self) -> None:
        self.answer: asyncio.Task[None] | None = None
        self.reading: asyncio.Future[str | None] | None = None
        self.stopped = False  # the current answer was stopped by Ctrl-C
        self.leave = False  # Ctrl-C at the prompt

    def __call__(self) -> None:
        if self.answer is not None and not self.answer.done():
            self.stopped = True
            self.answer.cancel()
        else:
            self.leave = True
            if self.reading is not None and not self.reading.done():
                self.reading.set_result(None)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Route SIGINT here while the chat runs (where the loop supports signal handlers)."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self)
        except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not main thread
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


def _in_daemon_thread(read: Callable[[], str | None]) -> asyncio.Future[str | None]:
    """``read()`` in a daemon thread: a blocked read never keeps the process alive."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def settle(value: str | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value = read()
        except EOFError:
            loop.call_soon_threadsafe(settle, None, None)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=work, name="framework-agents-stdin", daemon=True).start()
    return future


async def _read_line(
    stdin: TextIO, console: Console, interactive: bool, ctrl_c: _CtrlC
) -> str | None:
    if interactive:
        future = _in_daemon_thread(lambda: console.input("[bold cyan]you>[/bold cyan] "))
    else:
        future = _in_daemon_thread(lambda: stdin.readline() or None)
    ctrl_c.reading = future
    try:
        return await future
    finally:
        ctrl_c.reading = None


async def _stoppable_answer(console: Console, agent: Agent, prompt: str, ctrl_c: _CtrlC) -> None:
    """Write one answer; Ctrl-C stops it (the agent keeps the history it had before)."""
    ctrl_c.stopped = False
    task = asyncio.create_task(_answer(console, agent, prompt))
    ctrl_c.answer = task
    try:
        await task
    except asyncio.CancelledError:
        if not (ctrl_c.stopped and task.cancelled()):
            raise  # the chat itself is being cancelled
        console.print()
        console.print("[yellow]answer stopped[/yellow] (Ctrl-C); the history is as before it")
    finally:
        ctrl_c.answer = None


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
    session: SessionManager | None = None
    store = open_store(options.store) if options.store is not None else None
    try:
        if options.session_id is not None:
            storage = store.storage if store is not None else session_storage(options.data_dir)
            session = SessionManager(options.session_id, storage)
        return await _chat(console, model, options, stdin, session)
    finally:
        if store is not None:
            await store.close()


async def _chat(
    console: Console,
    model: Model,
    options: ChatOptions,
    stdin: TextIO,
    session: SessionManager | None,
) -> int:
    interactive = stdin.isatty()
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
        where = redact(options.store) if options.store else options.data_dir / "sessions"
        if count:
            console.print(f"session {session.session_id!r}: resumed {count} messages from {where}")
        else:
            console.print(f"session {session.session_id!r}: new, kept under {where}")
    await start_model(console, model)
    console.print(f"[dim]{_HELP}[/dim]")
    ctrl_c = _CtrlC()
    with ctrl_c.installed():
        status = await _chat_loop(console, agent, stdin, interactive, restored, ctrl_c)
    if session is not None:
        console.print(f"[dim]session {session.session_id!r} saved[/dim]")
    return status


async def _chat_loop(
    console: Console,
    agent: Agent,
    stdin: TextIO,
    interactive: bool,
    restored: list[Message],
    ctrl_c: _CtrlC,
) -> int:
    while True:
        line = await _read_line(stdin, console, interactive, ctrl_c)
        if ctrl_c.leave:
            console.print()
            return 130
        if line is None:
            return 0
        prompt = line.strip()
        if not prompt:
            continue
        if not interactive:
            console.print(f"[bold cyan]you>[/bold cyan] {escape(prompt)}")
        if prompt in ("/exit", "/quit"):
            return 0
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
            await _stoppable_answer(console, agent, prompt, ctrl_c)
        except AgentError as exc:
            console.print()
            console.print(f"[bold red]error[/bold red] {escape(str(exc))}")
