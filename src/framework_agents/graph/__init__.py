"""The semantic graph: a quad store with a materialised closure, and GraphMemory."""

from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad
from .terms import IRI, Literal, Term

__all__ = ["ENTAILED_GRAPH", "IRI", "Fact", "GraphStore", "Literal", "Quad", "Term"]
