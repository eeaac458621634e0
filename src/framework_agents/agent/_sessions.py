"""The agent's session side: restore/save through a SessionManager, snapshots, edits, branches.

``Agent`` delegates here so the loop module stays about the loop. The rules:

* **Restore once, before seeding.** The first run (or the first ``edit_message`` /
  ``load_snapshot`` before any run) calls ``load_latest()``; a snapshot found there wins
  over ``initial_messages`` (they are ignored), its present fields are applied like
  ``load_snapshot`` and memory is re-synced. A corrupt latest snapshot raises
  ``SNAPSHOT_CORRUPT`` and is looked up again next time (it is never overwritten).
* **Save after every committed run** (also an interrupted one, which commits its history),
  and after ``edit_message`` / ``load_snapshot``: ``save_latest`` with ``messages`` and
  ``state`` (the ``"session"`` preset) and the ``app_data`` of the restored snapshot, so
  an application's data stored with the session rides along untouched. The system prompt
  is not saved: it belongs to the code, and a changed prompt in a new release must win.
* ``take_snapshot`` is sync and does no I/O; ``load_snapshot`` restores only the fields
  present; both keep memory in sync through ``Agent._set_history``.
* **Before the first run, edit what the first run would start from.** ``edit_message``
  and ``load_snapshot`` first make ``agent.messages`` the history the first run would
  load: the restored snapshot's, else the stored memory's, else the seed. A memory left
  by an earlier process is therefore edited, never overwritten with the seed; and a
  history set that way (even an empty one) is not reseeded by the first run.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._telemetry import trace_store
from ..errors import (
    CheckpointConflictError,
    InvalidArgumentError,
    MessageNotEditableError,
    MessageNotFoundError,
)
from ..history import CheckedHistory, repair_history
from ..memory.carry import app_data_with_state, restore_state
from ..memory.grounding import is_grounding
from ..messages import Message
from ..sessions.manager import SessionManager
from ..sessions.snapshot import Snapshot, SnapshotData, select_snapshot_fields
from ._loop import RunHooks
from ._output import output_instruction
from .timeline import Timeline

if TYPE_CHECKING:
    from .agent import Agent

__all__ = [
    "HistoryOrigin",
    "SessionLink",
    "SessionStore",
    "check_session_manager",
    "branch",
    "carry_app_data",
    "edit_message",
    "ensure_restored",
    "load_snapshot",
    "restore_session",
    "save_session",
    "session_hooks",
    "set_system_prompt",
    "take_snapshot",
]


class HistoryOrigin(enum.Enum):
    """Where ``agent.messages`` stands: the one state of the history's start.

    * ``SEED``: the constructor's ``initial_messages``; nothing decided yet.
    * ``SETTLED``: before the first run, made what that run starts from (the stored
      memory, else the seed); done once, so edits before the first run keep it whole.
    * ``SNAPSHOT``: a snapshot (the session's latest, or one loaded) gave it before the
      first run: the first run never seeds.
    * ``COMMITTED``: a run has committed; the history is the agent's own from then on.
    """

    SEED = "seed"
    SETTLED = "settled"
    SNAPSHOT = "snapshot"
    COMMITTED = "committed"


@dataclass
class SessionLink:
    """Per-agent bookkeeping of the session and of the history before the first run.

    ``origin``: see :class:`HistoryOrigin`. ``read``: the session's latest snapshot was
    looked up (and applied), or what it stores now is this agent's own save; a save
    refused as stale clears it, so the next run looks again. ``app_data``: the latest
    snapshot's app data, carried into every save.
    """

    origin: HistoryOrigin = HistoryOrigin.SEED
    read: bool = False
    app_data: Any = None

    @property
    def from_snapshot(self) -> bool:
        """Whether a snapshot gave the history the first run starts from (no seeding)."""
        return self.origin is HistoryOrigin.SNAPSHOT

    @property
    def committed(self) -> bool:
        """Whether a run has committed."""
        return self.origin is HistoryOrigin.COMMITTED


@contextlib.contextmanager
def _holding(agent: Agent, what: str) -> Iterator[None]:
    """Hold the agent's busy flag, as a run does: ``AGENT_BUSY`` if it is taken.

    An edit or a snapshot load awaits memory and storage; a run starting in between would
    commit a history without the change, or have its turn overwritten by it.
    """
    with agent._busy.hold(what):
        yield


@runtime_checkable
class SessionStore(Protocol):
    """What an agent needs of its ``session_manager``: the latest snapshot, read and written."""

    async def load_latest(self) -> Snapshot | None:
        """The latest snapshot, or ``None``."""
        ...

    async def save_latest(self, snapshot: Snapshot) -> None:
        """Replace the latest snapshot."""
        ...


def check_session_manager(manager: object) -> SessionStore | None:
    """``manager`` if it is ``None`` or a :class:`SessionStore`, else ``INVALID_ARGUMENT``."""
    if manager is not None and not isinstance(manager, SessionStore):
        raise InvalidArgumentError(
            "session_manager must be a SessionManager (load_latest/save_latest), "
            f"not {type(manager).__name__}"
        )
    return manager


def _manager(agent: Agent) -> SessionStore | None:
    """The agent's session manager (or ``None``), checked again: it may have been replaced."""
    return check_session_manager(agent.session_manager)


def set_system_prompt(agent: Agent, prompt: str | None) -> None:
    """Replace the agent's system prompt (and the prompt sent with the output schema)."""
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidArgumentError("system_prompt must be a str or None")
    agent.system_prompt = prompt
    parts = [prompt] if prompt else []
    if agent.response_format is not None:
        parts.append(output_instruction(agent.response_format))
    agent._effective_prompt = "\n\n".join(parts) or None


async def _apply(agent: Agent, data: SnapshotData) -> None:
    """Apply the fields present in ``data``; absent ones keep their current values.

    The history goes first: it is the one write that can fail (a memory that refuses a
    message), and a failure must leave state and prompt as they were too.
    """
    if data.messages is not None:
        await agent._set_history(repair_history(data.messages))
        _snapshot_gave_history(agent._session_link)
    if data.state is not None:
        agent._state.replace(data.state)
    if data.system_prompt is not None:
        set_system_prompt(agent, data.system_prompt)


def _snapshot_gave_history(link: SessionLink) -> None:
    """Before the first run, a snapshot's history is the start (never reseeded)."""
    if not link.committed:
        link.origin = HistoryOrigin.SNAPSHOT


async def restore_session(agent: Agent) -> bool:
    """Apply the session's latest snapshot once per agent.

    Returns whether a snapshot gave the history the first run starts from.
    """
    link = agent._session_link
    manager = _manager(agent)
    if manager is None or link.read:
        return link.from_snapshot
    snapshot = await trace_store(
        "session", "load", manager, manager.load_latest(), key=getattr(manager, "session_id", None)
    )
    if snapshot is not None:
        # Applying is idempotent, so a failure here (a memory that cannot save) leaves
        # ``restored`` unset and the next attempt applies the same snapshot again.
        await _apply(agent, snapshot.data)
        await restore_state(agent.memory, snapshot.app_data)  # long-term memory, if carried
        if snapshot.data.messages is None and not link.committed:
            # A snapshot without messages still means the seed is not used: the start
            # is what the memory holds.
            agent._messages = [m for m in await agent.memory.load() if not is_grounding(m)]
        _snapshot_gave_history(link)
        link.app_data = snapshot.app_data
    link.read = True
    return link.from_snapshot


async def save_session(agent: Agent) -> None:
    """``save_latest`` of the current messages and state (no-op without a session manager)."""
    manager = _manager(agent)
    if manager is None:
        return
    link = agent._session_link
    messages, state = list(agent._messages), agent._state.to_dict()
    data = (
        manager.snapshot_data(messages, state)  # checks only what this run added
        if isinstance(manager, SessionManager)
        else SnapshotData(messages=messages, state=state)
    )
    snapshot = Snapshot(data, app_data=app_data_with_state(agent.memory, link.app_data))
    try:
        await trace_store("session", "save", manager, manager.save_latest(snapshot))
    except CheckpointConflictError:
        # Another replica saved since this agent read the session: this run's turn was
        # not acknowledged. The next run restores the latest snapshot and goes on.
        link.read = False
        raise
    link.read = True  # what is stored now is ours: never restore over it


def session_hooks(agent: Agent) -> RunHooks:
    """The session as a hook provider: every committed run ends with ``save_latest``.

    Finished and interrupted runs alike (an interrupted run commits its history too).
    No hooks without a session manager.
    """
    if _manager(agent) is None:
        return RunHooks()

    async def on_commit(history: CheckedHistory, finished: bool) -> None:
        await save_session(agent)

    return RunHooks(on_commit=on_commit)


async def carry_app_data(agent: Agent) -> None:
    """The thread wins over the session's history and state at start, not over its app data.

    A run that starts from a thread's checkpoint does not restore the session (the thread
    is what goes on), but it still ends with ``save_latest``: the app data stored with the
    session must ride along into it instead of being dropped. The session is not marked
    restored, so if this run commits nothing a later run without a thread restores it.
    """
    link = agent._session_link
    if link.read:
        return
    manager = _manager(agent)
    if manager is None:
        return
    snapshot = await manager.load_latest()
    if snapshot is not None:
        link.app_data = snapshot.app_data


async def ensure_restored(agent: Agent) -> None:
    """Before the first run: make ``agent._messages`` the history that run would start from.

    That is the restored snapshot's history, else what the memory holds (a memory left by
    an earlier process), else the seed; the same choice as ``Agent._start_history``. Done
    once, so later edits before the first run keep the whole seed even when the memory's
    window is smaller.
    """
    link = agent._session_link
    if link.origin is not HistoryOrigin.SEED:
        return
    if await restore_session(agent):
        return  # the snapshot's history (or none at all) is the start: never the seed
    history = [m for m in await agent.memory.load() if not is_grounding(m)]
    if history:
        agent._messages = history
    link.origin = HistoryOrigin.SETTLED


def take_snapshot(
    agent: Agent,
    preset: str | None = "session",
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    app_data: Any = None,
) -> Snapshot:
    """A snapshot of the selected fields (sync, no I/O); records a ``"snapshot"`` entry."""
    fields = select_snapshot_fields(preset, include, exclude)
    data = SnapshotData(
        messages=[m.model_copy(deep=True) for m in agent._messages]
        if "messages" in fields
        else None,
        state=agent._state.to_dict() if "state" in fields else None,
        system_prompt=agent.system_prompt if "system_prompt" in fields else None,
    )
    snapshot = Snapshot(data, app_data=app_data_with_state(agent.memory, app_data))
    agent._record("snapshot", f"take:{snapshot.snapshot_id}")
    return snapshot


async def load_snapshot(agent: Agent, snapshot: Snapshot) -> None:
    """Restore the fields present in ``snapshot``; memory (and the session) kept in sync."""
    if not isinstance(snapshot, Snapshot):
        raise InvalidArgumentError(
            f"load_snapshot() takes a Snapshot, not {type(snapshot).__name__}"
        )
    with _holding(agent, "load_snapshot"):
        await ensure_restored(agent)
        await _apply(agent, snapshot.data)
        await restore_state(agent.memory, snapshot.app_data)
        agent._record("snapshot", f"load:{snapshot.snapshot_id}")
        await save_session(agent)


def _find(messages: list[Message], id_or_index: str | int) -> int:
    if isinstance(id_or_index, bool) or not isinstance(id_or_index, str | int):
        raise InvalidArgumentError(
            "edit_message() takes a message id (str) or an index (int), "
            f"not {type(id_or_index).__name__}"
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


async def edit_message(agent: Agent, id_or_index: str | int, content: Any) -> Message:
    """Replace one message's content (by id, or index counting from the end when negative)."""
    with _holding(agent, "edit_message"):
        return await _edit(agent, id_or_index, content)


async def _edit(agent: Agent, id_or_index: str | int, content: Any) -> Message:
    await ensure_restored(agent)
    history = list(agent._messages)
    index = _find(history, id_or_index)
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
    await agent._set_history(history)
    agent._record("edit", old.id)
    await save_session(agent)
    return new


def branch(agent: Agent, label: str, overrides: Mapping[str, Any] | None = None) -> Agent:
    """An independent agent forked from ``agent`` (see ``Agent.branch``)."""
    if not isinstance(label, str):
        raise InvalidArgumentError(f"branch label must be a str, not {type(label).__name__}")
    overrides = {} if overrides is None else overrides
    if not isinstance(overrides, Mapping):
        raise InvalidArgumentError("branch overrides must be a dict of constructor arguments")
    cls = type(agent)
    known = set(inspect.signature(cls).parameters)
    unknown = sorted(str(k) for k in overrides if k not in known)
    if unknown:
        raise InvalidArgumentError(
            f"unknown branch override(s) {unknown}; use constructor arguments: {sorted(known)}"
        )
    kwargs = agent._constructor_kwargs()
    kwargs.update(
        memory=None,  # fresh default memory, seeded with the history on the branch's first run
        session_manager=None,
        state=agent._state.to_dict(),
        initial_messages=[m.model_copy(deep=True) for m in agent._messages],
    )
    kwargs.update(overrides)
    child = cls(**kwargs)
    child._timeline = Timeline(agent._timeline.entries())
    agent._record("branch", label)
    child._record("branch", label)
    return child
