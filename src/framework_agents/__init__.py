"""framework-agents: LLM agents whose memory and sessions stay correct, durable and fast.

The public API is flat: everything ``API.md`` documents is importable from here. Each
subpackage owns its names through its own ``__all__``; this module re-exports them.
"""

# ruff: noqa: F403
from . import (
    agent,
    checkpoint,
    conversation,
    errors,
    graph,
    history,
    memory,
    messages,
    models,
    sessions,
    stores,
    summarize,
    swarm,
    testing,
)
from .agent import *
from .checkpoint import *
from .conversation import *
from .errors import *
from .graph import *
from .history import *
from .memory import *
from .messages import *
from .models import *
from .sessions import *
from .stores import *
from .summarize import *
from .swarm import *
from .testing import *

__version__ = "0.1.0"

__all__ = sorted(
    {
        *agent.__all__,
        *checkpoint.__all__,
        *conversation.__all__,
        *errors.__all__,
        *graph.__all__,
        *history.__all__,
        *memory.__all__,
        *messages.__all__,
        *models.__all__,
        *sessions.__all__,
        *stores.__all__,
        *summarize.__all__,
        *swarm.__all__,
        *testing.__all__,
    }
)
