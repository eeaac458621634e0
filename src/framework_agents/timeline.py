"""Timeline entries: one event of an agent's life, as the agent records it and a session stores it.

The vocabulary shared by the agent, which appends entries to its timeline
(``framework_agents.agent.timeline.Timeline``), and the session, whose latest snapshot
carries them (``SnapshotData.timeline``). Stored form of one entry::

    {"rev": 3, "kind": "run", "label": null, "at": "2024-07-01T12:00:00Z", "ran": []}
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from ._util import as_utc
from .messages import ToolCall

__all__ = ["TimelineEntry", "TimelineKind"]

#: What an entry records: a run, an edit, a branch, a resume or a snapshot.
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
