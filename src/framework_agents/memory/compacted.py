"""``CompactedMemory``: past its bound, the oldest messages become one summary message.

The boundary message has ``role="user"``: it opens the stored history, and several
providers require a history to open with a user turn (and none rejects a user turn
there), while consecutive user turns are accepted or merged everywhere. Its text starts
with ``COMPACTION_PREFIX`` so a model reads it as a recap, not as a new request, and its
metadata is ``{"kind": "compaction", "covers": N}`` with ``N`` the number of original
messages it stands for (rolled up across compactions).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Collection, Sequence

from .._persist import LoopLocks
from .._util import maybe_await
from ..errors import InvalidArgumentError
from ..history import INTERRUPTED_TEXT
from ..messages import Message
from ..summarize import Summarizer, extractive_summary
from ._base import Memory, base_ids, replace_history
from ._window import check_max_messages, check_messages

__all__ = ["COMPACTION_PREFIX", "CompactedMemory"]

#: In-process serialisation of compactions of inner memories without ``transact``.
_INNER_LOCKS = LoopLocks()

_Update = Callable[[list[Message]], Awaitable[list[Message]]]

#: Opening of every boundary message's text.
COMPACTION_PREFIX = "Summary of the earlier conversation:\n"


def _is_placeholder(msg: Message) -> bool:
    """A result ``repair_history`` synthesised (it makes the same one again when needed)."""
    return (
        msg.role == "tool"
        and msg.kind == "interrupted"
        and msg.tool_call_id is not None
        and msg.id.startswith("interrupted-")  # -<turn id>-<call id> (-<call id> before)
        and msg.id.endswith(f"-{msg.tool_call_id}")
        and msg.text == INTERRUPTED_TEXT
    )


def _covers(msg: Message) -> int:
    if msg.kind == "compaction":
        covers = msg.metadata.get("covers")
        if isinstance(covers, int) and not isinstance(covers, bool) and covers > 0:
            return covers
    return 1


class CompactedMemory:
    """Wraps any memory; past ``max_messages`` the oldest messages become one summary.

    When the history would exceed ``max_messages``, the overflow head (the oldest
    messages, an earlier boundary included, so summaries roll up) is summarised with
    ``summarize(messages) -> str`` (sync or async; default
    :func:`~framework_agents.summarize.extractive_summary`) and replaced by one boundary
    message (``metadata["kind"] == "compaction"``). The cut falls between groups, so the
    kept tail keeps every tool result with its call; the stored length stays
    ``<= max_messages``.

    Because ``inner.save()`` appends, a compacting save cannot be a plain append: it
    loads the inner history, appends the messages whose ids are not stored yet, compacts
    when over the bound, and writes the result back (an append when nothing was
    compacted). ``replace()`` keeps the messages another writer appended since this
    instance loaded, like ``FileMemory.replace``. Either way no message is duplicated or
    lost: the whole read-compact-write runs under the inner memory's lock
    (``transact``), so instances and processes sharing one ``FileMemory`` neither lose
    nor duplicate an append; a retried save (same message ids) appends nothing twice.

    Give ``inner`` a window at least as large as ``max_messages``: what the inner memory
    windows away is gone before it can be summarised.
    """

    def __init__(
        self,
        inner: Memory,
        max_messages: int = 40,
        summarize: Summarizer | None = None,
    ) -> None:
        """Create it; arguments are described in the class docstring."""
        if not isinstance(inner, Memory):
            raise InvalidArgumentError(
                f"inner must be a Memory (load/save/clear), got {type(inner).__name__}"
            )
        if summarize is not None and not callable(summarize):
            raise InvalidArgumentError("summarize must be a callable (messages) -> str")
        self.inner: Memory = inner
        self.max_messages: int = check_max_messages(max_messages)
        self.summarize: Summarizer = summarize if summarize is not None else extractive_summary
        self._compactions = 0  # how many compactions this instance made
        # Ids of the inner history this instance last loaded: the base of replace()'s merge.
        self._seen: set[str] | None = None

    async def load(self) -> list[Message]:
        """The inner history; compacted in the returned copy if it is over the bound.

        Only histories written past this memory (straight into ``inner``) can be over the
        bound; such a view is compacted without being stored.
        """
        history = await self.inner.load()
        self._seen = {m.id for m in history}
        if len(history) <= self.max_messages:
            return history
        return await self._compact(history)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages``; compact the oldest ones into a boundary past the bound."""
        new = check_messages(messages)

        async def update(existing: list[Message]) -> list[Message]:
            # ``load()`` closes the last turn's unanswered calls with synthesised results;
            # they must not stand in front of real results this save may bring for those
            # calls. Dropping them loses nothing: repair makes the same ones again.
            while existing and _is_placeholder(existing[-1]):
                existing.pop()
            ids = {m.id for m in existing}
            combined = [*existing, *(m for m in new if m.id not in ids)]
            if len(combined) <= self.max_messages:
                return combined
            return await self._compact(combined)

        await self._transact(update)
        if self._seen is not None:  # what this instance saved is part of what it knows
            self._seen.update(m.id for m in new)

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace the stored history with ``messages``, compacted if over the bound.

        Messages another writer appended since this instance last loaded or wrote are
        kept (after ``messages``); an instance that has done neither replaces it whole.
        """
        await self.commit(messages)

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """Make ``messages`` the history, merged with what others appended since ``base``.

        ``base``: the ids of the history the caller started from (default: what this
        instance last loaded or wrote; ``None`` then: nothing is merged). Stored
        messages outside ``base`` and ``messages`` were appended by another writer
        meanwhile and are kept, after ``messages``, as ``FileMemory.commit`` keeps them;
        stored ones in ``base`` but not in ``messages`` are removed. Compacted past the
        bound; the whole step runs under the inner memory's lock.
        """
        history = check_messages(messages)
        seen = self._seen if base is None else base_ids(base)
        written: list[Message] = []

        async def update(existing: list[Message]) -> list[Message]:
            ids = {m.id for m in history}
            merged = [*history] if seen is None else _merged(existing, seen, history, ids)
            if len(merged) > self.max_messages:
                merged = await self._compact(merged)
            written[:] = merged
            return merged

        await self._transact(update)
        # What is stored now is what this instance knows (the base of its next merge).
        self._seen = {m.id for m in written}

    async def clear(self) -> None:
        """Forget the stored history (boundaries included)."""
        transact = getattr(self.inner, "transact", None)
        if callable(transact):

            async def empty(existing: list[Message]) -> list[Message]:
                return []

            await transact(empty)
            return
        async with _INNER_LOCKS.hold(id(self.inner)):
            await self.inner.clear()

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"CompactedMemory({self.inner!r}, max_messages={self.max_messages})"

    async def _transact(self, update: _Update) -> None:
        """Read, update and write the inner history with no other writer in between.

        A memory with ``transact`` (``FileMemory``, ``InMemoryMemory``) holds its own lock
        (``flock`` across processes for files) for the whole step, so every instance and
        process sharing it is excluded. Any other memory is serialised per inner object in
        this process only: share such a memory between processes only if one writes.
        """
        transact = getattr(self.inner, "transact", None)
        if callable(transact):
            await transact(update)
            return
        async with _INNER_LOCKS.hold(id(self.inner)):
            existing = await self.inner.load()
            compactions = self._compactions
            history = await update(existing)  # may drop trailing placeholders of existing
            n = len(existing)
            if compactions == self._compactions and [m.id for m in history[:n]] == [
                m.id for m in existing
            ]:
                await self.inner.save(history[n:])  # nothing compacted: a plain append
            else:
                await replace_history(self.inner, history)

    async def _compact(self, history: list[Message]) -> list[Message]:
        """``[boundary, *tail]`` with ``len(tail) <= max_messages - 1``, cut between groups."""
        self._compactions += 1
        n = len(history)
        # The tail starts at the first non-tool message that leaves room for the boundary:
        # a tool message there belongs to a group that began earlier (or is an orphan), so
        # it goes into the head with its group.
        start = n - (self.max_messages - 1)
        while start < n and history[start].role == "tool":
            start += 1
        head, tail = history[:start], history[start:]
        summary = await maybe_await(self.summarize([_for_summary(m) for m in head]))
        if not isinstance(summary, str):
            raise InvalidArgumentError(f"summarize must return a str, got {type(summary).__name__}")
        # The id derives from what it summarises, so loading one history twice (or
        # compacting the same head in two backends) gives the same boundary.
        digest = hashlib.sha256("\0".join(m.id for m in head).encode()).hexdigest()
        boundary = Message(
            "user",
            COMPACTION_PREFIX + summary,
            id=f"compaction-{digest[:32]}",
            metadata={"kind": "compaction", "covers": sum(_covers(m) for m in head)},
        )
        return [boundary, *tail]


def _merged(
    existing: list[Message], seen: set[str], history: list[Message], ids: set[str]
) -> list[Message]:
    """``history`` merged with what another writer did to the store since ``seen``.

    What others appended is kept, after ``history``. Another writer that compacted
    meanwhile replaced the oldest stored messages with its boundary, which rolled up the
    boundary before it: the messages of ``history`` that left the store since ``seen``
    are in that summary. They are dropped and the boundary leads (it stands for the
    oldest part), so nothing is summarised twice (keeping both put a boundary after newer
    messages and made ``covers`` count them again, compounding with every round).
    """
    others = [m for m in existing if m.id not in seen and m.id not in ids]
    boundaries = [m for m in others if m.kind == "compaction"]
    if not boundaries:
        return [*history, *others]
    stored = {m.id for m in existing}
    kept = [m for m in history if m.id in stored or m.id not in seen]
    rest = [m for m in others if m.kind != "compaction"]
    return [*boundaries, *kept, *rest]


def _for_summary(msg: Message) -> Message:
    """An earlier boundary without its prefix, so rolled-up summaries do not nest it."""
    if msg.kind == "compaction" and msg.text.startswith(COMPACTION_PREFIX):
        return msg.model_copy(update={"content": msg.text[len(COMPACTION_PREFIX) :]})
    return msg
