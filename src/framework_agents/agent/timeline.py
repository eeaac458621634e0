"""The agent's timeline: an append-only record of runs, edits, branches, resumes, snapshots.

Entries (:class:`~framework_agents.timeline.TimelineEntry`) are shared with the session,
which saves them with the agent's history and gives them back on restore
(:meth:`Timeline.merge`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgumentError
from ..messages import ToolCall
from ..timeline import TimelineEntry, TimelineKind

__all__ = ["Timeline", "TimelineEntry", "TimelineKind"]


class Timeline:
    """Append-only list of :class:`TimelineEntry`; ``rev`` only grows."""

    __slots__ = ("_entries",)

    def __init__(self, entries: list[TimelineEntry] | None = None) -> None:
        self._entries: list[TimelineEntry] = []
        for entry in entries or []:
            self._append(entry)

    def _append(self, entry: TimelineEntry) -> None:
        if self._entries and entry.rev <= self._entries[-1].rev:
            raise InvalidArgumentError(
                f"timeline revs only grow: {entry.rev} after {self._entries[-1].rev}"
            )
        self._entries.append(entry)

    @property
    def rev(self) -> int:
        """The newest rev (0 for an empty timeline)."""
        return self._entries[-1].rev if self._entries else 0

    def record(
        self, kind: TimelineKind, label: str | None = None, ran: Sequence[ToolCall] = ()
    ) -> TimelineEntry:
        """Append and return a new entry of ``kind``."""
        entry = TimelineEntry(rev=self.rev + 1, kind=kind, label=label, ran=tuple(ran))
        self._entries.append(entry)
        return entry

    def entries(self) -> list[TimelineEntry]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    @property
    def shared_entries(self) -> list[TimelineEntry]:
        """The entries themselves (shared, never to be mutated: :meth:`entries` copies).

        What a save hands the session, which copies what it keeps: a copy here would
        touch every entry once more each run.
        """
        return self._entries

    def merge(self, stored: Sequence[TimelineEntry]) -> None:
        """Make this timeline ``stored`` (a session's, revs growing) followed by what it lacks.

        ``stored`` keeps its entries and their revs: others may have read them. Entries
        of this timeline that ``stored`` lacks (recorded before a restore, or by a run
        whose save another writer's beat) follow, in their order, each keeping its rev
        when that still grows, else taking the next one. An entry is the same as a stored
        one when equal in every field, so merging the same ``stored`` again changes
        nothing. ``rev`` never shrinks: the merged timeline ends at or past both.
        """
        merged = list(stored)
        at_rev = {(e.rev, e.at): e for e in merged}
        last = merged[-1].rev if merged else 0
        for entry in self._entries:
            if at_rev.get((entry.rev, entry.at)) == entry:
                continue
            if entry.rev <= last:
                entry = entry.model_copy(update={"rev": last + 1})
            merged.append(entry)
            last = entry.rev
        self._entries = merged
