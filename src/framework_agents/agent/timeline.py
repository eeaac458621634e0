"""The agent's timeline: an append-only record of runs, edits, branches, resumes, snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from .._util import as_utc
from ..errors import InvalidArgumentError
from ..messages import ToolCall

__all__ = ["Timeline", "TimelineEntry", "TimelineKind"]

TimelineKind = Literal["run", "edit", "branch", "resume", "snapshot"]


def _now() -> datetime:
    return datetime.now(UTC)


class TimelineEntry(BaseModel):
    """One event of an agent's life: ``rev`` counts from 1, ``at`` is UTC.

    ``ran`` lists the approval calls (``requires_approval`` tools a decision let run) that
    ran during a run or resume, with the arguments they actually ran with: after a
    bare-name approval of a re-issued call, these may differ from what a human was shown.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rev: int = Field(ge=1)
    kind: TimelineKind
    label: str | None = None
    at: AwareDatetime = Field(default_factory=_now)
    ran: tuple[ToolCall, ...] = ()

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value, "at")


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
