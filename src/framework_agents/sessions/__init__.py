"""Sessions: byte storages, snapshots and the SessionManager that persists an agent.

See ``docs/sessions.md`` for the key rules, the on-disk layout and the snapshot format.
"""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ._base import LoggedStorage, Storage
    from .local import LocalFileStorage
    from .manager import SessionManager
    from .memory_storage import InMemoryStorage
    from .sealed import SealedStorage
    from .snapshot import Snapshot, SnapshotData, select_snapshot_fields
else:
    _lazy.install(
        globals(),
        {
            "._base": ("LoggedStorage", "Storage"),
            ".local": ("LocalFileStorage",),
            ".manager": ("SessionManager",),
            ".memory_storage": ("InMemoryStorage",),
            ".sealed": ("SealedStorage",),
            ".snapshot": ("Snapshot", "SnapshotData", "select_snapshot_fields"),
        },
    )

__all__ = [
    "InMemoryStorage",
    "LocalFileStorage",
    "LoggedStorage",
    "SealedStorage",
    "SessionManager",
    "Snapshot",
    "SnapshotData",
    "Storage",
    "select_snapshot_fields",
]
