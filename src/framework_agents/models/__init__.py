"""Models: the ``Model`` protocol and the shipped providers.

``OpenAIModel``, ``AnthropicModel`` and ``LocalModel`` live in modules that import nothing
heavy: each provider's SDK (extras ``openai``, ``anthropic``, ``local``) is imported when a
model is constructed, so ``import framework_agents`` never loads an SDK, and a missing extra
raises an ``ImportError`` that names the ``pip install`` command.
"""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ._base import (
        Model,
        ModelChunk,
        ModelDone,
        ReasoningDelta,
        StreamingModel,
        TextDelta,
        ToolSpec,
    )
    from .anthropic import AnthropicModel
    from .local import LocalModel
    from .openai import OpenAIModel
else:
    _lazy.install(
        globals(),
        {
            "._base": (
                "Model",
                "ModelChunk",
                "ModelDone",
                "ReasoningDelta",
                "StreamingModel",
                "TextDelta",
                "ToolSpec",
            ),
            ".anthropic": ("AnthropicModel",),
            ".local": ("LocalModel",),
            ".openai": ("OpenAIModel",),
        },
    )

__all__ = [
    "AnthropicModel",
    "LocalModel",
    "Model",
    "ModelChunk",
    "ModelDone",
    "OpenAIModel",
    "ReasoningDelta",
    "StreamingModel",
    "TextDelta",
    "ToolSpec",
]
