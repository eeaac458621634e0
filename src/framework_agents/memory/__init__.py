"""Memory backends: where an agent's history lives between runs."""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ._base import AppendableMemory, Appended, Memory, ReplaceableMemory, replace_history
    from .compacted import COMPACTION_PREFIX, CompactedMemory
    from .file import FileMemory
    from .grounding import GROUNDING_KIND, GroundingMemory, is_grounding
    from .in_memory import InMemoryMemory
else:
    _lazy.install(
        globals(),
        {
            "._base": (
                "AppendableMemory",
                "Appended",
                "Memory",
                "ReplaceableMemory",
                "replace_history",
            ),
            ".compacted": ("COMPACTION_PREFIX", "CompactedMemory"),
            ".file": ("FileMemory",),
            ".grounding": ("GROUNDING_KIND", "GroundingMemory", "is_grounding"),
            ".in_memory": ("InMemoryMemory",),
        },
    )

__all__ = [
    "COMPACTION_PREFIX",
    "AppendableMemory",
    "Appended",
    "CompactedMemory",
    "FileMemory",
    "GROUNDING_KIND",
    "GroundingMemory",
    "InMemoryMemory",
    "Memory",
    "ReplaceableMemory",
    "is_grounding",
    "replace_history",
]
