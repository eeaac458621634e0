"""``AgentHistory``: the one owner of an agent's history, state, system prompt and timeline.

An :class:`~framework_agents.agent.Agent` drives runs; what a run starts from and what it
leaves behind belong to its history:

* ``messages`` (what ``agent.messages`` shows), ``state``, ``system_prompt``, ``timeline``;
* ``origin``: where the history stands (:class:`HistoryOrigin`, one state, no flags);
* the memory it is kept in, with the views that let a run cost what is new: the memory's
  revision and the history it held when this history last read or wrote it (a run then
  starts from it and appends only its new messages), the history memory held (the base
  of a merging replace), and the thread this history last committed (its next run checks
  the checkpoint only past it).

Operations: :meth:`~AgentHistory.start` (what a run starts from: memory, else the seed),
:meth:`~AgentHistory.settle` (before the first run, make ``messages`` that start),
:meth:`~AgentHistory.commit` (a run's managed transcript into memory and ``messages``),
:meth:`~AgentHistory.replace` (any new history, atomically: edits, snapshots),
:meth:`~AgentHistory.record` (a timeline entry). Sessions and threads work through these
(``_sessions``, ``_threads``); nothing else writes the history. This module knows neither
``Agent`` nor sessions.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from .._telemetry import trace_store
from .._util import implements
from ..checkpoint._base import Checkpointer
from ..conversation._base import ConversationManager
from ..conversation.null import keeps_everything
from ..errors import InvalidArgumentError
from ..history import CheckedHistory
from ..memory._base import AppendableMemory, Memory, replace_history
from ..memory.grounding import is_grounding
from ..messages import Message, ToolCall
from ._loop import kept_checked
from .state import AgentState
from .timeline import Timeline, TimelineEntry, TimelineKind

__all__ = ["AgentHistory", "HistoryOrigin"]


class HistoryOrigin(enum.Enum):
    """Where the history stands: the one state of its start.

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


class AgentHistory:
    """An agent's messages, state, system prompt and timeline, and the memory they live in."""

    def __init__(
        self,
        memory: Memory,
        *,
        seed: Sequence[Message] = (),
        state: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
    ) -> None:
        """A history not yet started: ``messages`` is the ``seed`` (``initial_messages``)."""
        self.memory = memory
        self.seed: list[Message] = list(seed)
        self.state = AgentState(state)
        self.system_prompt = system_prompt
        self.timeline = Timeline()
        self.origin = HistoryOrigin.SEED
        self._messages: Sequence[Message] = list(self.seed)
        # The memory's revision and the history it held then, when this history last read
        # or wrote an AppendableMemory: while the revision holds, runs start from it and
        # commit only their new messages (no reload, no rewrite of the history).
        self._memory_view: tuple[int, CheckedHistory] | None = None
        # The history memory held when this history last read or wrote it: the base of a
        # commit, so turns another agent committed meanwhile are kept, not overwritten.
        self._memory_start: Sequence[Message] | None = None
        # The thread this history last committed and its history: the thread's next run
        # starts from its checkpoint, checked only past what this history committed.
        self._thread_view: tuple[Checkpointer, str, CheckedHistory] | None = None
        #: The thread whose run (or resume) left ``messages``, until a commit or a
        #: replace makes them something else: a pause never copies it into another.
        self.thread: tuple[Checkpointer, str] | None = None

    @property
    def memory(self) -> Memory:
        """The memory the history is kept in (replacing it forgets what was read of it)."""
        return self._memory

    @memory.setter
    def memory(self, memory: Memory) -> None:
        self._memory = memory
        self._memory_view = None
        self._memory_start = None

    @property
    def messages(self) -> Sequence[Message]:
        """The current history (shared, never to be mutated: copy it to hand it out)."""
        return self._messages

    @property
    def system_prompt(self) -> str | None:
        """The system prompt (a snapshot may carry one)."""
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, prompt: str | None) -> None:
        if prompt is not None and not isinstance(prompt, str):
            raise InvalidArgumentError("system_prompt must be a str or None")
        self._system_prompt = prompt

    @property
    def committed(self) -> bool:
        """Whether a run has committed (the history is no longer the seed's or a snapshot's)."""
        return self.origin is HistoryOrigin.COMMITTED

    # -- start -------------------------------------------------------------------------

    async def start(self) -> Sequence[Message]:
        """The history a run starts from: memory, seeded on the first run (repaired later).

        The seed is used only while nothing else gave the start: no run committed, no
        snapshot gave a history, and the memory holds nothing.
        """
        memory, view = self._memory, self._memory_view
        revision: int | None = None
        if implements(memory, AppendableMemory):
            if self.committed and view is not None and await memory.unchanged(view[0]):
                self._memory_start = view[1]
                return view[1]  # the memory still holds what this history left there
            revision = memory.revision
        history = await trace_store("memory", "load", memory, memory.load())
        self._memory_start = history
        seeding = self.origin in (HistoryOrigin.SEED, HistoryOrigin.SETTLED)
        if seeding and not history and self.seed:
            history = list(self.seed)
        elif implements(memory, AppendableMemory) and memory.revision == revision:
            checked = CheckedHistory.repaired(history)
            self._memory_view = (memory.revision, checked)
            return checked
        return history  # the loop repairs whatever it starts from

    async def settle(self) -> None:
        """Before the first run, make ``messages`` what that run would start from.

        That is what the memory holds (a memory left by an earlier process), else the
        seed: the choice :meth:`start` makes. Done once (``SETTLED``), so later edits
        before the first run keep the whole seed even when the memory's window is smaller.
        A history a snapshot gave, or a run committed, is left as it is.
        """
        if self.origin is not HistoryOrigin.SEED:
            return
        stored = await self.stored()
        if stored:
            self._messages = stored
        self.origin = HistoryOrigin.SETTLED

    async def stored(self) -> list[Message]:
        """What the memory holds, without the grounding it may add."""
        return [m for m in await self._memory.load() if not is_grounding(m)]

    def take_start(self, messages: Sequence[Message]) -> None:
        """A snapshot gave ``messages`` as the history: before a first run, never reseeded.

        ``messages`` becomes the history without touching memory (a snapshot without
        messages leaves the memory's history as the start).
        """
        self._messages = list(messages)
        self.mark_snapshot()

    def mark_snapshot(self) -> None:
        """Before the first run, the history now comes from a snapshot (never reseeded)."""
        if not self.committed:
            self.origin = HistoryOrigin.SNAPSHOT

    # -- commit ------------------------------------------------------------------------

    async def commit(
        self,
        transcript: list[Message],
        known: CheckedHistory,
        manager: ConversationManager,
        checked: CheckedHistory | None = None,
        grown_from: CheckedHistory | None = None,
    ) -> tuple[CheckedHistory, CheckedHistory | None]:
        """Manage the transcript, save it to memory, make it ``messages``.

        ``known`` is a checked history the transcript usually begins with (the loop keeps
        one), so only what the run added is checked again; ``checked`` is the transcript
        already checked, when the loop has it, and ``grown_from`` the history it only
        grew from. Returns the committed history and what it grew from (``None`` when
        ``manager`` changed it).
        """
        if checked is None:
            try:
                checked = CheckedHistory.of(transcript, known)
            except InvalidArgumentError:  # the loop keeps it well formed; repair anyway
                checked = CheckedHistory.repaired(transcript)
        if keeps_everything(manager):  # it would hand back the transcript's messages
            history = checked
        else:
            managed = await manager.apply(checked)
            # A manager that keeps everything hands back the transcript's messages: compare
            # list to list (one C-level pass) before anything is checked or copied again.
            if isinstance(managed, list) and managed == transcript:
                history = checked
            else:
                history, grown_from = kept_checked(managed, checked), None
        await self._store(history, grown_from)
        self.origin = HistoryOrigin.COMMITTED
        self.thread = None  # a thread's run binds it again (bind_thread)
        return history, grown_from

    async def _store(self, history: CheckedHistory, grown_from: CheckedHistory | None) -> None:
        """Commit ``history`` to memory and make it ``messages``.

        When the memory still holds the history this one last read or wrote there and
        ``history`` extends it (``grown_from`` says so, or a comparison), only the new
        messages are appended (``save_if``); otherwise the whole history replaces the
        stored one, atomically.
        """
        memory, view = self._memory, self._memory_view
        if view is not None and implements(memory, AppendableMemory):
            revision, held = view
            at = _held_at(held, history, grown_from)
            if at is not None:
                new = history[at + len(held) :]
                appended = await trace_store(
                    "memory", "save", memory, memory.save_if(new, revision=revision)
                )
                if appended is not None:
                    self._memory_view = (appended.revision, history.suffix(at + appended.dropped))
                    self._memory_start = self._memory_view[1]
                    self._messages = history
                    return
        await self.replace(history)
        if implements(memory, AppendableMemory):  # what it holds now, for the next commit
            revision = memory.revision
            stored = await trace_store("memory", "load", memory, memory.load())
            if memory.revision == revision:
                self._memory_view = (revision, CheckedHistory.repaired(stored))

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace memory and ``messages`` with ``messages`` (clear-then-save).

        Atomic where the memory offers ``replace()`` (every shipped backend does), so a
        crash here leaves either the old history or the new one, never an empty memory.
        A memory with ``commit`` merges: messages another writer (another agent, also one
        sharing this memory object) stored since this history read it are kept.
        """
        history = list(messages)
        self._memory_view = None  # read again before the fast path is taken
        start = self._memory_start
        base = None if start is None else {m.id for m in start}
        await trace_store(
            "memory", "save", self._memory, replace_history(self._memory, history, base=base)
        )
        self._memory_start = history
        self._messages = history
        self.thread = None

    # -- threads and the timeline ------------------------------------------------------

    def recall_thread(self, checkpointer: Checkpointer, thread_id: str) -> CheckedHistory | None:
        """The history this one last committed to the thread, if it was the last one."""
        view = self._thread_view
        if view is None or view[0] is not checkpointer or view[1] != thread_id:
            return None
        return view[2]

    def remember_thread(
        self, checkpointer: Checkpointer, thread_id: str, history: CheckedHistory
    ) -> None:
        """Record ``history`` as what this history last committed to the thread."""
        self._thread_view = (checkpointer, thread_id, history)

    def bind_thread(self, checkpointer: Checkpointer, thread_id: str) -> None:
        """``messages`` are now the thread's (its run committed, or it was surfaced)."""
        self.thread = (checkpointer, thread_id)

    def record(
        self, kind: TimelineKind, label: str | None = None, ran: Sequence[ToolCall] = ()
    ) -> TimelineEntry:
        """Append a timeline entry (runs, edits, branches, resumes, snapshots)."""
        return self.timeline.record(kind, label, ran)


def _held_at(
    held: CheckedHistory, history: CheckedHistory, grown_from: CheckedHistory | None
) -> int | None:
    """Where in ``history`` the messages memory holds (``held``) begin, if they do.

    Memory holds the history's beginning (the usual case), or the tail of the history the
    run grew from (a windowed memory under a thread, whose checkpoint keeps it all).
    """
    if held is grown_from or held.starts(history):
        return 0
    if grown_from is not None:
        return held.tail_offset(grown_from)
    return None
