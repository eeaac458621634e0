"""Benchmark: does a save cost what is new? Per-turn saves up to ``--turns`` (run by hand).

One conversation (user ~200 chars, assistant ~400, a tool call every third turn), one
save per turn, for each store:

* ``memory``: ``FileMemory(max_messages=10**7).save(new messages of the turn)``;
* ``session``: ``SessionManager(..., append=False)`` over ``LocalFileStorage``: every
  ``save_latest`` rewrites the whole snapshot (the opt-out, for contrast; measured in a
  pass of its own, with its own baselines, so its writes do not slow the others);
* ``session_append``: the same with ``SessionManager(..., append=True)``, the default
  (deltas);
* ``checkpoint``: ``FileCheckpointer.save`` of the thread (same message objects);
* ``agent``: ``Agent.run`` of the turn with a ``FileCheckpointer`` (load + loop + save);

and, in the same run (every store saves turn ``i`` before any saves turn ``i + 1``, in
rotating order, so a shared machine's noise falls on all alike), four baselines fed the same
per-turn bytes:

* ``append``: append + ``fdatasync`` of the turn's JSON (the physical floor);
* ``append_thread``: the same append made in a worker thread (``asyncio.to_thread``),
  as an event loop must make blocking I/O (the floor of an async store);
* ``sqlite``: an append-only SQLite table of JSON rows, ``synchronous=FULL``, one
  transaction per turn (what the fastest durable peer does), run inline;
* ``sqlite_thread``: the same, run as that peer runs it (the OpenAI Agents SDK's
  ``SQLiteSession.add_items`` inserts and commits in ``asyncio.to_thread``).

Before each turn ``gc.freeze()`` moves every existing object out of the collector's reach,
so a collection's cost does not grow with what the harness keeps alive. Prints p50/p99
(ms) over the 20 saves ending at turns 10, 100, 1,000, 3,000 and 10,000 (those reached), the ratio
of each store's p50 to the append and SQLite baselines, its growth (last mark over t=10,
and that over the floor's own growth in the run), and bytes written
(``/proc/self/io``: ``wchar`` and ``write_bytes``) per payload byte. Then loads a
10,000-message history with FileMemory, a session's ``load_latest`` and
``FileCheckpointer.load`` against SQLite rows read back with ``json.loads`` per row, in
rounds that time each once, back to back: median time, the median of the rounds' own
ratios, and peak memory (tracemalloc) ratios. The baseline is timed twice: inline, and
in a worker thread under its own ``asyncio.run`` (the issue's baseline, paying what
every loader here pays: a new event loop and a hand-off to a worker); the ratios are
given against both. The harness's objects are frozen first
(``gc.freeze()``, as in the growth part) so that neither side pays for collections
traversing what the harness keeps alive.

Usage: ``.venv/bin/python bench/persist_growth.py [--turns 3000] [--dir PATH]
[--only memory,checkpoint]``. Use a directory on a real disk (not tmpfs) for fsync figures.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from framework_agents import (
    Agent,
    FileCheckpointer,
    FileMemory,
    LocalFileStorage,
    Message,
    NullConversationManager,
    SessionManager,
    Snapshot,
    ThreadCheckpoint,
    ToolCall,
    tool,
)
from framework_agents.messages import MessageList
from framework_agents.testing import FunctionModel

MARKS = (10, 100, 1000, 3000, 10000)
BASELINES = ("append", "append_thread", "sqlite", "sqlite_thread")
WINDOW = 20
LOAD_ROUNDS = 9
_WORDS = [
    "the",
    "agent",
    "keeps",
    "its",
    "memory",
    "durable",
    "and",
    "well",
    "formed",
    "across",
    "restarts",
    "and",
    "crashes",
]


@functools.lru_cache(maxsize=4096)
def _text(i: int, chars: int) -> str:
    out: list[str] = []
    k = i
    size = 0  # the words' lengths plus one separator each
    while size < chars:
        word = _WORDS[k % len(_WORDS)]
        out.append(word)
        size += len(word) + 1
        k += 1
    return " ".join(out)


def turn_messages(i: int) -> list[Message]:
    """The messages turn ``i`` adds (a tool call every third turn)."""
    user = Message("user", _text(i, 200), id=f"u{i}")
    if i % 3 == 2:
        call = ToolCall(f"c{i}", "lookup", {"query": _text(i, 40)})
        return [
            user,
            Message("assistant", "", tool_calls=[call], id=f"a{i}"),
            Message("tool", _text(i + 1, 120), tool_call_id=call.id, name="lookup", id=f"t{i}"),
            Message("assistant", _text(i + 2, 400), id=f"f{i}"),
        ]
    return [user, Message("assistant", _text(i + 3, 400), id=f"f{i}")]


def _io() -> tuple[int, int]:
    fields = dict(
        line.split(": ") for line in Path("/proc/self/io").read_text().splitlines() if ": " in line
    )
    return int(fields["wchar"]), int(fields["write_bytes"])


Step = Callable[[int, list[Message], list[Message]], Awaitable[None]]


async def _run_all(
    turns: int, steps: dict[str, Step]
) -> dict[str, tuple[list[float], int, int, int]]:
    """Every store saves turn ``i`` before any saves turn ``i + 1`` (rotating who goes
    first), so noise from a shared machine falls on all of them alike."""
    history: list[Message] = []
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    io = {name: [0, 0] for name in names}
    payload = 0
    for i in range(turns):
        new = turn_messages(i)
        history.extend(new)
        payload += len(MessageList.dump_json(new))
        names = names[1:] + names[:1]
        # Collections would otherwise grow with the objects the harness keeps (its own
        # history, the agent's, every store's): freeze what exists before the turn.
        gc.freeze()
        for name in names:
            w0, b0 = _io()
            start = time.perf_counter()
            await steps[name](i, new, history)
            times[name].append(time.perf_counter() - start)
            w1, b1 = _io()
            io[name][0] += w1 - w0
            io[name][1] += b1 - b0
    return {name: (times[name], payload, io[name][0], io[name][1]) for name in steps}


def store_steps(root: Path) -> dict[str, Step]:
    """One step function per store and baseline, each writing under its own directory."""
    root.mkdir(parents=True, exist_ok=True)
    memory = FileMemory(root / "memory", max_messages=10**7)
    session = SessionManager("s1", LocalFileStorage(root / "sessions"), append=False)
    appending = SessionManager("s2", LocalFileStorage(root / "sessions"), append=True)
    cp = FileCheckpointer(root / "checkpoints")
    (root / "append").mkdir()
    fd = os.open(root / "append" / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    db = sqlite3.connect(root / "sqlite.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE messages (seq INTEGER PRIMARY KEY, body TEXT)")

    async def memory_step(i: int, new: list[Message], history: list[Message]) -> None:
        await memory.save(new)

    # Snapshots are built as the agent builds them: the manager checks only the messages
    # it has not stored, and the data holds the history list itself (the agent's, which
    # it never changes; the harness's grows after the save, which no longer needs it).
    async def session_step(i: int, new: list[Message], history: list[Message]) -> None:
        data = session.snapshot_data(history, {"turn": i}, owned=True)
        await session.save_latest(Snapshot(data))

    async def session_append_step(i: int, new: list[Message], history: list[Message]) -> None:
        data = appending.snapshot_data(history, {"turn": i}, owned=True)
        await appending.save_latest(Snapshot(data))

    async def checkpoint_step(i: int, new: list[Message], history: list[Message]) -> None:
        await cp.save(ThreadCheckpoint("t1", None, history, {"turn": i}))

    async def append_step(i: int, new: list[Message], history: list[Message]) -> None:
        os.write(fd, MessageList.dump_json(new) + b"\n")
        os.fdatasync(fd)

    # The same append made the way an event loop must make blocking I/O: in a worker
    # thread (asyncio.to_thread). Every store here pays one such hand-off per save.
    afd = os.open(root / "append" / "log_thread", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append_sync(data: bytes) -> None:
        os.write(afd, data)
        os.fdatasync(afd)

    async def append_thread_step(i: int, new: list[Message], history: list[Message]) -> None:
        await asyncio.to_thread(append_sync, MessageList.dump_json(new) + b"\n")

    async def sqlite_step(i: int, new: list[Message], history: list[Message]) -> None:
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO messages (body) VALUES (?)", [(m.model_dump_json(),) for m in new]
        )
        db.execute("COMMIT")

    # The same rows as the OpenAI Agents SDK's SQLiteSession.add_items writes them: the
    # insert and commit in asyncio.to_thread (its own connection, as a thread needs).
    tdb = sqlite3.connect(root / "sqlite_thread.db", isolation_level=None, check_same_thread=False)
    tdb.execute("PRAGMA journal_mode=WAL")
    tdb.execute("PRAGMA synchronous=FULL")
    tdb.execute("CREATE TABLE messages (seq INTEGER PRIMARY KEY, body TEXT)")

    def sqlite_insert(rows: list[tuple[str]]) -> None:
        tdb.execute("BEGIN")
        tdb.executemany("INSERT INTO messages (body) VALUES (?)", rows)
        tdb.execute("COMMIT")

    async def sqlite_thread_step(i: int, new: list[Message], history: list[Message]) -> None:
        await asyncio.to_thread(sqlite_insert, [(m.model_dump_json(),) for m in new])

    agent_cp = FileCheckpointer(root / "agent")
    # FunctionModel records every call with a copy of the history it was given: keep only
    # the last, or the harness would hold turns x history references by the end.
    model = FunctionModel(_agent_reply, calls=deque(maxlen=1))  # type: ignore[arg-type]
    agent = Agent(model, tools=[lookup], conversation_manager=NullConversationManager())

    async def agent_step(i: int, new: list[Message], history: list[Message]) -> None:
        _TURN[0] = i + 1
        await agent.run(_text(i, 200), checkpointer=agent_cp, thread_id="t1")

    return {
        "append": append_step,
        "append_thread": append_thread_step,
        "sqlite": sqlite_step,
        "sqlite_thread": sqlite_thread_step,
        "memory": memory_step,
        "checkpoint": checkpoint_step,
        "session": session_step,
        "session_append": session_append_step,
        "agent": agent_step,
    }


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return _text(len(query), 120)


#: The turn the agent step is running: the scripted model's reply depends on it alone (a
#: model that counted the history's user turns would cost the harness O(history) per call).
_TURN = [0]


def _agent_reply(messages: list[Message], tools: Any) -> Message | str:
    turn = _TURN[0]
    last = messages[-1]
    if turn % 3 == 0 and last.role == "user":
        return Message("assistant", "", tool_calls=[ToolCall(f"c{turn}", "lookup", {"query": "q"})])
    return _text(turn, 400)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def _marks(times: list[float]) -> dict[int, tuple[float, float]]:
    out = {}
    for mark in MARKS:
        if mark <= len(times):
            window = times[max(0, mark - WINDOW) : mark]
            out[mark] = (_pct(window, 0.5), _pct(window, 0.99))
    return out


async def growth(root: Path, turns: int, only: set[str]) -> None:
    """Per-turn save latency and bytes written for every store."""
    steps = {
        name: step for name, step in store_steps(root).items() if name in only or name in BASELINES
    }
    results: dict[str, tuple[dict[int, tuple[float, float]], float, float]] = {}
    for name, (times, payload, wchar, wbytes) in (await _run_all(turns, steps)).items():
        results[name] = (_marks(times), wchar / payload, wbytes / payload)
    base_append, base_sqlite = results["append"][0], results["sqlite"][0]
    base_thread, base_sqlite_thread = results["append_thread"][0], results["sqlite_thread"][0]
    print(f"turns={turns}  p50/p99 ms over the {WINDOW} saves ending at each turn")
    head = "store         " + "".join(f"{'t=' + str(m):>18}" for m in MARKS if m <= turns)
    print(
        head + "   x append  (at t=10)  x thread   x sqlite  x sqlite_thread   t_last/t_10"
        "  / floor's   wchar/payload  write_bytes/payload"
    )
    for name, (marks, wchar, wbytes) in results.items():
        cells = "".join(f"{p50:>9.2f}/{p99:<8.2f}" for p50, p99 in marks.values())
        last = max(marks)
        ratio_a = marks[last][0] / base_append[last][0]
        ratio_a10 = marks[10][0] / base_append[10][0]
        ratio_t = marks[last][0] / base_thread[last][0]
        ratio_s = marks[last][0] / base_sqlite[last][0]
        ratio_st = marks[last][0] / base_sqlite_thread[last][0]
        growth_ratio = marks[last][0] / marks[10][0]
        # The same growth over the floor's own in this run (a busier machine at the end
        # of the run slows every store alike; the target is the plain growth).
        floor_growth = base_append[last][0] / base_append[10][0]
        print(
            f"{name:<14}{cells}   {ratio_a:8.2f}   {ratio_a10:8.2f}   {ratio_t:8.2f}"
            f"   {ratio_s:8.2f}   {ratio_st:14.2f}   {growth_ratio:11.2f}"
            f"  {growth_ratio / floor_growth:8.2f}"
            f"   {wchar:13.2f}  {wbytes:19.2f}"
        )


def load_10k(root: Path) -> None:
    """Load 10,000 messages: FileMemory against SQLite rows + ``json.loads`` per row."""
    history: list[Message] = []
    i = 0
    while len(history) < 10_000:
        history.extend(turn_messages(i))
        i += 1
    history = history[:10_000]

    async def fill() -> None:
        memory = FileMemory(root / "load-memory", max_messages=10**7)
        for k in range(0, len(history), 50):  # saves of a few turns each, as a session would
            await memory.save(history[k : k + 50])

    async def fill_others() -> None:
        session = SessionManager("s", LocalFileStorage(root / "load-sessions"))
        await session.save_latest(Snapshot(session.snapshot_data(history, {"k": 1})))
        await FileCheckpointer(root / "load-checkpoints").save(
            ThreadCheckpoint("t1", None, history, {"k": 1})
        )

    asyncio.run(fill())
    asyncio.run(fill_others())
    db = sqlite3.connect(root / "load.db", check_same_thread=False)
    db.execute("CREATE TABLE messages (seq INTEGER PRIMARY KEY, body TEXT)")
    db.executemany(
        "INSERT INTO messages (body) VALUES (?)", [(m.model_dump_json(),) for m in history]
    )
    db.commit()

    def sqlite_load() -> list[Any]:
        return [json.loads(row[0]) for row in db.execute("SELECT body FROM messages ORDER BY seq")]

    async def sqlite_worker() -> list[Any]:
        return await asyncio.to_thread(sqlite_load)

    async def ours() -> list[Message]:
        return await FileMemory(root / "load-memory", max_messages=10**7).load()

    # The loaders return the messages, not the snapshot or checkpoint: asyncio.run (3.11)
    # formats its task's repr, result included, when it ends, and a pydantic model's repr
    # of 10,000 messages costs more than the load.
    async def session_load() -> list[Message]:
        snapshot = await SessionManager("s", LocalFileStorage(root / "load-sessions")).load_latest()
        assert snapshot is not None and snapshot.data.messages is not None
        return snapshot.data.messages

    async def checkpoint_load() -> list[Message]:
        checkpoint = await FileCheckpointer(root / "load-checkpoints").load("t1")
        assert checkpoint is not None
        return checkpoint.messages

    # The machine is shared and noisy: every round times the SQLite baseline and each
    # loader once, back to back (rotating who goes first), and the ratio reported is the
    # median of the rounds' own ratios (a paired comparison), not a ratio of medians
    # taken minutes apart.
    gc.collect()
    gc.freeze()
    loaders: dict[str, Callable[[], Any]] = {
        "SQLite+json.loads": sqlite_load,
        "SQLite+json.loads, worker": lambda: asyncio.run(sqlite_worker()),
        "FileMemory": lambda: asyncio.run(ours()),
        "sessions (load_latest)": lambda: asyncio.run(session_load()),
        "FileCheckpointer.load": lambda: asyncio.run(checkpoint_load()),
    }
    names = list(loaders)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(LOAD_ROUNDS):
        for name in names:
            start = time.perf_counter()
            loaders[name]()
            times[name].append((time.perf_counter() - start) * 1000)
        names = names[1:] + names[:1]
    peaks = {}
    for name, fn in loaders.items():
        # As in the growth part: what the harness keeps alive (the 10,000 messages above)
        # is moved out of the collector's reach, so neither side pays for traversing it.
        tracemalloc.start()
        fn()
        peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    _report_loads(times, peaks, ("SQLite+json.loads", "SQLite+json.loads, worker"))


def _report_loads(
    times: dict[str, list[float]], peaks: dict[str, float], bases: tuple[str, ...]
) -> None:
    """Each loader's median time and peak, and its ratios to each baseline (paired rounds)."""
    for base in bases:
        t_sql, peak_sql = statistics.median(times[base]), peaks[base]
        print(
            f"load 10,000 messages ({LOAD_ROUNDS} rounds), against {base}: {t_sql:.1f} ms, "
            f"peak {peak_sql:.1f} MiB"
        )
        for name in times:
            if name in bases:
                continue
            ratios = [ours / sql for ours, sql in zip(times[name], times[base], strict=True)]
            print(
                f"  {name:<24} {statistics.median(times[name]):6.1f} ms "
                f"(x{statistics.median(ratios):.2f}, "
                f"rounds x{min(ratios):.2f}-x{max(ratios):.2f}); "
                f"peak {peaks[name]:.1f} MiB (x{peaks[name] / peak_sql:.2f})"
            )


def main() -> None:
    """Parse arguments and run both parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--only", default="memory,checkpoint,session,session_append,agent")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="persist-growth-", dir=args.dir))
    only = set(args.only.split(","))
    # The rewrite mode writes the whole history every turn (megabytes a turn at the end):
    # beside the others it would slow their fdatasyncs and caches, so it gets a pass of
    # its own, with its own baselines.
    passes = [only - {"session"}, only & {"session"}]
    try:
        for part, stores in enumerate(p for p in passes if p):
            asyncio.run(growth(root / f"pass{part}", args.turns, stores))
        load_10k(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
