"""The semantic graph: a quad store with a materialised closure, and GraphMemory."""

from .memory import GROUNDING_HEADER, GraphMemory, GroundingMemory, is_grounding
from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad
from .terms import IRI, Literal, Term

__all__ = [
    "ENTAILED_GRAPH",
    "GROUNDING_HEADER",
    "IRI",
    "Fact",
    "GraphMemory",
    "GraphStore",
    "GroundingMemory",
    "Literal",
    "Quad",
    "Term",
    "is_grounding",
]
