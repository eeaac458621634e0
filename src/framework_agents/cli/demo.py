"""``framework-agents demo``: the main job, shown step by step on the offline model.

1. Load SmolLM2-135M-Instruct into llama.cpp in this process (a spinner while it loads).
2. Process 1 talks to an agent whose :class:`SessionManager` keeps the conversation in a
   :class:`LocalFileStorage` under ``<data-dir>/sessions``; the snapshot on disk is shown.
3. Process 1 starts process 2 (this command again, ``--part 2``) and waits: a real restart.
4. Process 2 loads the model, finds the snapshot, and goes on with the same conversation.
   Its :class:`SlidingWindowConversationManager` (window 4, the first 2 messages pinned)
   trims the history once it grows past the window; the dropped messages are listed and
   the history is checked with ``is_well_formed``.
5. Back in process 1: the stored session is read again and checked.
6. Long-term memory: both processes also remembered each turn in a :class:`MemoryBank`
   under ``<data-dir>/bank``; a new conversation (no session, an empty history) asks
   what it learnt, and the recall message the model is given is shown and checked.

The model is tiny, so what it says is shown but never relied on: every check is about
structure (who wrote which message, what was kept, what was dropped, well-formedness),
and the command exits non-zero if a check fails.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from ..agent import Agent, MessageStartedEvent, RunFinishedEvent, RunResult, TextDeltaEvent
from ..bank import BankMemory, MemoryBank
from ..conversation import SlidingWindowConversationManager
from ..history import is_well_formed
from ..memory import InMemoryMemory
from ..messages import Message
from ..models import Model
from ..sessions import LocalFileStorage, SessionManager
from ._models import describe_model, make_model
from ._render import history_table, preview, start_model
from .chat import session_storage

__all__ = ["DEMO_SESSION", "PART_ONE", "PART_TWO", "PIN_FIRST", "WINDOW", "run_demo"]

DEMO_SESSION = "demo"
PIN_FIRST = 2
WINDOW = 4
SYSTEM_PROMPT = "You are a friendly assistant. Answer in one or two short sentences."
PART_ONE = ("Hi! My name is Ada and I study the stars.", "Name one planet of the solar system.")
PART_TWO = ("What is my name?", "Thank you, goodbye!")
#: The new conversation of step 6, and the namespace of the demo's long-term memory.
LATER = "What do I study?"
BANK_NAMESPACE = ("ada",)


def _bank(data_dir: Path) -> MemoryBank:
    return MemoryBank(data_dir / "bank")


def _agent(model: Model, session: SessionManager | None, bank: MemoryBank) -> Agent:
    memory = BankMemory(bank, InMemoryMemory(), namespace=BANK_NAMESPACE, k=3, episodes=True)
    return Agent(
        model,
        system_prompt=SYSTEM_PROMPT,
        memory=memory,
        session_manager=session,
        conversation_manager=SlidingWindowConversationManager(
            window_size=WINDOW, pin_first=PIN_FIRST
        ),
    )


async def _turn(console: Console, agent: Agent, prompt: str) -> RunResult:
    console.print(f"[bold cyan]you:[/bold cyan] {escape(prompt)}")
    started = time.perf_counter()
    result: RunResult | None = None
    printed = False
    async for event in agent.stream(prompt):
        if isinstance(event, MessageStartedEvent):
            console.print("[bold green]assistant:[/bold green] ", end="")
        elif isinstance(event, TextDeltaEvent):
            console.print(event.delta, end="", markup=False)
            printed = printed or bool(event.delta.strip())
        elif isinstance(event, RunFinishedEvent):
            result = event.result
    assert result is not None  # a stream without interrupt ends with RunFinished or raises
    if not printed:
        console.print("[dim](an empty answer)[/dim]", end="")
    console.print()
    console.print(
        f"[dim]  {time.perf_counter() - started:.2f} s, {result.usage.output_tokens} tokens; "
        f"history now {len(result.messages)} messages[/dim]"
    )
    return result


def _snapshot_path(storage_dir: Path) -> Path:
    return (
        storage_dir
        / "session"
        / DEMO_SESSION
        / "scopes"
        / "agent"
        / "default"
        / "snapshots"
        / "snapshot_latest.json"
    )


async def _clear(storage: LocalFileStorage) -> None:
    for key in await storage.list(f"session/{DEMO_SESSION}/"):
        await storage.delete(key)


def _check(console: Console, label: str, ok: bool) -> bool:
    mark = "[bold green]✓[/bold green]" if ok else "[bold red]✗[/bold red]"
    console.print(f"  {mark} {escape(label)}")
    return ok


async def _talk(
    console: Console, agent: Agent, session: SessionManager, storage_dir: Path
) -> list[Message]:
    """Process 1's conversation (step 2), shown with the snapshot it saved: that history."""
    for prompt in PART_ONE:
        await _turn(console, agent, prompt)
    snapshot = await session.load_latest()
    saved = list(snapshot.data.messages or []) if snapshot is not None else []
    path = _snapshot_path(storage_dir)
    size = path.stat().st_size if path.exists() else 0
    console.print(history_table("the history process 1 saved", saved))
    console.print(
        f"saved as [bold]{escape(str(path))}[/bold] ({size} bytes, {len(saved)} messages)"
    )
    return saved


async def _restart(console: Console, model_spec: str, data_dir: Path, max_tokens: int) -> int:
    """Step 3: run part two in a new process; its exit status."""
    console.rule("step 3: restart — a new process resumes the session")
    console.print("process 1 starts process 2 (this command with --part 2) and waits for it")
    command = [sys.executable, "-m", "framework_agents.cli", "demo", "--part", "2"]
    command += ["--model", model_spec, "--data-dir", str(data_dir)]
    command += ["--max-tokens", str(max_tokens)]
    child = await asyncio.create_subprocess_exec(*command)
    return await child.wait()


def _final_checks(
    console: Console, status: int, ours: list[str], saved: list[Message], final: list[Message]
) -> bool:
    """Step 5's checks of the stored session against what process 1 wrote (all shown)."""
    final_ids = [m.id for m in final]
    from_two = [m for m in final if m.id not in ours]
    checks = [
        _check(console, "process 2 finished its part and its own checks", status == 0),
        _check(console, "process 1 saved its 4 messages", [m.id for m in saved] == ours),
        _check(console, "the stored history is well formed", bool(final) and is_well_formed(final)),
        _check(
            console,
            f"the window held: {len(final)} <= {PIN_FIRST} pinned + {WINDOW}",
            0 < len(final) <= PIN_FIRST + WINDOW,
        ),
        _check(
            console,
            "the pinned first exchange (process 1) is still first",
            final_ids[:PIN_FIRST] == ours[:PIN_FIRST],
        ),
        _check(
            console,
            "the middle exchange was trimmed away",
            not set(ours[PIN_FIRST:]) & set(final_ids),
        ),
        _check(
            console,
            "messages of both processes are in one conversation",
            bool(from_two) and bool(set(ours) & set(final_ids)),
        ),
    ]
    return all(checks)


async def _part_one(console: Console, model_spec: str, data_dir: Path, max_tokens: int) -> int:
    storage_dir = data_dir / "sessions"
    console.rule("[bold]framework-agents demo[/bold]: memory and sessions that survive a restart")
    model = make_model(model_spec, max_tokens=max_tokens)
    console.print(
        Panel(
            f"model: {escape(describe_model(model))}\n"
            f"session {DEMO_SESSION!r} stored under {escape(str(storage_dir))}\n"
            f"context manager: sliding window of {WINDOW} messages, first {PIN_FIRST} pinned",
            title="setup",
            expand=False,
        )
    )
    storage = session_storage(data_dir)
    await _clear(storage)
    bank = _bank(data_dir)
    await bank.forget_namespace(BANK_NAMESPACE)

    console.rule("step 1: load the model")
    if await start_model(console, model) is None:
        console.print("[dim]this model has no weights to load[/dim]")

    console.rule(f"step 2: process 1 (pid {os.getpid()}) talks, with a session")
    session = SessionManager(DEMO_SESSION, storage)
    agent = _agent(model, session, bank)
    saved = await _talk(console, agent, session, storage_dir)
    ours = [m.id for m in agent.messages]

    status = await _restart(console, model_spec, data_dir, max_tokens)

    console.rule(f"step 5: back in process 1 (pid {os.getpid()}): the stored session")
    latest = await session.load_latest()
    final = list(latest.data.messages or []) if latest is not None else []

    def origin(msg: Message) -> str:
        return "process 1" if msg.id in ours else "process 2"

    console.print(history_table("what the session holds now", final, origin=origin))
    ok = _final_checks(console, status, ours, saved, final)
    ok = await _later(console, model, bank) and ok
    await bank.close()
    if ok:
        console.print(
            "[bold green]demo complete[/bold green]: the conversation survived a restart, "
            "and what it taught was recalled in a new one"
        )
        return 0
    console.print("[bold red]demo failed[/bold red]: see the checks above")
    return 1


async def _later(console: Console, model: Model, bank: MemoryBank) -> bool:
    """Step 6: a new conversation recalls what both processes remembered in the bank."""
    console.rule("step 6: a new conversation, no session: long-term memory recalls")
    episodes = await bank.list(BANK_NAMESPACE, kinds=["episode"])
    console.print(
        f"the bank under {escape(str(bank))} holds {len(episodes)} remembered turns "
        f"of namespace {BANK_NAMESPACE!r}"
    )
    agent = _agent(model, None, bank)
    memory = agent.memory
    assert isinstance(memory, BankMemory)
    recall = await memory.recall(LATER)
    console.print(
        Panel(escape(recall.text if recall else "(nothing recalled)"), title="recall", expand=False)
    )
    await _turn(console, agent, LATER)
    return all(
        [
            _check(console, "both processes' turns are in the bank", len(episodes) >= 8),
            _check(
                console,
                "the new conversation started empty and recalled the earlier one",
                recall is not None and "stars" in recall.text,
            ),
            _check(
                console,
                "the recall message was not stored in the history",
                not any(m.metadata.get("kind") == "recall" for m in agent.messages),
            ),
        ]
    )


def _dropped(before: Sequence[Message], result: RunResult) -> list[tuple[int, Message]]:
    kept = {m.id for m in result.messages}
    seen: list[Message] = list(before)
    known = {m.id for m in seen}
    seen += [m for m in result.new_messages if m.id not in known]
    return [(i, m) for i, m in enumerate(seen) if m.id not in kept]


async def _part_two(console: Console, model_spec: str, data_dir: Path, max_tokens: int) -> int:
    console.rule(f"step 4: process 2 (pid {os.getpid()}, started by pid {os.getppid()})")
    model = make_model(model_spec, max_tokens=max_tokens)
    await start_model(console, model)
    session = SessionManager(DEMO_SESSION, session_storage(data_dir))
    snapshot = await session.load_latest()
    if snapshot is None or not snapshot.data.messages:
        console.print("[bold red]no stored session found[/bold red]: nothing to resume")
        return 1
    restored = list(snapshot.data.messages)
    console.print(
        f"found {escape(str(_snapshot_path(data_dir / 'sessions')))}: "
        f"{len(restored)} messages saved by process 1; a fresh agent resumes from them"
    )
    bank = _bank(data_dir)
    agent = _agent(model, session, bank)
    ok = True
    before = restored
    for i, prompt in enumerate(PART_TWO):
        result = await _turn(console, agent, prompt)
        if i == 0:
            continued = [m.id for m in result.messages[: len(restored)]] == [m.id for m in restored]
            ok &= _check(console, "the agent started from process 1's messages", continued)
        dropped = _dropped(before, result)
        total = len(before) + len(result.new_messages)
        if dropped:
            console.print(
                f"[bold]context manager at work[/bold]: {total} messages > {PIN_FIRST} pinned "
                f"+ {WINDOW}, so the oldest unpinned ones were dropped "
                f"({total} → {len(result.messages)}):"
            )
            for index, msg in dropped:
                console.print(
                    f"  [dim]dropped #{index} {msg.role}: {escape(preview(msg.text))}[/dim]"
                )
            ok &= _check(
                console,
                "the first exchange stayed pinned",
                [m.id for m in result.messages[:PIN_FIRST]] == [m.id for m in restored[:PIN_FIRST]],
            )
        else:
            console.print(
                f"[dim]  within the window ({len(result.messages)} <= {PIN_FIRST} pinned "
                f"+ {WINDOW}): nothing dropped[/dim]"
            )
        ok &= _check(console, "the history is well formed", is_well_formed(result.messages))
        before = result.messages
    console.print(history_table("the history process 2 saved", agent.messages))
    await bank.close()
    return 0 if ok else 1


async def run_demo(
    console: Console, *, model_spec: str, data_dir: Path, max_tokens: int, part: int
) -> int:
    """Run one part of the demo (1 is the whole demo; it starts part 2 itself)."""
    if part == 2:
        return await _part_two(console, model_spec, data_dir, max_tokens)
    return await _part_one(console, model_spec, data_dir, max_tokens)
