"""``SessionManager``: an agent's latest and immutable snapshots inside one storage.

Key layout (``<sid>`` the session id, ``<aid>`` the agent id)::

    session/<sid>/scopes/agent/<aid>/snapshots/snapshot_latest.json   # overwritten each run
    session/<sid>/scopes/agent/<aid>/snapshots/<snapshot_id>.json     # immutable, UUIDv7 ids

Session and agent ids become key segments, so they obey the storage segment rules
(ASCII letters, digits, ``._-``, no dot at either end, ...) and a bad one raises
``STORAGE_KEY_INVALID`` at construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ..errors import (
    InvalidArgumentError,
    SnapshotCorruptError,
    SnapshotMissingError,
)
from ._base import ArgumentTypeError, Storage, digest, swap
from ._keys import validate_segment
from .snapshot import Snapshot, SnapshotData, is_snapshot_id

__all__ = ["LATEST_NAME", "SessionManager"]

#: File name of the latest snapshot inside an agent's ``snapshots`` directory.
LATEST_NAME = "snapshot_latest.json"
_SUFFIX = ".json"


class _Unread:
    """Sentinel: this manager has not read or written the latest snapshot yet."""


_UNREAD = _Unread()


class SessionManager:
    """Saves and restores one agent's snapshots of one session in a :class:`Storage`."""

    def __init__(self, session_id: str, storage: Storage, agent_id: str = "default") -> None:
        """Create it; arguments are described in the class docstring."""
        self.session_id: str = validate_segment(session_id, what="session_id")
        self.agent_id: str = validate_segment(agent_id, what="agent_id")
        if not isinstance(storage, Storage):
            raise ArgumentTypeError(
                f"storage must be a Storage (put/get/delete/list), not {type(storage).__name__}"
            )
        self.storage: Storage = storage
        self._prefix = f"session/{session_id}/scopes/agent/{agent_id}/snapshots/"
        # Digest of the latest snapshot as this manager last read or wrote it (None: there
        # was none); _UNREAD until then (the first write is then a plain put).
        self._latest: str | _Unread | None = _UNREAD

    def __repr__(self) -> str:
        """A developer-facing description."""
        return (
            f"SessionManager(session_id={self.session_id!r}, storage={self.storage!r}, "
            f"agent_id={self.agent_id!r})"
        )

    @property
    def latest_key(self) -> str:
        """The storage key of the latest snapshot."""
        return self._prefix + LATEST_NAME

    def snapshot_key(self, snapshot_id: str) -> str:
        """The storage key of the immutable snapshot ``snapshot_id`` (a UUID string)."""
        if not is_snapshot_id(snapshot_id):
            raise SnapshotMissingError(
                f"no snapshot {snapshot_id!r}: snapshot ids are canonical UUID strings"
            )
        return f"{self._prefix}{snapshot_id}{_SUFFIX}"

    async def save_latest(self, snapshot: Snapshot) -> None:
        """Atomically replace the latest snapshot with ``snapshot``.

        Once this manager has read or written the latest snapshot, the write is a
        compare-and-swap (when the storage can, see ``Storage``): if another writer
        replaced it since, nothing is written and ``CHECKPOINT_CONFLICT`` is raised, so an
        acknowledged update is never overwritten by a writer that did not see it. Call
        :meth:`load_latest` again, apply the change, and save.
        """
        if not isinstance(snapshot, Snapshot):
            raise ArgumentTypeError(
                f"save_latest() takes a Snapshot, not {type(snapshot).__name__}"
            )
        data = snapshot.to_json()
        known = self._latest
        if isinstance(known, _Unread):
            await self.storage.put(self.latest_key, data)
        else:
            await swap(self.storage, self.latest_key, data, known)
        self._latest = digest(data)

    async def load_latest(self) -> Snapshot | None:
        """The latest snapshot, or ``None`` when the session has none (``SNAPSHOT_CORRUPT``)."""
        raw = await self.storage.get(self.latest_key)
        if raw is None:
            self._latest = None
            return None
        snapshot = Snapshot.from_json(raw, source=f"snapshot {self.latest_key!r}")
        self._latest = digest(raw)
        return snapshot

    async def save_snapshot(
        self, data: SnapshotData | Mapping[str, Any], app_data: Any = None
    ) -> str:
        """Store a new immutable snapshot of ``data``; return its id."""
        if not isinstance(data, SnapshotData):
            if not isinstance(data, Mapping):
                raise ArgumentTypeError(
                    f"save_snapshot() takes SnapshotData or a mapping, not {type(data).__name__}"
                )
            try:
                data = SnapshotData.model_validate(data)
            except ValidationError as exc:
                raise InvalidArgumentError(
                    f"save_snapshot() data is wrongly shaped: {exc}"
                ) from None
        snapshot = Snapshot(data, app_data=app_data)
        await self.storage.put(self.snapshot_key(snapshot.snapshot_id), snapshot.to_json())
        return snapshot.snapshot_id

    async def list_snapshot_ids(self) -> list[str]:
        """Ids of the immutable snapshots, oldest first (UUIDv7 ids sort by time)."""
        ids = []
        for key in await self.storage.list(self._prefix):
            name = key[len(self._prefix) :]
            if name.endswith(_SUFFIX) and is_snapshot_id(name[: -len(_SUFFIX)]):
                ids.append(name[: -len(_SUFFIX)])
        return sorted(ids)

    async def restore_snapshot(self, snapshot_id: str) -> Snapshot:
        """The immutable snapshot ``snapshot_id`` (``SNAPSHOT_MISSING`` when unknown)."""
        key = self.snapshot_key(snapshot_id)
        raw = await self.storage.get(key)
        if raw is None:
            raise SnapshotMissingError(
                f"no snapshot {snapshot_id!r} in session {self.session_id!r}"
            )
        snapshot = Snapshot.from_json(raw, source=f"snapshot {key!r}")
        if snapshot.snapshot_id != snapshot_id:
            raise SnapshotCorruptError(
                f"snapshot {key!r} holds id {snapshot.snapshot_id!r}, not {snapshot_id!r}"
            )
        return snapshot

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """Remove the immutable snapshot ``snapshot_id`` (no-op when it does not exist)."""
        await self.storage.delete(self.snapshot_key(snapshot_id))
