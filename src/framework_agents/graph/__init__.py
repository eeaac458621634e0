"""The semantic graph: a quad store with a materialised closure, and GraphMemory."""

from typing import TYPE_CHECKING

from .. import _lazy
from .terms import IRI, Term
from .terms import Literal as Literal  # importable here (explicitly re-exported)

if TYPE_CHECKING:
    from ..memory.carry import APP_DATA_KEY, app_data_with_state, restore_state
    from .memory import GROUNDING_HEADER, GraphMemory, GroundingMemory, is_grounding
    from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad
else:
    _lazy.install(
        globals(),
        {
            "..memory.carry": ("APP_DATA_KEY", "app_data_with_state", "restore_state"),
            ".memory": ("GROUNDING_HEADER", "GraphMemory", "GroundingMemory", "is_grounding"),
            ".store": ("ENTAILED_GRAPH", "Fact", "GraphStore", "Quad"),
        },
    )

# ``Literal`` stays importable from this subpackage, but the flat top-level API exports it
# as ``GraphLiteral``: a star import of ``framework_agents`` must not shadow typing.Literal.
GraphLiteral = Literal

__all__ = [
    "APP_DATA_KEY",
    "ENTAILED_GRAPH",
    "GROUNDING_HEADER",
    "IRI",
    "Fact",
    "GraphLiteral",
    "GraphMemory",
    "GraphStore",
    "GroundingMemory",
    "Quad",
    "Term",
    "app_data_with_state",
    "is_grounding",
    "restore_state",
]
