"""The swarm's durable state, kept inside any checkpointer's :class:`ThreadCheckpoint`.

A swarm thread is an ordinary thread: ``messages`` is the shared conversation, ``pending``
and the at-most-once fields belong to the member that was running, and ``state`` holds the
members' shared agent state plus, under the reserved key :data:`SWARM_STATE_KEY`, the
swarm's own record::

    state["framework_agents.swarm"] = {
        "version": 1,
        "active": "billing",                 # the member that takes the next turn
        "handoffs": [{"from_agent": "triage", "to_agent": "billing", "message": "..."}],
        "handoff_count": 1,                  # all handoffs (the list keeps the newest 20)
        "context": {"triage": {"order": 42}} # shared context, one JSON object per member
    }

Members run on the swarm's thread through :class:`MemberCheckpointer`, a view of the real
checkpointer: its ``load`` hides the record from the member, every save (progress,
interrupt, commit) writes the record as it stands, and the run lock is the swarm's (held
for the whole swarm run, so a member's run does not take it again). Because the record
rides inside the member's own saves, it is always consistent with the conversation: the
commit of a member that handed off stores the handoff turn, the handoff message for the
next member and ``active`` = that member in one write. This works with every checkpointer
(file, in-memory, SQLite, PostgreSQL, Redis) since it only uses the checkpointer contract.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from ..checkpoint._base import Checkpointer, save_progress
from ..checkpoint.model import ThreadCheckpoint
from ..errors import CheckpointCorruptError, InvalidArgumentError
from ..messages import Message
from ._types import Handoff

__all__ = [
    "MAX_STORED_HANDOFFS",
    "SWARM_STATE_FORMAT_VERSION",
    "SWARM_STATE_KEY",
    "MemberCheckpointer",
    "SwarmRecord",
    "read_record",
]

#: The key of the swarm's record in a thread's ``state`` (reserved: members never see it).
SWARM_STATE_KEY = "framework_agents.swarm"

#: Version of the record's JSON shape; readers refuse newer ones (CHECKPOINT_CORRUPT).
SWARM_STATE_FORMAT_VERSION = 1

#: Handoffs a thread's record keeps (the newest): the record rides with every save, so it
#: must not grow with the thread's age. ``handoff_count`` counts them all.
MAX_STORED_HANDOFFS = 20


class _StoredHandoff(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    from_agent: str
    to_agent: str
    message: str


class SwarmRecord(BaseModel):
    """The swarm's part of a thread: active member, handoffs and shared context."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(SWARM_STATE_FORMAT_VERSION, strict=True)
    active: str
    handoffs: list[_StoredHandoff] = Field(default_factory=list)
    handoff_count: int = Field(0, strict=True, ge=0)
    context: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)

    def followed(self, handoff: Handoff, context: dict[str, JsonValue] | None) -> SwarmRecord:
        """This record after ``handoff``: the target is active, the context merged in."""
        shared = {k: dict(v) for k, v in self.context.items()}
        if context:
            shared.setdefault(handoff.from_agent, {}).update(context)
        stored = _StoredHandoff(**handoff.to_dict())
        return self.model_copy(
            update={
                "active": handoff.to_agent,
                "handoffs": [*self.handoffs, stored][-MAX_STORED_HANDOFFS:],
                "handoff_count": max(self.handoff_count, len(self.handoffs)) + 1,
                "context": shared,
            }
        )

    def as_state(self) -> dict[str, Any]:
        """The JSON object stored under :data:`SWARM_STATE_KEY`."""
        return self.model_dump(mode="json")

    def context_dict(self) -> dict[str, dict[str, Any]]:
        """The shared context as plain dicts (a copy)."""
        return {k: dict(v) for k, v in self.context.items()}


def read_record(checkpoint: ThreadCheckpoint | None, entry: str) -> SwarmRecord:
    """The record stored in ``checkpoint`` (a fresh one at ``entry`` when there is none).

    A record of the wrong shape or a newer version raises ``CHECKPOINT_CORRUPT``: the
    thread is left untouched rather than silently restarted at the entry member.
    """
    if checkpoint is None or SWARM_STATE_KEY not in checkpoint.state:
        return SwarmRecord(active=entry)
    raw = checkpoint.state[SWARM_STATE_KEY]
    try:
        record = SwarmRecord.model_validate(raw)
    except ValidationError as exc:
        raise CheckpointCorruptError(
            f"thread {checkpoint.thread_id!r} holds a swarm state of the wrong shape: "
            f"{exc.errors(include_url=False)[:3]}"
        ) from None
    if record.version > SWARM_STATE_FORMAT_VERSION:
        raise CheckpointCorruptError(
            f"thread {checkpoint.thread_id!r} holds swarm state version {record.version}, "
            f"newer than this framework-agents understands ({SWARM_STATE_FORMAT_VERSION})"
        )
    return record


class MemberCheckpointer:
    """A member's view of the swarm's checkpointer for one thread (module docstring).

    ``record()`` returns ``(record, extra)``: the record to store with every save, and,
    when the member's run is committing a handoff, the handoff message to append to the
    conversation in the same write (``None`` otherwise).
    """

    def __init__(
        self,
        inner: Checkpointer,
        thread_id: str,
        record: Callable[[bool], tuple[SwarmRecord, Message | None]],
    ) -> None:
        self.inner = inner
        self.thread_id = thread_id
        self._record = record
        self.lock_timeout = getattr(inner, "lock_timeout", None)

    def _check(self, thread_id: str) -> None:
        if thread_id != self.thread_id:
            raise InvalidArgumentError(
                f"a swarm member runs on thread {self.thread_id!r} only, not {thread_id!r}"
            )

    def _with_record(self, checkpoint: ThreadCheckpoint) -> ThreadCheckpoint:
        self._check(checkpoint.thread_id)
        # A save with no open turn and nothing pending is the end of the member's run.
        final = checkpoint.turn is None and checkpoint.pending is None
        record, extra = self._record(final)
        state = {**checkpoint.state, SWARM_STATE_KEY: record.as_state()}
        update: dict[str, Any] = {"state": state}
        if extra is not None and final:
            update["messages"] = [*checkpoint.messages, extra]
        return checkpoint.model_copy(update=update)

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Save ``checkpoint`` with the swarm's record (and a committed handoff's message)."""
        await self.inner.save(self._with_record(checkpoint))

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """Like :meth:`save`, as a delta where the real checkpointer can."""
        await save_progress(self.inner, self._with_record(checkpoint))

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint without the swarm's record in its state."""
        self._check(thread_id)
        checkpoint = await self.inner.load(thread_id)
        if checkpoint is None or SWARM_STATE_KEY not in checkpoint.state:
            return checkpoint
        state = {k: v for k, v in checkpoint.state.items() if k != SWARM_STATE_KEY}
        return checkpoint.model_copy(update={"state": state})

    async def delete(self, thread_id: str) -> None:
        """Refused: a member never deletes the swarm's thread."""
        raise InvalidArgumentError("a swarm member cannot delete the swarm's thread")

    async def list_threads(self) -> list[str]:
        """The one thread this view exposes."""
        return [self.thread_id]

    @contextlib.asynccontextmanager
    async def thread_lock(self, thread_id: str) -> AsyncIterator[None]:
        """Nothing to take: the swarm holds the thread's lock for its whole run."""
        self._check(thread_id)
        yield
