"""Memory backends: where an agent's history lives between runs."""

from ._base import Memory, ReplaceableMemory, replace_history
from .compacted import COMPACTION_PREFIX, CompactedMemory
from .file import FileMemory
from .in_memory import InMemoryMemory

__all__ = [
    "COMPACTION_PREFIX",
    "CompactedMemory",
    "FileMemory",
    "InMemoryMemory",
    "Memory",
    "ReplaceableMemory",
    "replace_history",
]
