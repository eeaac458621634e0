"""A printed walkthrough of memory and conversation managers (``make demo``).

Run with ``python -m framework_agents.demo``. It needs no model and no network: it builds
histories by hand and shows what the framework does with them. Every claim it prints is
computed, not assumed (``well formed: True`` comes from ``is_well_formed``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .conversation import SlidingWindowConversationManager, SummarizingConversationManager
from .history import is_well_formed, repair_history
from .memory import CompactedMemory, FileMemory, InMemoryMemory
from .messages import Message, ToolCall

__all__ = ["main"]


def _line(msg: Message, width: int = 60) -> str:
    """One message as a short line: role, kind, text, calls or the call it answers."""
    text = " ".join(msg.text.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    parts = [f"{msg.role:<9}"]
    if msg.kind:
        parts.append(f"<{msg.kind}>")
    if text:
        parts.append(repr(text))
    if msg.tool_calls:
        parts.append("calls " + ", ".join(f"{c.name}#{c.id}" for c in msg.tool_calls))
    if msg.role == "tool":
        parts.append(f"answers #{msg.tool_call_id}")
    return " ".join(parts)


class _Printer:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, text: str = "") -> None:
        print(text, file=self.out)

    def section(self, title: str) -> None:
        self()
        self(f"== {title} ==")

    def history(self, label: str, messages: Sequence[Message]) -> None:
        self(f"{label} ({len(messages)} messages):")
        for i, msg in enumerate(messages):
            self(f"  {i:>2}  {_line(msg)}")


def _tool_turn(n: int, city: str) -> list[Message]:
    """A user question answered through two tool calls."""
    a, b = f"w{n}", f"t{n}"
    return [
        Message("user", f"What is the weather and the time in {city}?"),
        Message(
            "assistant",
            "",
            tool_calls=[
                ToolCall(a, "weather", {"city": city}),
                ToolCall(b, "clock", {"city": city}),
            ],
        ),
        Message("tool", f"{city}: 18°C, light rain", tool_call_id=a, name="weather"),
        Message("tool", f"{city}: 14:05", tool_call_id=b, name="clock"),
        Message("assistant", f"In {city} it is 18°C with light rain; the local time is 14:05."),
    ]


async def _file_memory(say: _Printer, root: Path) -> None:
    say.section("1. Memory: FileMemory survives a restart; windows stay well formed")
    directory = root / "memory"
    first = FileMemory(directory, max_messages=50)
    await first.save([Message("user", "My name is Ada."), Message("assistant", "Hello Ada!")])
    await first.save([Message("user", "Remember: I like tea."), Message("assistant", "Noted.")])
    saved = await first.load()
    say(f"saved twice through one instance: {len(saved)} messages in {directory / 'memory.json'}")
    document = json.loads((directory / "memory.json").read_text(encoding="utf-8"))
    # The second save was appended to the journal beside memory.json (one record).
    say(f"on disk: version {document['version']}, {len(saved)} messages")

    restarted = FileMemory(directory, max_messages=50)  # a new process would do the same
    loaded = await restarted.load()
    same = [m.id for m in loaded] == [m.id for m in saved]
    say(f"restarted: a new FileMemory loaded {len(loaded)} messages, same ids: {same}")
    say.history("loaded", loaded)

    window = InMemoryMemory(max_messages=4)
    await window.save([*_tool_turn(1, "Oslo"), Message("user", "Thanks!")])
    kept = await window.load()
    say(
        f"InMemoryMemory(max_messages=4) after saving 6: {len(kept)} kept (the window never "
        f"opens on a tool result), well formed: {is_well_formed(kept)}"
    )
    say.history("kept", kept)

    compacted = CompactedMemory(InMemoryMemory(max_messages=100), max_messages=6)
    for n, city in enumerate(["Paris", "Rome"]):
        await compacted.save(_tool_turn(n, city))
    history = await compacted.load()
    say(
        f"CompactedMemory(max_messages=6) after 10 messages: {len(history)} stored, "
        f"first is <{history[0].kind}>, well formed: {is_well_formed(history)}"
    )


async def _sliding(say: _Printer) -> None:
    say.section("2. SlidingWindowConversationManager: a pin and a tool-heavy history")
    history = [Message("system", "You are a concise travel assistant.")]
    for n, city in enumerate(["Paris", "Rome", "Lisbon", "Tokyo"]):
        history += _tool_turn(n, city)
    manager = SlidingWindowConversationManager(window_size=7, pin_first=1)
    say(f"{manager!r}")
    say(f"input: {len(history)} messages, well formed: {is_well_formed(history)}")
    kept = await manager.apply(history)
    say.history("after apply", kept)
    say(f"pinned system message kept: {kept[0] is history[0]}")
    say(f"well formed: {is_well_formed(kept)}")
    naive = history[1:][-manager.window_size :]
    say(
        f"(a plain slice of the newest {manager.window_size} would open on a {naive[0].role} "
        f"message; the cut moved to the next group boundary instead)"
    )
    reduced = await manager.reduce(kept)
    say(
        f"reduce() dropped at least half of the unpinned: {len(kept) - 1} -> {len(reduced) - 1}, "
        f"well formed: {is_well_formed(reduced)}"
    )


async def _summarizing(say: _Printer) -> None:
    say.section("3. SummarizingConversationManager: reduce and last_summary")
    history: list[Message] = []
    for n, city in enumerate(["Paris", "Rome", "Lisbon"]):
        history += _tool_turn(n, city)
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent=5)
    say(f"{manager!r}")
    reduced = await manager.reduce(history)
    say(
        f"reduce(): {len(history)} -> {len(reduced)} messages, "
        f"well formed: {is_well_formed(reduced)}"
    )
    say.history("after reduce", reduced)
    say("last_summary:")
    for text in (manager.last_summary or "").splitlines():
        say(f"  | {text}")
    again = await manager.reduce([*reduced, *_tool_turn(3, "Tokyo")])
    summaries = sum(m.kind == "summary" for m in again)
    say(
        f"a second reduce rolls the first summary into the next: {summaries} summary message, "
        f"mentions Paris: {'Paris' in (manager.last_summary or '')}"
    )


async def _repair(say: _Printer) -> None:
    say.section("4. repair_history: a history with an interrupted call")
    history = [
        Message("user", "Book a table for two and tell me the weather."),
        Message(
            "assistant",
            "",
            tool_calls=[
                ToolCall("b1", "book_table", {"people": 2}),
                ToolCall("w1", "weather", {"city": "Paris"}),
            ],
        ),
        Message("tool", "Paris: sunny", tool_call_id="w1", name="weather"),
        # The process was killed while book_table ran: b1 never got a result.
        Message("tool", "a stale result from another run", tool_call_id="old", name="weather"),
        Message("user", "Hello? Did it work?"),
    ]
    say.history("before", history)
    say(f"well formed: {is_well_formed(history)}")
    repaired = repair_history(history)
    say.history("after repair_history", repaired)
    added = [m for m in repaired if m.kind == "interrupted"]
    dropped = [m for m in history if m not in repaired]
    say(
        f"well formed: {is_well_formed(repaired)}; added {len(added)} interrupted result "
        f"(for #{added[0].tool_call_id}), dropped {len(dropped)} orphaned result"
    )
    say(f"idempotent: {repair_history(repaired) == repaired}")


async def _run(out: TextIO) -> None:
    say = _Printer(out)
    say("framework-agents demo: memory and conversation managers (no model needed)")
    with tempfile.TemporaryDirectory(prefix="framework-agents-demo-") as tmp:
        await _file_memory(say, Path(tmp))
    await _sliding(say)
    await _summarizing(say)
    await _repair(say)
    say()
    say("done.")


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the walkthrough, printing to ``out`` (stdout by default); returns the exit code."""
    del argv  # no options yet
    asyncio.run(_run(out if out is not None else sys.stdout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
