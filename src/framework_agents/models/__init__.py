"""Models: the ``Model`` protocol and the shipped providers (extras load lazily)."""

from ._base import Model, ModelChunk, ModelDone, ReasoningDelta, StreamingModel, TextDelta, ToolSpec

__all__ = [
    "Model",
    "ModelChunk",
    "ModelDone",
    "ReasoningDelta",
    "StreamingModel",
    "TextDelta",
    "ToolSpec",
]
