"""The session as a hook provider: restore and save an :class:`AgentHistory` through a session.

:class:`SessionSync` keeps one history in step with a ``session_manager`` (anything with
``load_latest`` / ``save_latest``); it works on the history's public operations only and
is testable without an ``Agent``. The rules:

* **Restore once, before seeding.** The first run (or the first ``edit_message`` /
  ``load_snapshot`` / ``pause`` before any run) calls ``load_latest()``; a snapshot found
  there wins over ``initial_messages`` (they are ignored), its present fields are applied
  like ``load_snapshot`` and memory is re-synced. A corrupt latest snapshot raises
  ``SNAPSHOT_CORRUPT`` and is looked up again next time (it is never overwritten).
* **Save after every committed run** (also an interrupted one, which commits its history),
  and after ``edit_message`` / ``load_snapshot``: ``save_latest`` with ``messages`` and
  ``state`` (the ``"session"`` preset), the timeline, and the ``app_data`` of the restored
  snapshot, so an application's data stored with the session rides along untouched. The
  system prompt is not saved: it belongs to the code, and a changed prompt in a new
  release must win.
* **The timeline goes with the session.** A restore merges the stored timeline into the
  history's (:meth:`~framework_agents.agent.timeline.Timeline.merge`: the stored entries
  first, keeping their revs, then those only this history has), so a new agent goes on
  at the next rev; entries recorded without a save (a failed run, ``take_snapshot``,
  ``branch``) ride along with the next one. ``load_snapshot`` never touches it: the
  timeline records the load instead.
* A run that starts from a thread's checkpoint does not restore the session (the thread
  is what goes on), but its app data and timeline are carried into the save.
* **Two agents on one session merge.** A save another writer beat (``CHECKPOINT_CONFLICT``
  from ``save_latest``) loads the latest snapshot and saves again with the messages merged
  by id (the stored ones, then this history's that are not stored, so the save appends
  them) and the state merged key by key (``sessions._merge``); the history then holds
  the merged messages. Only a state key both changed is refused (``CHECKPOINT_CONFLICT``,
  nothing written): the next run restores the latest snapshot.

Both are run hooks (:meth:`SessionSync.hooks`: ``on_start`` restores or carries,
``on_commit`` saves). Snapshots (``take_snapshot``, ``load_snapshot``) and edits
(``edit_message``) of a history live here too: before the first run they first make the
history what that run would start from, so a memory left by an earlier process is
edited, never overwritten with the seed.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from .._telemetry import trace_store
from .._util import check_collaborator
from ..errors import (
    CheckpointConflictError,
    InvalidArgumentError,
    MessageNotEditableError,
    MessageNotFoundError,
)
from ..history import CheckedHistory, repair_history
from ..memory.carry import app_data_with_state, restore_state
from ..messages import Message
from ..sessions._base import merge_messages, merge_state
from ..sessions.manager import SessionManager
from ..sessions.snapshot import Snapshot, SnapshotData, select_snapshot_fields
from ._history import AgentHistory
from ._loop import RunHooks

__all__ = ["SessionStore", "SessionSync", "find_message"]

#: Loads and saves a save another writer beat is merged in, before its conflict stands.
_MERGE_ATTEMPTS = 50
#: The pause before merge attempt n (n >= 1) is random, up to ``min(cap, base * 2**n)``
#: seconds: a writer saving in a tight loop can win every race for a while (its cycle
#: is shorter than a load and a save), never for seconds.
_MERGE_BACKOFF_BASE, _MERGE_BACKOFF_CAP = 0.002, 0.1


@runtime_checkable
class SessionStore(Protocol):
    """What an agent needs of its ``session_manager``: the latest snapshot, read and written."""

    async def load_latest(self) -> Snapshot | None:
        """The latest snapshot, or ``None``."""
        ...

    async def save_latest(self, snapshot: Snapshot) -> None:
        """Replace the latest snapshot."""
        ...


class SessionSync:
    """One history kept in step with a session manager (or with none: then it does nothing).

    ``read``: the session's latest snapshot was looked up (and applied), or what it stores
    now is this history's own save; a save refused (a state conflict) clears it, so the
    next run looks again. ``app_data``: the latest snapshot's app data, carried into
    every save.
    """

    def __init__(self, history: AgentHistory, manager: SessionStore | None = None) -> None:
        """Sync ``history`` with ``manager`` (``None``: no session)."""
        self.history = history
        self.manager = manager
        self.read = False
        self.app_data: Any = None
        # The message ids and state the session held when this history last read or
        # wrote it: the base a save another writer beat is merged from.
        self._base_messages: Sequence[Message] = ()
        self._base_state: dict[str, Any] = {}

    @property
    def manager(self) -> SessionStore | None:
        """The session manager (``INVALID_ARGUMENT`` when set to something that is not one)."""
        return self._manager

    @manager.setter
    def manager(self, manager: SessionStore | None) -> None:
        self._manager = check_collaborator(manager, SessionStore, "session_manager")

    def hooks(self, *, from_thread: bool) -> RunHooks:
        """The session's run hooks: restore (or, ``from_thread``, carry) first; save at commit.

        Finished and interrupted runs alike end with ``save_latest`` (an interrupted run
        commits its history too). No hooks without a session manager.
        """
        if self._manager is None:
            return RunHooks()

        async def on_commit(history: CheckedHistory, finished: bool) -> None:
            await self.save()

        return RunHooks(on_start=self.carry if from_thread else self.restore, on_commit=on_commit)

    async def restore(self) -> None:
        """Apply the session's latest snapshot once (a no-op once read, or without a session)."""
        manager = self._manager
        if manager is None or self.read:
            return
        key = getattr(manager, "session_id", None)
        snapshot = await trace_store("session", "load", manager, manager.load_latest(), key=key)
        if snapshot is not None:
            # Applying is idempotent, so a failure here (a memory that cannot save) leaves
            # ``read`` unset and the next attempt applies the same snapshot again.
            await self._apply(snapshot.data)
            self._merge_timeline(snapshot)
            await restore_state(self.history.memory, snapshot.app_data)  # long-term memory
            if snapshot.data.messages is None and not self.history.committed:
                # A snapshot without messages still means the seed is not used: the start
                # is what the memory holds.
                self.history.take_start(await self.history.stored())
            self.history.mark_snapshot()
            self.app_data = snapshot.app_data
            self._base(snapshot.data.messages or [], snapshot.data.state or {})
        self.read = True

    async def carry(self) -> None:
        """A run starting from a thread's checkpoint: carry the session's app data and timeline.

        The thread wins over the session's history and state, not over its app data and
        timeline, which the run's save must carry instead of dropping. The session is not
        marked read: if this run commits nothing, a later run without a thread restores it.
        """
        manager = self._manager
        if self.read or manager is None:
            return
        snapshot = await manager.load_latest()
        if snapshot is not None:
            self._merge_timeline(snapshot)
            self.app_data = snapshot.app_data
            self._base(snapshot.data.messages or [], snapshot.data.state or {})

    def _merge_timeline(self, snapshot: Snapshot) -> None:
        """The session's timeline merged into the history's (idempotent; none: kept as is)."""
        if snapshot.data.timeline is not None:
            self.history.timeline.merge(snapshot.data.timeline)

    async def ready(self) -> None:
        """Before the first run: the session restored, the history what that run starts from."""
        await self.restore()
        await self.history.settle()

    async def save(self) -> None:
        """``save_latest`` of the history's messages, state and timeline (none: a no-op).

        A save another writer beat (``CHECKPOINT_CONFLICT``: another agent saved the
        session since this history read it) is merged and saved again
        (:meth:`_merge_latest`): no turn is lost. Only a state key both changed stays
        refused (``CHECKPOINT_CONFLICT``); the next run then restores the latest snapshot.
        """
        manager = self._manager
        if manager is None:
            return
        history = self.history
        # The history's own list (replaced by a commit, never changed): a copy would
        # touch every message, each save.
        held = history.messages
        messages = held if type(held) is list else list(held)
        state = history.state.to_dict()
        try:
            await self._save(manager, messages, state)
        except CheckpointConflictError:
            try:
                await self._merge_latest(manager, messages, state)
            except CheckpointConflictError:
                # A state key both changed (or the session kept changing): this run's
                # turn was not stored. The next run restores the latest snapshot.
                self.read = False
                raise
        self.read = True  # what is stored now is ours: never restore over it

    async def _save(
        self, manager: SessionStore, messages: list[Message], state: dict[str, Any]
    ) -> None:
        """One ``save_latest`` of ``messages``, ``state`` and the timeline; the base moves."""
        history = self.history
        timeline = history.timeline.shared_entries
        data = (
            # Checks what is new; the snapshot holds these very lists (not kept past the
            # save, which copies what it keeps).
            manager.snapshot_data(messages, state, timeline=timeline, owned=True)
            if isinstance(manager, SessionManager)
            else SnapshotData(messages=messages, state=state, timeline=timeline)  # copies
        )
        snapshot = Snapshot(data, app_data=app_data_with_state(history.memory, self.app_data))
        await trace_store("session", "save", manager, manager.save_latest(snapshot))
        self._base(messages, state)

    async def _merge_latest(
        self, manager: SessionStore, messages: list[Message], state: dict[str, Any]
    ) -> None:
        """Merge this history's save into the latest snapshot another writer stored; save.

        Messages merge by id (the stored ones, then this history's that are not stored:
        the save appends them), state key by key (a key both changed:
        ``CHECKPOINT_CONFLICT``), the timelines as a restore merges them; the other
        writer's app data is kept. Retried while other writers keep saving in between
        (after a random pause growing to 0.1 s; after ``_MERGE_ATTEMPTS``, a few seconds,
        the conflict stands). The history then holds the merged messages and state.
        """
        where = f"session {getattr(manager, 'session_id', '?')!r}"
        for attempt in range(_MERGE_ATTEMPTS):
            if attempt:  # writers racing each other: one lets the other finish
                pause = min(_MERGE_BACKOFF_CAP, _MERGE_BACKOFF_BASE * 2**attempt)
                await asyncio.sleep(random.uniform(0, pause))
            latest = await manager.load_latest()
            if latest is None:
                theirs_messages, theirs_state = None, None
            else:
                theirs_messages, theirs_state = latest.data.messages, latest.data.state
                self._merge_timeline(latest)
                self.app_data = latest.app_data
            base_ids = {m.id for m in self._base_messages}
            messages = merge_messages(messages, base_ids, theirs_messages)
            state = merge_state(state, self._base_state, theirs_state, where=where) or {}
            # What the other writer stored is now part of this history's base.
            self._base(theirs_messages or [], theirs_state or {})
            try:
                await self._save(manager, messages, state)
            except CheckpointConflictError:
                continue
            break
        else:
            raise CheckpointConflictError(
                f"{where} kept changing while this run's turn was merged into it "
                f"({_MERGE_ATTEMPTS} attempts); nothing was written"
            )
        history = self.history
        if [m.id for m in history.messages] != [m.id for m in messages]:
            await history.replace(messages)
        history.state.replace(state)

    def _base(self, messages: Sequence[Message], state: dict[str, Any]) -> None:
        """Remember what the session holds as this history last read or wrote it.

        The list itself (one the history replaces, never changes): its ids are only
        needed by a merge, so a save does not pay for them.
        """
        self._base_messages = messages
        self._base_state = state

    async def _apply(self, data: SnapshotData) -> None:
        """Apply the fields present in ``data``; absent ones keep their current values.

        The history goes first: it is the one write that can fail (a memory that refuses a
        message), and a failure must leave state and prompt as they were too.
        """
        history = self.history
        if data.messages is not None:
            await history.replace(repair_history(data.messages))
            history.mark_snapshot()
        if data.state is not None:
            history.state.replace(data.state)
        if data.system_prompt is not None:
            history.system_prompt = data.system_prompt

    # -- snapshots and edits -------------------------------------------------------------

    def take_snapshot(
        self,
        preset: str | None = "session",
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        app_data: Any = None,
    ) -> Snapshot:
        """A snapshot of the selected fields (sync, no I/O); records a ``"snapshot"`` entry."""
        history = self.history
        fields = select_snapshot_fields(preset, include, exclude)
        data = SnapshotData(
            messages=[m.model_copy(deep=True) for m in history.messages]
            if "messages" in fields
            else None,
            state=history.state.to_dict() if "state" in fields else None,
            system_prompt=history.system_prompt if "system_prompt" in fields else None,
        )
        snapshot = Snapshot(data, app_data=app_data_with_state(history.memory, app_data))
        history.record("snapshot", f"take:{snapshot.snapshot_id}")
        return snapshot

    async def load_snapshot(self, snapshot: Snapshot) -> None:
        """Restore the fields present in ``snapshot``; memory (and the session) kept in sync.

        ``snapshot`` is checked by ``Agent.load_snapshot``, before it takes the busy flag.
        """
        await self.ready()
        await self._apply(snapshot.data)
        await restore_state(self.history.memory, snapshot.app_data)
        self.history.record("snapshot", f"load:{snapshot.snapshot_id}")
        await self.save()

    async def edit_message(self, id_or_index: str | int, content: Any) -> Message:
        """Replace one message's content (by id, or index counting from the end when negative)."""
        await self.ready()
        history = list(self.history.messages)
        index = find_message(history, id_or_index, "edit_message()")
        old = history[index]
        if old.tool_calls:
            raise MessageNotEditableError(
                f"message {old.id!r} holds tool calls; the tool results after it answer those "
                "calls, so editing it would break the history (branch from before it instead)"
            )
        try:
            new = Message.model_validate({**old.model_dump(), "content": content})
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise InvalidArgumentError(f"invalid content for message {old.id!r}: {exc}") from None
        history[index] = new
        await self.history.replace(history)
        self.history.record("edit", old.id)
        await self.save()
        return new


def find_message(messages: list[Message], id_or_index: str | int, where: str) -> int:
    """The index of a message given by id, or by index (negative: from the end).

    ``MESSAGE_NOT_FOUND`` when there is none; ``INVALID_ARGUMENT`` for anything else.
    """
    if isinstance(id_or_index, bool) or not isinstance(id_or_index, str | int):
        raise InvalidArgumentError(
            f"{where} takes a message id (str) or an index (int), not {type(id_or_index).__name__}"
        )
    if isinstance(id_or_index, int):
        n = len(messages)
        if not -n <= id_or_index < n:
            raise MessageNotFoundError(
                f"no message at index {id_or_index}: the history has {n} message(s)"
            )
        return id_or_index % n
    for i, message in enumerate(messages):
        if message.id == id_or_index:
            return i
    raise MessageNotFoundError(f"no message with id {id_or_index!r} in the history")
