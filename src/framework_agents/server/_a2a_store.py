"""A2A tasks in our ``Storage``: one record per task, and name-only indexes to page them.

Layout (``<o>`` is a digest of the owner, ``<c>`` a digest of the context id)::

    a2a/tasks/<task_id>.json                      {"owner", "task"} (the task as JSON)
    a2a/owners/<o>/<stamp>.<state>.<task_id>      empty: the owner's tasks
    a2a/contexts/<o>/<c>/<stamp>.<state>.<task_id>  empty: the owner's tasks in a context

``<stamp>`` is the status timestamp in nanoseconds (20 digits) or ``none``, ``<state>``
the ``TaskState`` number. ListTasks lists the names under the owner's (or the owner's
context's) prefix, which carry everything it sorts and filters on (newest status first,
then task id, as the SDK's cursor orders them; state; ``status_timestamp_after``) and
the total, cuts the page after the cursor and reads only the page's records. A save
moves a task's index entries only when its status timestamp or state changed, so the
many saves of a streaming answer (artifact chunks) write only the record; the entries a
task has are remembered per process (:data:`_REMEMBERED` tasks) and otherwise read from
its previous record. A save writes the new entries before the record and drops the old
ones after it, so a save cut short by a crash leaves at worst an entry too many, never a
record without one. Records written before the indexes existed are entered by a store's
first listing (once per process; a replica still running the older code during an
upgrade writes records the running servers list only after their restart).

A page trusts the records it reads, not the names: a record that no longer passes the
filters (changed by another replica since its entry was written) is skipped and the page
filled from the next names, and one that the page met stale is not counted in the
total. A task left with two entries (a save cut short, or two replicas saving it at
once) is listed once, under the entry its record names (read for such tasks only). A
listing never removes entries: a save may be half-way.
"""

from __future__ import annotations

import os

# The SDK reads this when it is first imported: its spans stay off unless asked for.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import builtins
import hashlib
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    decode_list_tasks_cursor,
    encode_list_tasks_cursor,
)
from google.protobuf import json_format  # type: ignore[import-untyped]

__all__ = ["StorageTaskStore"]

logger = logging.getLogger(__name__)

Task = a2a_pb2.Task
#: States of a task a run may have died in (a task is saved as it was before the run
#: took it: a decision's task may still read input-required when its call starts).
_OPEN = frozenset(
    {
        a2a_pb2.TaskState.TASK_STATE_SUBMITTED,
        a2a_pb2.TaskState.TASK_STATE_WORKING,
        a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED,
    }
)

TASKS = "a2a/tasks/"
OWNERS = "a2a/owners/"
CONTEXTS = "a2a/contexts/"
_PAGE_SIZE = 50
#: Tasks whose index entries a store remembers (the rest are read from their record).
_REMEMBERED = 4096
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_ENTRY = re.compile(r"(\d{20}|none)\.(\d{1,4})\.([A-Za-z0-9][A-Za-z0-9_-]{0,127})")


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def sort_key(task: Task) -> tuple[bool, int, str]:
    """``(has timestamp, timestamp ns, id)``: tasks are listed by it, largest first."""
    stamped = task.HasField("status") and task.status.HasField("timestamp")
    return (stamped, task.status.timestamp.ToNanoseconds() if stamped else 0, task.id)


@dataclass(frozen=True, slots=True)
class _Entry:
    """What an index entry's name says about a task."""

    stamped: bool
    nanos: int
    state: int
    task_id: str

    @property
    def key(self) -> tuple[bool, int, str]:
        return (self.stamped, self.nanos, self.task_id)

    @property
    def name(self) -> str:
        stamp = f"{self.nanos:020d}" if self.stamped else "none"
        return f"{stamp}.{self.state}.{self.task_id}"

    @staticmethod
    def parse(name: str) -> _Entry | None:
        found = _ENTRY.fullmatch(name)
        if found is None:
            return None
        stamp, state, task_id = found.groups()
        stamped = stamp != "none"
        return _Entry(stamped, int(stamp) if stamped else 0, int(state), task_id)

    @staticmethod
    def of(task: Task) -> _Entry:
        stamped, nanos, task_id = sort_key(task)
        return _Entry(stamped, nanos, int(task.status.state), task_id)


def _index_keys(owner: str, task: Task) -> tuple[str, ...]:
    """The keys of ``task``'s index entries."""
    name = _Entry.of(task).name
    keys = [_list_prefix(owner, "") + name]
    if task.context_id:
        keys.append(_list_prefix(owner, task.context_id) + name)
    return tuple(keys)


def _passes(task: Task, params: a2a_pb2.ListTasksRequest) -> bool:
    """Whether a task read from its record still passes the listing's filters."""
    if params.context_id and task.context_id != params.context_id:
        return False
    if params.status and task.status.state != params.status:
        return False
    return not (
        params.HasField("status_timestamp_after")
        and sort_key(task)[1] < params.status_timestamp_after.ToNanoseconds()
    )


def _by_task(names: list[str]) -> dict[str, list[_Entry]]:
    """The entries ``names`` hold, by task id (two for one task: a save cut short)."""
    found: dict[str, list[_Entry]] = {}
    for name in names:
        entry = _Entry.parse(name.rsplit("/", 1)[-1])
        if entry is not None:
            found.setdefault(entry.task_id, []).append(entry)
    return found


def _filtered(entries: list[_Entry], params: a2a_pb2.ListTasksRequest) -> list[_Entry]:
    """The entries that pass the listing's state and time filters, newest first."""
    after = (
        params.status_timestamp_after.ToNanoseconds()
        if params.HasField("status_timestamp_after")
        else None
    )
    kept = [
        e
        for e in entries
        if (not params.status or e.state == params.status) and (after is None or e.nanos >= after)
    ]
    kept.sort(key=lambda e: e.key, reverse=True)
    return kept


class StorageTaskStore(TaskStore):
    """A2A tasks in our ``Storage`` (see the module docstring for the layout)."""

    def __init__(
        self,
        storage: Any,
        revive: Callable[[Task], Awaitable[Task | None]] | None = None,
    ) -> None:
        """Keep tasks in ``storage``.

        ``revive``: given a task read in a state a run may have died in, the task as it
        stands now when that run died (then saved), else ``None``.
        """
        self.storage = storage
        self.revive = revive
        self._entries: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._entered = False

    @staticmethod
    def _key(task_id: str) -> str | None:
        # Task ids are the SDK's UUIDs or a client's: only safe single names become keys.
        return f"{TASKS}{task_id}.json" if _TASK_ID.fullmatch(task_id) else None

    def _remember(self, task_id: str, keys: tuple[str, ...]) -> None:
        self._entries[task_id] = keys
        self._entries.move_to_end(task_id)
        while len(self._entries) > _REMEMBERED:
            self._entries.popitem(last=False)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save ``task`` for the caller's owner (its index entries move if it changed)."""
        key = self._key(task.id)
        if key is None:
            raise InvalidParamsError(f"task id {task.id!r:.80} is not a safe name")
        owner = resolve_user_scope(context)
        old = self._entries.get(task.id)
        if old is None:
            found = await self._read(key)
            old = _index_keys(*found) if found is not None else ()
        new = _index_keys(owner, task)
        for entry in new:  # entries first: a cut-short save leaves no record unlisted
            if entry not in old:
                await self.storage.put(entry, b"")
        record = {"owner": owner, "task": json_format.MessageToDict(task)}
        await self.storage.put(key, json.dumps(record).encode())
        await self._drop(old, keep=new)
        self._remember(task.id, new)

    async def _drop(self, entries: tuple[str, ...], keep: tuple[str, ...] = ()) -> None:
        for entry in entries:
            if entry not in keep:
                await self.storage.delete(entry)

    async def _read(self, key: str) -> tuple[str, Task] | None:
        raw = await self.storage.get(key)
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            task = json_format.ParseDict(record["task"], Task())
        except (ValueError, KeyError, TypeError, json_format.ParseError):
            logger.error("unreadable A2A task record %s; left untouched", key)
            return None
        return str(record.get("owner", "")), task

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task, if the caller's owner has it."""
        key = self._key(task_id)
        found = await self._read(key) if key else None
        if found is None or found[0] != resolve_user_scope(context):
            return None
        task = found[1]
        if self.revive is not None and task.status.state in _OPEN:
            revived = await self.revive(task)
            if revived is not None:
                await self.save(revived, context)
                return revived
        return task

    async def _enter_missing(self) -> None:
        """Index the records that have no owner entry (written before the index existed).

        Once per store: every save since writes its entries before its record.
        """
        if self._entered:
            return
        records = await self.storage.list(TASKS)
        indexed = _by_task(await self.storage.list(OWNERS))
        for key in records:
            task_id = key[len(TASKS) : -len(".json")]
            if task_id in indexed or not key.endswith(".json"):
                continue
            found = await self._read(key)
            if found is not None and found[1].id == task_id:
                for index_key in _index_keys(*found):
                    await self.storage.put(index_key, b"")
        self._entered = True

    async def list(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        """The caller's tasks, newest status first, filtered by context, state and time.

        Sorting, filtering and the total use the index names; only the page's records
        are read (and a task's whose save left two names). The total leaves out the
        stale entries the page met; one past the page is counted until it is read.
        """
        mark = _page_mark(params.page_token)
        await self._enter_missing()
        owner = resolve_user_scope(context)
        names = await self.storage.list(_list_prefix(owner, params.context_id))
        entries = _filtered(await self._current(names), params)
        total = len(entries)
        if mark is not None:
            entries = [e for e in entries if e.key < mark]
        size = params.page_size or _PAGE_SIZE
        page, token, stale = await self._page(entries, size, owner, params)
        return a2a_pb2.ListTasksResponse(
            tasks=page, next_page_token=token, total_size=total - stale, page_size=size
        )

    async def _page(
        self,
        entries: builtins.list[_Entry],
        size: int,
        owner: str,
        params: a2a_pb2.ListTasksRequest,
    ) -> tuple[builtins.list[Task], str | None, int]:
        """Up to ``size`` tasks in ``entries`` order, the next token, the stale entries met.

        The token is ``None`` on the last page; a stale entry has no record, or one that
        no longer passes the filters (changed since its entry was written).
        """
        page: builtins.list[Task] = []
        last: _Entry | None = None
        stale = 0
        for entry in entries:
            if len(page) == size and last is not None:
                cursor = ListTasksCursor(last.nanos if last.stamped else None, last.task_id)
                return page, encode_list_tasks_cursor(cursor), stale
            found = await self._read(f"{TASKS}{entry.task_id}.json")
            if found is not None and found[0] == owner and _passes(found[1], params):
                page.append(found[1])
                last = entry
            else:
                stale += 1
        return page, None, stale

    async def _current(self, names: builtins.list[str]) -> builtins.list[_Entry]:
        """One entry per task: the one its record names where a save left two.

        Two entries for one task are the trace of a save cut short between writing the
        new entry and dropping the old one (rare): its record decides, read here. A
        listing never removes entries (a save may be half-way), it only reads.
        """
        current: builtins.list[_Entry] = []
        for task_id, entries in _by_task(names).items():
            if len(entries) == 1:
                current.append(entries[0])
                continue
            found = await self._read(f"{TASKS}{task_id}.json")
            if found is None:
                current.append(max(entries, key=lambda e: e.key))  # the page read decides
            else:
                current.append(_Entry.of(found[1]))
        return current

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the task and its index entries if the caller's owner has it."""
        key = self._key(task_id)
        found = await self._read(key) if key else None
        if key is None or found is None or found[0] != resolve_user_scope(context):
            return
        await self.storage.delete(key)
        await self._drop(_index_keys(*found))
        self._entries.pop(task_id, None)


def _page_mark(page_token: str) -> tuple[bool, int, str] | None:
    """The sort key a page token resumes after (``None``: the first page)."""
    if not page_token:
        return None
    cursor = decode_list_tasks_cursor(page_token)
    if cursor is None:
        raise InvalidParamsError("page token is not one this server gave")
    return cursor.sort_key()


def _list_prefix(owner: str, context_id: str) -> str:
    """The index a listing reads: the owner's tasks, or those of one of its contexts."""
    if context_id:
        return f"{CONTEXTS}{_digest(owner)}/{_digest(context_id)}/"
    return f"{OWNERS}{_digest(owner)}/"
