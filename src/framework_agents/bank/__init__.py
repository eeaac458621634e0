"""Long-term memory people can search: :class:`MemoryBank` and :class:`BankMemory`.

A bank keeps records (facts, episodes, preferences, ...) in namespaces, with two clocks
(when a record holds in the world, and when the bank learnt it), finds them by words and
meaning, and forgets them for good. ``BankMemory`` grounds an agent on what is relevant
and gives its model tools to search, remember and forget within the namespace the
application chose. See ``docs/memory-bank.md``.
"""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ._records import MemoryHit, MemoryRecord, Namespace
    from .bank import Embedder, MemoryBank
    from .memory import RECALL_HEADER, BankMemory
else:
    _lazy.install(
        globals(),
        {
            "._records": ("MemoryHit", "MemoryRecord", "Namespace"),
            ".bank": ("Embedder", "MemoryBank"),
            ".memory": ("RECALL_HEADER", "BankMemory"),
        },
    )

__all__ = [
    "RECALL_HEADER",
    "BankMemory",
    "Embedder",
    "MemoryBank",
    "MemoryHit",
    "MemoryRecord",
    "Namespace",
]
