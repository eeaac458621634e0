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
from collections.abc import Sequence

from .._util import maybe_await
from ..errors import InvalidArgumentError
from ..history import INTERRUPTED_TEXT
from ..messages import Message
from ..summarize import Summarizer, extractive_summary
from ._base import Memory, replace_history
from ._window import LoopLocks, check_max_messages, check_messages

__all__ = ["COMPACTION_PREFIX", "CompactedMemory"]

#: Opening of every boundary message's text.
COMPACTION_PREFIX = "Summary of the earlier conversation:\n"


def _is_placeholder(msg: Message) -> bool:
    """A result ``repair_history`` synthesised (it makes the same one again when needed)."""
    return (
        msg.role == "tool"
        and msg.kind == "interrupted"
        and msg.id == f"interrupted-{msg.tool_call_id}"
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
    loads the inner history, appends, compacts, and writes the result back in one
    ``inner.replace()`` when the inner memory has one (``InMemoryMemory`` and
    ``FileMemory`` do; it is atomic there), else with ``inner.clear()`` then
    ``inner.save()``. A save that needs no compaction is a plain ``inner.save()`` of the
    new messages. Either way no message is duplicated or lost. Saves through one
    instance are serialised; the load-compact-replace of several processes sharing one
    file is not (each process's ``FileMemory`` append is, but a compaction may drop an
    append another process made in between), so share a compacted file memory between
    processes only if one of them writes.

    Give ``inner`` a window at least as large as ``max_messages``: what the inner memory
    windows away is gone before it can be summarised.
    """

    def __init__(
        self,
        inner: Memory,
        max_messages: int = 40,
        summarize: Summarizer | None = None,
    ) -> None:
        if not isinstance(inner, Memory):
            raise InvalidArgumentError(
                f"inner must be a Memory (load/save/clear), got {type(inner).__name__}"
            )
        if summarize is not None and not callable(summarize):
            raise InvalidArgumentError("summarize must be a callable (messages) -> str")
        self.inner: Memory = inner
        self.max_messages: int = check_max_messages(max_messages)
        self.summarize: Summarizer = summarize if summarize is not None else extractive_summary
        self._locks = LoopLocks()

    async def load(self) -> list[Message]:
        """The inner history; compacted in the returned copy if it is over the bound.

        Only histories written past this memory (straight into ``inner``) can be over the
        bound; such a view is compacted without being stored.
        """
        history = await self.inner.load()
        if len(history) <= self.max_messages:
            return history
        return await self._compact(history)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages``; compact the oldest ones into a boundary past the bound."""
        new = check_messages(messages)
        async with self._locks.get(None):
            existing = await self.inner.load()
            # ``load()`` closes the last turn's unanswered calls with synthesised results;
            # they must not stand in front of real results this save may bring for those
            # calls. Dropping them loses nothing: repair makes the same ones again.
            while existing and _is_placeholder(existing[-1]):
                existing.pop()
            combined = [*existing, *new]
            if len(combined) <= self.max_messages:
                await self.inner.save(new)
                return
            await self._write(await self._compact(combined))

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace the stored history with ``messages``, compacted if over the bound."""
        history = check_messages(messages)
        async with self._locks.get(None):
            if len(history) > self.max_messages:
                history = await self._compact(history)
            await self._write(history)

    async def clear(self) -> None:
        """Forget the stored history (boundaries included)."""
        async with self._locks.get(None):
            await self.inner.clear()

    def __repr__(self) -> str:
        return f"CompactedMemory({self.inner!r}, max_messages={self.max_messages})"

    async def _write(self, history: list[Message]) -> None:
        await replace_history(self.inner, history)

    async def _compact(self, history: list[Message]) -> list[Message]:
        """``[boundary, *tail]`` with ``len(tail) <= max_messages - 1``, cut between groups."""
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


def _for_summary(msg: Message) -> Message:
    """An earlier boundary without its prefix, so rolled-up summaries do not nest it."""
    if msg.kind == "compaction" and msg.text.startswith(COMPACTION_PREFIX):
        return msg.model_copy(update={"content": msg.text[len(COMPACTION_PREFIX) :]})
    return msg
