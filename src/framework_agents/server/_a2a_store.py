"""A2A tasks in our ``Storage``: one record per task, and name-only indexes to page them.

Layout (``<o>`` is a digest of the owner, ``<c>`` of the context id, ``<s>`` the
``TaskState`` number)::

    a2a/tasks/<task_id>.json                          {"owner", "task"} (the task as JSON)
    a2a/index/all/<o>/<name>                          empty: the owner's tasks
    a2a/index/state/<o>/<s>/<name>                    ... in one state
    a2a/index/context/<o>/<c>/<name>                  ... in one context
    a2a/index/context-state/<o>/<c>/<s>/<name>        ... in one context and state

``<name>`` is ``<stamp>.<mirrored id>z``: ``<stamp>`` is 10^21 minus the status timestamp
in nanoseconds (22 digits) or ``none``, the id's characters are mirrored in the key
alphabet (``-`` <-> ``y``, ``0`` <-> ``x``, ...) and ``z`` ends it, so that names sort
exactly in the SDK's listing order: newest status first, then task id descending, tasks
without a timestamp last. A ListTasks page is one keyset read of the index its filters
name (``list_after`` after the cursor's name: on the SQL and Redis stores a range of the
key index, O(log n + page)), then one read of the page's records (``get_many``);
``status_timestamp_after`` is an upper bound on the names (reading stops there). The
total is a count of the names in range on a walk's first page (``count_keys``: SQL
``count(*)``, which walks the range in the database, Redis ``ZLEXCOUNT``; other stores
list the names), carried to the later pages by the page token:
``<the SDK's cursor of the page's last task>.<total>.<scope>``. The cursor is the name
the next page starts after; ``scope`` ties the total to the owner and filters it was
counted for (another request resumes at the cursor and counts again, as does the SDK's
cursor alone, the token of the previous release).

A save moves a task's index entries only when its status timestamp or state changed, so
the many saves of a streaming answer (artifact chunks) write only the record. The entries
a task has are those its stored record names, read at every save (one read): a process
does not remember them, since another replica may have moved them meanwhile (a replica
that remembered its last save's entries would skip writing them again while the other
had dropped them, leaving the task unlisted). A save writes the new entries before the
record and drops the old ones after it, so a save cut short by a crash leaves at worst an
entry too many, never a record without one. Two replicas saving one task at the same
instant can still leave its record without its entries (each read the other's old ones).

A page trusts the records it reads, not the names: an entry its record does not name (a
save cut short, two replicas saving one task at once, a record gone) is skipped and the
page filled from the next names; the total leaves out the ones the walk met and counts
the others. A listing never removes entries: a save may be half-way. A client paging
meets every task that does not change meanwhile exactly once. A task whose status changes
meanwhile moves to its new place (usually the front): when that is before the cursor, the
walk does not show it again, nor at all if it had not reached it yet (as on the SDK's own
stores); when it is after the cursor, the walk shows it there (twice if already shown).

Records without an entry (written before the indexes existed, or by another tool) and
those the previous layout indexed (``a2a/owners/``, ``a2a/contexts/``: those names are
then removed) are entered by a store's first listing, once per process: it lists every
record and entry name. A replica still running the older code during an upgrade writes
records the running servers list correctly only after their restart.
"""

from __future__ import annotations

import os

# The SDK reads this when it is first imported: its spans stay off unless asked for.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import asyncio
import builtins
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
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

from ._index import count_keys, get_many, list_after
from ._tenants import current_tenant

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
INDEX = "a2a/index/"
#: Where the previous layout kept its names (``<stamp>.<state>.<task_id>``).
OLD_INDEXES = ("a2a/owners/", "a2a/contexts/")
_PAGE_SIZE = 50
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
#: Status timestamps are inverted against this bound (and kept within it).
_BOUND = 10**21
#: A task id's characters, sorted, and the key characters they are mirrored to: each
#: id character's rank r becomes rank 63 - r, so ids sort descending; ``z`` (above every
#: mirrored character) ends the id, so a longer id sorts before its own prefix.
_ID_CHARS = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
_MIRRORED = "-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxy"[::-1]
_DOWN = str.maketrans(_ID_CHARS, _MIRRORED)
_UP = str.maketrans(_MIRRORED, _ID_CHARS)
_NAME = re.compile(r"(?:\d{22}|none)\.([-.0-9A-Z_a-y]{1,128})z")
#: The total a page token carries, and the owner and filters it was counted for.
_CARRIED = re.compile(r"([0-9]{1,9})\.([0-9a-f]{8})")  # total_size is an int32


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def sort_key(task: Task) -> tuple[bool, int, str]:
    """``(has timestamp, timestamp ns, id)``: tasks are listed by it, largest first."""
    stamped = task.HasField("status") and task.status.HasField("timestamp")
    return (stamped, task.status.timestamp.ToNanoseconds() if stamped else 0, task.id)


def _stamp(nanos: int | None) -> str:
    """The time part of a name: later times sort first, no time after every time."""
    if nanos is None:
        return "none"
    return f"{_BOUND - min(max(nanos, 1 - _BOUND), _BOUND - 1):022d}"


def _name(nanos: int | None, task_id: str) -> str:
    """The index name of a task at that status time (see the module docstring)."""
    return f"{_stamp(nanos)}.{task_id.translate(_DOWN)}z"


def _cursor(task: Task) -> ListTasksCursor:
    """The SDK's cursor of ``task``: its status time (``None``: none) and id."""
    stamped, nanos, task_id = sort_key(task)
    return ListTasksCursor(nanos if stamped else None, task_id)


def _task_of(key: str) -> str | None:
    """The task id an index key names (``None``: not an index name)."""
    found = _NAME.fullmatch(key.rsplit("/", 1)[-1])
    if found is None:
        return None
    task_id = found.group(1).translate(_UP)
    return task_id if _TASK_ID.fullmatch(task_id) else None


def _list_prefix(owner: str, context_id: str, state: int) -> str:
    """The index a listing reads: the owner's tasks, in a context and/or in a state."""
    if context_id:
        base = f"{_digest(owner)}/{_digest(context_id)}/"
        return f"{INDEX}context-state/{base}{state}/" if state else f"{INDEX}context/{base}"
    return f"{INDEX}state/{_digest(owner)}/{state}/" if state else f"{INDEX}all/{_digest(owner)}/"


def _index_keys(owner: str, task: Task) -> tuple[str, ...]:
    """The keys of ``task``'s index entries (the owner's first)."""
    cursor = _cursor(task)
    name = _name(cursor.timestamp_ns, cursor.task_id)
    state = int(task.status.state)
    contexts = ("", task.context_id) if task.context_id else ("",)
    states = (0, state) if state else (0,)
    return tuple(_list_prefix(owner, c, s) + name for c in contexts for s in states)


def _stop(prefix: str, params: a2a_pb2.ListTasksRequest) -> str | None:
    """The key a listing stops before: ``status_timestamp_after`` (``None``: no bound).

    Names of tasks at or after that time sort before it; older ones and those without a
    time sort after it.
    """
    if not params.HasField("status_timestamp_after"):
        return None
    return prefix + _stamp(params.status_timestamp_after.ToNanoseconds() - 1)


def _page_start(page_token: str, scope: str) -> tuple[str | None, int | None]:
    """The name a page token resumes after, and the total it carries (``None``: none).

    A token is ``<the SDK's cursor>.<total>.<scope>``: the total is the walk's, carried
    only to a request with the same owner and filters (``scope``); the SDK's cursor alone
    (an older token) resumes as well, its total counted again.
    """
    if not page_token:
        return None, None
    cursor_part, _, rest = page_token.partition(".")
    cursor = decode_list_tasks_cursor(cursor_part)
    carried = _CARRIED.fullmatch(rest) if rest else None
    if cursor is None or not _TASK_ID.fullmatch(cursor.task_id) or (rest and not carried):
        raise InvalidParamsError("page token is not one this server gave")
    name = _name(cursor.timestamp_ns, cursor.task_id)
    if carried is None or carried.group(2) != scope:
        return name, None
    return name, int(carried.group(1))


def _parsed(key: str, raw: bytes) -> tuple[str, Task] | None:
    """A record's owner and task (``None``: unreadable, logged)."""
    try:
        record = json.loads(raw)
        task = json_format.ParseDict(record["task"], Task())
    except (ValueError, KeyError, TypeError, json_format.ParseError):
        logger.error("unreadable A2A task record %s; left untouched", key)
        return None
    return str(record.get("owner", "")), task


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
        #: The tenants (``None``: no tenants) whose records were entered by this process.
        self._entered: set[str | None] = set()
        self._entering = asyncio.Lock()

    @staticmethod
    def _key(task_id: str) -> str | None:
        # Task ids are the SDK's UUIDs or a client's: only safe single names become keys.
        return f"{TASKS}{task_id}.json" if _TASK_ID.fullmatch(task_id) else None

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Save ``task`` for the caller's owner (its index entries move if it changed)."""
        key = self._key(task.id)
        if key is None:
            raise InvalidParamsError(f"task id {task.id!r:.80} is not a safe name")
        owner = resolve_user_scope(context)
        found = await self._read(key)
        old = _index_keys(*found) if found is not None else ()
        new = _index_keys(owner, task)
        for entry in new:  # entries first: a cut-short save leaves no record unlisted
            if entry not in old:
                await self.storage.put(entry, b"")
        record = {"owner": owner, "task": json_format.MessageToDict(task)}
        await self.storage.put(key, json.dumps(record).encode())
        await self._drop(old, keep=new)

    async def _drop(self, entries: tuple[str, ...], keep: tuple[str, ...] = ()) -> None:
        for entry in entries:
            if entry not in keep:
                await self.storage.delete(entry)

    async def _read(self, key: str) -> tuple[str, Task] | None:
        raw = await self.storage.get(key)
        return None if raw is None else _parsed(key, raw)

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
        """Enter the records the index lacks; remove the previous layout's names.

        Once per tenant and process (every save since writes its entries before its
        record; a server with ``tokens=`` keeps each tenant's tasks apart, under one
        store): lists every record and every owner entry, reads the records with no
        entry and those the previous layout indexed, and enters them.
        """
        tenant = current_tenant()
        if tenant in self._entered:
            return
        async with self._entering:  # two first listings: one pass
            if tenant not in self._entered:
                await self._enter_all()
                self._entered.add(tenant)

    async def _enter_all(self) -> None:
        records = await self.storage.list(TASKS)
        entered = set(await self.storage.list(f"{INDEX}all/"))
        indexed = {_task_of(key) for key in entered}
        old = [key for prefix in OLD_INDEXES for key in await self.storage.list(prefix)]
        moved = {key.rsplit(".", 1)[-1] for key in old}  # old names end in ".<task_id>"
        for key in records:
            task_id = key[len(TASKS) : -len(".json")]
            if key.endswith(".json") and (task_id not in indexed or task_id in moved):
                await self._enter(key, task_id)
        for key in old:
            await self.storage.delete(key)

    async def _enter(self, key: str, task_id: str) -> None:
        """Write every entry the record at ``key`` names (a put of one there is harmless).

        A task the previous layout saved last may have kept its owner entry (the same
        status time) while its state or context moved: its other entries are written too.
        """
        found = await self._read(key)
        if found is None or found[1].id != task_id:
            return
        for index_key in _index_keys(*found):
            await self.storage.put(index_key, b"")

    async def list(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        """The caller's tasks, newest status first, filtered by context, state and time.

        One keyset read of the index the filters name, from the token's name on, and
        one read of the page's records. The total is a count of the names in range on a
        walk's first page (less the stale ones the page met), carried by the tokens.
        """
        owner = resolve_user_scope(context)
        prefix = _list_prefix(owner, params.context_id, int(params.status))
        stop = _stop(prefix, params)
        scope = _digest(prefix + (stop or ""))[:8]
        start, carried = _page_start(params.page_token, scope)
        await self._enter_missing()
        size = params.page_size or _PAGE_SIZE
        after = None if start is None else prefix + start
        page, more, stale = await self._page(prefix, after, stop, size, owner)
        if carried is None:
            carried = await count_keys(self.storage, prefix, stop)
        total = max(carried - stale, 0)
        token = f"{encode_list_tasks_cursor(_cursor(page[-1]))}.{total}.{scope}" if more else None
        return a2a_pb2.ListTasksResponse(
            tasks=page, next_page_token=token, total_size=total, page_size=size
        )

    async def _page(
        self, prefix: str, after: str | None, stop: str | None, size: int, owner: str
    ) -> tuple[builtins.list[Task], bool, int]:
        """Up to ``size`` tasks after ``after``, whether more follow, the stale entries met.

        Reads names ``size + 1`` at a time (more only where some were stale) until one
        past the page is found.
        """
        page: builtins.list[Task] = []
        stale = 0
        while True:
            want = size + 1 - len(page)
            keys = await list_after(self.storage, prefix, after, want)
            inside = [k for k in keys if stop is None or k < stop]
            for task in await self._current(inside, owner):
                if task is None:
                    stale += 1
                elif len(page) == size:  # one more exists: the page ends at its last
                    return page, True, stale
                else:
                    page.append(task)
            if len(keys) < want or len(inside) < len(keys):
                return page, False, stale
            after = keys[-1]

    async def _current(self, keys: builtins.list[str], owner: str) -> builtins.list[Task | None]:
        """The task each index key stands for, ``None`` where its record does not name it.

        One read of the records. A key stands for a task when the record is the owner's
        and its entries include the key: the same status time, state and context (a
        task with two entries, a save cut short, is listed under the one it names).
        """
        ids = [_task_of(key) for key in keys]
        wanted = sorted({f"{TASKS}{i}.json" for i in ids if i is not None})
        raw = await get_many(self.storage, wanted)
        records = {k: _parsed(k, v) for k, v in raw.items()}
        tasks: builtins.list[Task | None] = []
        for key, task_id in zip(keys, ids, strict=True):
            found = records.get(f"{TASKS}{task_id}.json") if task_id else None
            named = found is not None and found[0] == owner and key in _index_keys(*found)
            tasks.append(found[1] if named and found is not None else None)
        return tasks

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the task and its index entries if the caller's owner has it."""
        key = self._key(task_id)
        found = await self._read(key) if key else None
        if key is None or found is None or found[0] != resolve_user_scope(context):
            return
        await self.storage.delete(key)
        await self._drop(_index_keys(*found))
