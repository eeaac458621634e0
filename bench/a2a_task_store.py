"""The A2A task store: what its index costs a task's saves, and what it saves a ListTasks page.

Usage::

    PYTHONPATH=src python bench/a2a_task_store.py [--tasks 2000] [--chunks 50] [--dir PATH]

On a directory store (``LocalFileStorage``, fsync'd), two figures beside a baseline
measured in the same run:

* saves: one task's life as the SDK saves it (submitted, working, ``--chunks`` artifact
  chunks, completed) through :class:`StorageTaskStore`, against writing the record only
  (what the store did before it kept an index);
* a ListTasks page of 20 (all tasks, and one context) among ``--tasks`` tasks, against
  reading every record, filtering and sorting (the store before the index).

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2
from google.protobuf import json_format  # type: ignore[import-untyped]

from framework_agents import LocalFileStorage
from framework_agents.server._a2a_store import StorageTaskStore, sort_key

State = a2a_pb2.TaskState
Task = a2a_pb2.Task
PAGE = 20


def _task(task_id: str, context_id: str, state: int, at: int, chunk: int = 0) -> Task:
    made = Task(id=task_id, context_id=context_id)
    made.status.state = state  # type: ignore[assignment]
    made.status.timestamp.FromNanoseconds(at)
    if chunk:
        made.artifacts.add(artifact_id="answer").parts.add(text="token " * chunk)
    return made


def _life(task_id: str, context_id: str, chunks: int, start: int) -> list[Task]:
    states = [State.TASK_STATE_SUBMITTED, State.TASK_STATE_WORKING]
    life = [_task(task_id, context_id, s, start + i) for i, s in enumerate(states)]
    life += [_task(task_id, context_id, states[1], start + 1, c) for c in range(1, chunks + 1)]
    life.append(_task(task_id, context_id, State.TASK_STATE_COMPLETED, start + 2, chunks))
    return life


async def _record_only(storage: Any, task: Task) -> None:
    record = {"owner": "", "task": json_format.MessageToDict(task)}
    await storage.put(f"a2a/tasks/{task.id}.json", json.dumps(record).encode())


async def _scan_page(storage: Any, context_id: str | None) -> list[Task]:
    """The store before its index: read every record, filter, sort, cut."""
    tasks = []
    for key in await storage.list("a2a/tasks/"):
        raw = await storage.get(key)
        assert raw is not None
        task = json_format.ParseDict(json.loads(raw)["task"], Task())
        if context_id is None or task.context_id == context_id:
            tasks.append(task)
    tasks.sort(key=sort_key, reverse=True)
    return tasks[:PAGE]


async def _timed(coro: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await coro
    return time.perf_counter() - started, result


async def _saves(root: Path, chunks: int, lives: int) -> tuple[float, float]:
    store = StorageTaskStore(LocalFileStorage(root / "indexed"))
    plain = LocalFileStorage(root / "plain")
    ctx = ServerCallContext()
    indexed = baseline = 0.0
    for n in range(lives):
        life = _life(f"s{n}", f"c{n % 8}", chunks, n * 10)
        for task in life:
            baseline += (await _timed(_record_only(plain, task)))[0]
            indexed += (await _timed(store.save(task, ctx)))[0]
    per = lives * (chunks + 3)
    return indexed / per, baseline / per


async def _pages(root: Path, count: int) -> None:
    storage = LocalFileStorage(root / "many")
    store = StorageTaskStore(storage)
    ctx = ServerCallContext()
    for n in range(count):
        await store.save(_task(f"t{n:05d}", f"c{n % 20}", State.TASK_STATE_COMPLETED, n), ctx)
    fresh = StorageTaskStore(storage)  # a new process: its first listing checks once
    first, _ = await _timed(fresh.list(a2a_pb2.ListTasksRequest(page_size=PAGE), ctx))
    print(f"first ListTasks of a process (checks for unindexed records): {first * 1000:.1f} ms")
    for label, context_id in (("all tasks", None), ("one context", "c7")):
        request = a2a_pb2.ListTasksRequest(page_size=PAGE, context_id=context_id or "")
        paged, page = await _timed(fresh.list(request, ctx))
        scanned, expected = await _timed(_scan_page(storage, context_id))
        assert [t.id for t in page.tasks] == [t.id for t in expected]
        print(
            f"ListTasks page of {PAGE}, {label:11} among {count}: index {paged * 1000:7.1f} ms"
            f"   read-all baseline {scanned * 1000:7.1f} ms   ratio {paged / scanned:.3f}"
        )


async def main(tasks: int, chunks: int, directory: str | None) -> None:
    """Print both figures."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        root = Path(tmp)
        indexed, baseline = await _saves(root, chunks, lives=20)
        print(
            f"save (a life of {chunks + 3} saves): index {indexed * 1e6:7.0f} us/save"
            f"   record-only baseline {baseline * 1e6:7.0f} us/save"
            f"   ratio {indexed / baseline:.2f}"
        )
        await _pages(root, tasks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks in the store")
    parser.add_argument("--chunks", type=int, default=50, help="artifact chunks per task")
    parser.add_argument("--dir", help="where the temporary stores go (default: system temp)")
    args = parser.parse_args()
    asyncio.run(main(args.tasks, args.chunks, args.dir))
