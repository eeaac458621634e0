"""The memory contract: ``load()``, ``save(messages)`` (appends) and ``clear()``.

A memory may also offer ``replace(messages)``: the same result as ``clear()`` followed by
``save(messages)``, in one atomic step. The agent's clear-then-save at the end of a run
goes through :func:`replace_history`, which uses it when present, so a crash between the
clear and the save can never leave a durable memory empty.

A memory shared by several writers merges instead of replacing: the ``replace`` of
``FileMemory``, ``CompactedMemory`` and the database memories keeps the messages another
writer appended since this instance last loaded or wrote, after ``messages``; their
``commit(messages, base=ids)`` (and ``InMemoryMemory``'s) takes that base explicitly. The
agent ends a run with ``replace_history(memory, transcript, base=ids)``, ``ids`` those of
the history the run started from, so turns another agent committed meanwhile are kept,
never overwritten, also when both agents share one memory object. A memory may also
offer ``transact(update)``: a read-modify-write under its lock (what ``CompactedMemory``
uses).

The window helpers (``_window``) are part of the contract too: every memory backend, in
this package or in ``stores/``, windows and checks messages with them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import count
from typing import NamedTuple, Protocol, runtime_checkable

from ..errors import InvalidArgumentError
from ..messages import Message
from ._window import (
    bounded_view,
    check_max_messages,
    check_messages,
    shape_of,
    window,
    window_start,
)

__all__ = [
    "AppendableMemory",
    "Appended",
    "Memory",
    "ReplaceableMemory",
    "base_ids",
    "bounded_view",
    "check_max_messages",
    "check_messages",
    "new_revision",
    "replace_history",
    "shape_of",
    "window",
    "window_start",
]


@runtime_checkable
class Memory(Protocol):
    """Where an agent keeps its history between runs. ``save()`` appends."""

    async def load(self) -> list[Message]:
        """The stored history, oldest first (always well formed)."""
        ...

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the stored history (then apply the memory's window)."""
        ...

    async def clear(self) -> None:
        """Forget the stored history."""
        ...


@runtime_checkable
class ReplaceableMemory(Memory, Protocol):
    """A memory that can swap its whole history atomically."""

    async def replace(self, messages: Sequence[Message]) -> None:
        """Make ``messages`` the stored history in one step (clear + save, atomically)."""
        ...


class Appended(NamedTuple):
    """What :meth:`AppendableMemory.save_if` did.

    ``revision`` is the memory's new revision; ``dropped`` how many of the oldest
    messages its window dropped to make room.
    """

    revision: int
    dropped: int


@runtime_checkable
class AppendableMemory(Memory, Protocol):
    """A memory that says when its history changed, and appends only if it did not.

    This is how an agent commits a turn in what the turn costs, not what the history
    does: while nothing was written since the revision its last commit left
    (:meth:`unchanged`), the memory holds exactly the agent's history (by value), so the
    next run starts from the agent's own messages and its commit appends only the new
    ones.
    """

    @property
    def revision(self) -> int:
        """A number that changes with every write this memory object made or saw.

        A memory another process can write (a file) learns of that process's writes
        only when it looks: :meth:`unchanged` and :meth:`save_if` look.
        """
        ...

    async def unchanged(self, revision: int) -> bool:
        """Whether nothing was written since ``revision``, by anyone (writes nothing)."""
        ...

    async def save_if(self, messages: Sequence[Message], *, revision: int) -> Appended | None:
        """Append ``messages`` if nothing was written since ``revision``; else ``None``.

        ``None`` means nothing was written. The window applies as with ``save()``.
        """
        ...


#: Revisions are unique in the process, so one memory's number never means another's.
_REVISIONS = count(1)


def base_ids(base: object) -> set[str]:
    """A commit's ``base`` (the ids of the history its caller started from) as a set.

    INVALID_ARGUMENT for anything but a collection of ``str`` (a lone ``str`` included).
    """
    if (
        isinstance(base, str | bytes)
        or not isinstance(base, Collection)
        or not all(isinstance(i, str) for i in base)
    ):
        raise InvalidArgumentError(
            f"base must be a collection of message ids (str), not {type(base).__name__}"
        )
    return set(base)


def new_revision() -> int:
    """A revision number no memory of this process has used."""
    return next(_REVISIONS)


async def replace_history(
    memory: Memory, messages: Sequence[Message], *, base: Collection[str] | None = None
) -> None:
    """Clear-then-save ``messages`` into ``memory``, atomically where the memory can.

    ``base``: the ids of the history the caller started from. A memory with
    ``commit(messages, base=...)`` then keeps what others appended since (stored messages
    outside ``base`` and ``messages``), after ``messages``; others replace (their own
    ``replace`` may merge by what the instance read).
    """
    commit = getattr(memory, "commit", None)
    if base is not None and callable(commit):
        await commit(messages, base=base)
    elif isinstance(memory, ReplaceableMemory):
        await memory.replace(messages)
    else:
        await memory.clear()
        await memory.save(messages)
