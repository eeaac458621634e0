"""Checkpoints of threads, the crash-safe file lock, and the checkpointer contract.

See ``docs/checkpoints.md`` for the layout, the lock protocol and the HITL at-most-once
protocol that the agent builds on these pieces.
"""

from ._base import Checkpointer
from .file import FileCheckpointer
from .lock import lock_holder, with_file_lock
from .memory import InMemoryCheckpointer
from .model import CHECKPOINT_FORMAT_VERSION, ThreadCheckpoint

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "Checkpointer",
    "FileCheckpointer",
    "InMemoryCheckpointer",
    "ThreadCheckpoint",
    "lock_holder",
    "with_file_lock",
]
