"""Rich rendering shared by ``chat`` and ``demo``: histories, answers, model loading."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..messages import Message
from ..models import LocalModel, Model

__all__ = ["history_table", "make_console", "preview", "start_model"]

_ROLE_STYLES = {"user": "cyan", "assistant": "green", "tool": "magenta", "system": "yellow"}


def make_console(*, stderr: bool = False) -> Console:
    """A console: colours on a terminal, plain unwrapped text when piped."""
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, width=100, soft_wrap=True)
    return console


def preview(text: str, width: int = 70) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def history_table(
    title: str,
    messages: Sequence[Message],
    *,
    origin: Callable[[Message], str] | None = None,
) -> Table:
    """A table of a history: index, role, kind, text, calls; ``origin`` adds a column."""
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("role")
    if origin is not None:
        table.add_column("written by", style="dim")
    table.add_column("text")
    for i, msg in enumerate(messages):
        text = preview(msg.text) or ("(reasoning only)" if msg.reasoning else "")
        if msg.tool_calls:
            text += " " + ", ".join(f"→ {c.name}({c.args})" for c in msg.tool_calls)
        if msg.role == "tool":
            text = f"[{msg.name}] {text}"
        role = Text(msg.role + (f" <{msg.kind}>" if msg.kind else ""))
        role.stylize(_ROLE_STYLES.get(msg.role, ""))
        row: list[str | Text] = [str(i), role]
        if origin is not None:
            row.append(origin(msg))
        row.append(Text(text))
        table.add_row(*row)
    return table


async def start_model(console: Console, model: Model) -> float | None:
    """Start a model that loads weights (LocalModel) under a spinner; seconds taken."""
    if not isinstance(model, LocalModel):
        return None
    started = time.perf_counter()
    with console.status("Loading SmolLM2-135M-Instruct into llama.cpp…", spinner="dots"):
        await model.start()
    elapsed = time.perf_counter() - started
    console.print(
        f"[dim]model ready in {elapsed:.2f} s, serving the OpenAI protocol at "
        f"{model.base_url}[/dim]"
    )
    return elapsed
