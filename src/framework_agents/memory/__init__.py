"""Memory backends: where an agent's history lives between runs."""

from ._base import Memory

__all__ = ["Memory"]
