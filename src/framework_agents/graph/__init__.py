"""The semantic graph: a quad store with a materialised closure, and GraphMemory."""

from ..memory.carry import APP_DATA_KEY, app_data_with_state, restore_state
from .memory import GROUNDING_HEADER, GraphMemory, GroundingMemory, is_grounding
from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad
from .terms import IRI, Term
from .terms import Literal as Literal  # importable here (explicitly re-exported)

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
