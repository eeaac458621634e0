"""Benchmark: FileMemory.save() latency against the bare minimum for the same bytes.

Run by hand (not part of the tests)::

    .venv/bin/python bench/memory_save.py [--sizes 10,100,1000] [--saves 300] [--dir PATH]

For each history size N, a FileMemory with ``max_messages=N`` is filled with N messages,
then each timed save appends one message (the window keeps the history at N). Beside it,
the *bare minimum* writes the very same document: serialise the whole history in one
pydantic call, write it to a unique temp file, fsync, rename over the target and fsync
the directory, inline in the calling thread, with no lock, no read-back and no checks.
The two are interleaved so disk noise hits both alike, and the final documents are
checked to be byte-identical. A third column runs the same bare minimum through
``asyncio.to_thread`` (as FileMemory must, to keep blocking I/O off the event loop): the
gap between the two bare columns is the price of the thread hop alone, and the ratio
against it is FileMemory's own overhead. The directory should be on the disk you care about (the
default is a temporary directory under the current one, not /tmp, which may be tmpfs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pydantic

from framework_agents import FileMemory, Message, ToolCall
from framework_agents.memory._window import window
from framework_agents.messages import MessageList

HEADER, FOOTER = b'{"version":1,"messages":', b"}"
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


def _text(i: int, words: int) -> str:
    return " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(words)).capitalize() + "."


def make_message(i: int) -> list[Message]:
    """Message(s) of turn ``i``: user and assistant texts, every 5th turn a tool call."""
    if i % 10 == 9:
        call = ToolCall(f"call-{i}", "search", {"query": _text(i, 6), "limit": 5})
        return [
            Message("assistant", "", tool_calls=[call], id=f"m{i}"),
            Message("tool", _text(i, 40), tool_call_id=call.id, name="search", id=f"m{i}-r"),
        ]
    role = "user" if i % 2 == 0 else "assistant"
    return [Message(role, _text(i, 12 if role == "user" else 45), id=f"m{i}")]


def bare_minimum(target: Path, history: list[Message]) -> None:
    """Serialise + write + fsync + rename + directory fsync, nothing else."""
    data = HEADER + MessageList.dump_json(history) + FOOTER
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    dfd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_size(root: Path, size: int, saves: int, warmup: int) -> dict[str, float]:
    """Time ``saves`` appends at a steady history of ``size`` messages."""
    ours_dir, bare_dir, hop_dir = (root / f"{kind}-{size}" for kind in ("file", "bare", "hop"))
    bare_dir.mkdir(parents=True)
    hop_dir.mkdir(parents=True)
    bare_target, hop_target = bare_dir / "memory.json", hop_dir / "memory.json"
    history: list[Message] = []
    turn = 0
    while len(history) < size:
        history.extend(make_message(turn))
        turn += 1
    history = window(history, size)
    memory = FileMemory(ours_dir, max_messages=size)
    await memory.replace(history)
    bare_minimum(bare_target, history)

    times: dict[str, list[float]] = {"ours": [], "bare": [], "hop": []}
    order = list(times)
    for i in range(warmup + saves):
        new = make_message(turn)
        turn += 1
        history = window([*history, *new], size)
        order = order[1:] + order[:1]  # rotate who goes first
        for name in order:
            start = time.perf_counter()
            if name == "ours":
                await memory.save(new)
            elif name == "bare":
                bare_minimum(bare_target, history)
            else:
                await asyncio.to_thread(bare_minimum, hop_target, history)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                times[name].append(elapsed)
    ours, bare, hop = times["ours"], times["bare"], times["hop"]

    if memory.path.read_bytes() != bare_target.read_bytes():
        raise SystemExit(f"size {size}: FileMemory and the bare minimum wrote different bytes")
    return {
        "bytes": float(bare_target.stat().st_size),
        "ours_p50": statistics.median(ours),
        "ours_p99": _percentile(ours, 0.99),
        "bare_p50": statistics.median(bare),
        "bare_p99": _percentile(bare, 0.99),
        "hop_p50": statistics.median(hop),
        "reparses": float(memory._reparses),
    }


def _filesystem(path: Path) -> str:
    best, fstype = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                parts = line.split()
                mount = parts[1]
                if str(path).startswith(mount) and len(mount) > len(best):
                    best, fstype = mount, parts[2]
    except OSError:
        pass
    return fstype


def main() -> None:
    """Parse arguments, run every size, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--saves", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--dir", default=None, help="where to write (default: temp dir in cwd)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix=".memory-bench-", dir=args.dir or os.getcwd()))
    try:
        print(
            f"python {platform.python_version()}, pydantic {pydantic.VERSION}, "
            f"{os.cpu_count()} cpus, {root} on {_filesystem(root.resolve())}, "
            f"{args.saves} saves per size (+{args.warmup} warm-up)\n"
        )
        head = (
            f"{'history':>8} {'doc KiB':>8} {'FileMemory p50':>15} {'p99':>9} "
            f"{'bare p50':>9} {'p99':>9} {'ratio p50':>10} {'ratio p99':>10} "
            f"{'bare+thread p50':>16} {'ratio':>6}"
        )
        print(head)
        print("-" * len(head))
        for size in sizes:
            r = asyncio.run(bench_size(root, size, args.saves, args.warmup))
            print(
                f"{size:>8} {r['bytes'] / 1024:>8.1f} {r['ours_p50'] * 1e3:>12.3f} ms "
                f"{r['ours_p99'] * 1e3:>6.3f} ms {r['bare_p50'] * 1e3:>6.3f} ms "
                f"{r['bare_p99'] * 1e3:>6.3f} ms {r['ours_p50'] / r['bare_p50']:>10.2f} "
                f"{r['ours_p99'] / r['bare_p99']:>10.2f} "
                f"{r['hop_p50'] * 1e3:>13.3f} ms {r['ours_p50'] / r['hop_p50']:>6.2f}"
            )
            if r["reparses"]:
                print(f"         (FileMemory re-parsed the file {int(r['reparses'])} times)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
