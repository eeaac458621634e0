"""Checkpoints of threads, the crash-safe file lock, and the checkpointer contract.

See ``docs/checkpoints.md`` for the layout, the lock protocol and the HITL at-most-once
protocol that the agent builds on these pieces.
"""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ._base import Checkpointer
    from .file import FileCheckpointer
    from .lock import lock_holder, with_file_lock
    from .memory import InMemoryCheckpointer
    from .model import CHECKPOINT_FORMAT_VERSION, ThreadCheckpoint
else:
    _lazy.install(
        globals(),
        {
            "._base": ("Checkpointer",),
            ".file": ("FileCheckpointer",),
            ".lock": ("lock_holder", "with_file_lock"),
            ".memory": ("InMemoryCheckpointer",),
            ".model": ("CHECKPOINT_FORMAT_VERSION", "ThreadCheckpoint"),
        },
    )

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "Checkpointer",
    "FileCheckpointer",
    "InMemoryCheckpointer",
    "ThreadCheckpoint",
    "lock_holder",
    "with_file_lock",
]
