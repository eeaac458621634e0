"""``InMemoryMemory``: a process-local history, the agent's default memory."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence

from .._persist import LoopLocks
from ..messages import FrozenMessage, Message, freeze_message, frozen_field, thaw_message
from ._base import Appended, base_ids, new_revision
from ._window import (
    OTHER,
    TOOL,
    bounded_view,
    check_max_messages,
    check_messages,
    shape_of,
    window,
    window_start,
)

__all__ = ["InMemoryMemory"]

_frozen_id = frozen_field("id")


class InMemoryMemory:
    """Keeps the newest ``max_messages`` messages in this process; ``save()`` appends.

    Messages are copied on the way in and on the way out, so a caller that mutates what
    it saved or loaded never changes what is stored: text-only messages are kept as
    tuples (``freeze_message``: immutable, and nothing for the garbage collector to walk),
    others as deep copies; ``load()`` builds new messages. What was saved is stored as given
    (minus what falls out of the window); ``load()`` returns it repaired, so the history
    is well formed even if malformed messages were saved.

    ``revision`` changes with every write and ``save_if`` appends only while it has not
    (:class:`~framework_agents.memory.AppendableMemory`): that is how the agent's commit
    of a turn costs the turn, not the history.

    Saves are idempotent by message id, as in every other memory: ``save()`` skips a
    message whose id is stored already (or given earlier in the call), and ``save_if``
    writes nothing then.
    """

    def __init__(self, max_messages: int = 50) -> None:
        """Create it; arguments are described in the class docstring."""
        self.max_messages: int = check_max_messages(max_messages)
        self._stored: list[FrozenMessage] = []
        self._ids: set[str] = set()  # the ids of what is stored
        self._locks = LoopLocks()
        self._revision = new_revision()

    @property
    def revision(self) -> int:
        """Changes with every write (unique across the process's memories)."""
        return self._revision

    async def unchanged(self, revision: int) -> bool:
        """Whether nothing was written since ``revision`` (only this process writes)."""
        return revision == self._revision

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages`` (copies)."""
        return bounded_view([thaw_message(f) for f in self._stored], self.max_messages)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append copies of the messages whose ids are not stored, then window."""
        given = check_messages(messages)
        ids, fresh = self._ids, []
        for m in given:
            if m.id not in ids:
                ids.add(m.id)  # the first of two messages with one id wins
                fresh.append(m)
        if fresh:
            self._append(fresh)

    async def save_if(self, messages: Sequence[Message], *, revision: int) -> Appended | None:
        """Append copies of ``messages`` if nothing was written since ``revision``.

        ``None`` (nothing written) also when a message's id is stored already or given
        twice (the append would then not extend the history as given).
        """
        added = check_messages(messages)
        if revision != self._revision:
            return None
        new_ids = {m.id for m in added}
        if len(new_ids) != len(added) or not self._ids.isdisjoint(new_ids):
            return None
        self._ids |= new_ids
        dropped = self._append(added)
        return Appended(self._revision, dropped)

    def _append(self, added: list[Message]) -> int:
        """Append copies of ``added`` (their ids noted), window; how many the window dropped."""
        frozen = [freeze_message(m) for m in added]  # all copied before anything changes
        kept = self._stored  # never handed out: grown in place, O(len(added))
        kept.extend(frozen)
        cut = 0
        if len(kept) > self.max_messages:
            cut = window_start(_Shapes(kept), self.max_messages)
            self._ids.difference_update(_frozen_id(f) for f in kept[:cut])
            del kept[:cut]
        self._revision = new_revision()
        return cut

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace the stored history with copies of ``messages`` (windowed), in one step."""
        self._store(check_messages(messages))

    def _store(self, messages: list[Message]) -> None:
        # Window first: only what is kept is copied (the cut depends on values alone).
        self._stored = [freeze_message(m) for m in window(messages, self.max_messages)]
        self._ids = {_frozen_id(f) for f in self._stored}
        self._revision = new_revision()

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """Make ``messages`` the history, keeping what others appended since ``base``.

        ``base`` is the ids of the history the caller started from (``None``: replace
        everything). Stored messages outside ``base`` and outside ``messages`` were
        appended by another writer (another agent sharing this memory) meanwhile: they
        are kept, after ``messages``; stored ones in ``base`` but not in ``messages`` are
        removed. The window applies to the result.
        """
        given = check_messages(messages)
        ids = {m.id for m in given}
        seen = None if base is None else base_ids(base)
        others = (
            []
            if seen is None
            else [f for f in self._stored if (i := _frozen_id(f)) not in seen and i not in ids]
        )
        self._store([*given, *map(thaw_message, others)] if others else given)

    async def transact(
        self, update: Callable[[list[Message]], Awaitable[Sequence[Message]]]
    ) -> None:
        """Run ``update(history)`` and store its result; other transactions wait meanwhile."""
        async with self._locks.hold(None):
            await self.replace(await update(await self.load()))

    async def clear(self) -> None:
        """Forget the stored history."""
        self._stored = []
        self._ids = set()
        self._revision = new_revision()

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"InMemoryMemory(max_messages={self.max_messages}, stored={len(self._stored)})"


class _Shapes(Sequence[int]):
    """The window shapes of stored messages, computed only where ``window_start`` looks."""

    __slots__ = ("_stored",)

    def __init__(self, stored: list[FrozenMessage]) -> None:
        self._stored = stored

    def __len__(self) -> int:
        return len(self._stored)

    def __getitem__(self, i: int) -> int:  # type: ignore[override]
        return _shape(self._stored[i])


def _shape(frozen: FrozenMessage) -> int:
    """The window shape of a stored message (a frozen one is text-only: no tool calls)."""
    if isinstance(frozen, Message):
        return shape_of(frozen)
    return TOOL if frozen[0] == "tool" else OTHER
