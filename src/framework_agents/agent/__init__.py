"""The agent: ``Agent``, its loop, events, middleware, state, timeline, tools and HITL."""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ..hitl import (
        Decision,
        HitlInterrupt,
        ResolvedDecision,
        ToolRejection,
        hitl_key,
    )
    from ..tools import DECISION_KINDS, Tool, ToolArgumentsError, ToolContext, tool
    from .agent import DEFAULT_MAX_TURNS, Agent, Prompt
    from .events import (
        AgentEvent,
        InterruptEvent,
        MessageCompletedEvent,
        MessageStartedEvent,
        ReasoningDeltaEvent,
        RunErrorEvent,
        RunFinishedEvent,
        RunStartedEvent,
        TextDeltaEvent,
        ToolCallEvent,
        ToolProgressEvent,
        ToolResultEvent,
    )
    from .middleware import Middleware, ModelCallContext, ToolCallContext
    from .result import RunResult, Usage
    from .state import AgentState
    from .timeline import TimelineEntry
else:
    _lazy.install(
        globals(),
        {
            "..hitl": (
                "Decision",
                "HitlInterrupt",
                "ResolvedDecision",
                "ToolRejection",
                "hitl_key",
            ),
            "..tools": ("DECISION_KINDS", "Tool", "ToolArgumentsError", "ToolContext", "tool"),
            ".agent": ("DEFAULT_MAX_TURNS", "Agent", "Prompt"),
            ".events": (
                "AgentEvent",
                "InterruptEvent",
                "MessageCompletedEvent",
                "MessageStartedEvent",
                "ReasoningDeltaEvent",
                "RunErrorEvent",
                "RunFinishedEvent",
                "RunStartedEvent",
                "TextDeltaEvent",
                "ToolCallEvent",
                "ToolProgressEvent",
                "ToolResultEvent",
            ),
            ".middleware": ("Middleware", "ModelCallContext", "ToolCallContext"),
            ".result": ("RunResult", "Usage"),
            ".state": ("AgentState",),
            ".timeline": ("TimelineEntry",),
        },
    )

__all__ = [
    "DECISION_KINDS",
    "DEFAULT_MAX_TURNS",
    "Agent",
    "AgentEvent",
    "AgentState",
    "Decision",
    "HitlInterrupt",
    "InterruptEvent",
    "MessageCompletedEvent",
    "MessageStartedEvent",
    "Middleware",
    "ModelCallContext",
    "Prompt",
    "ReasoningDeltaEvent",
    "ResolvedDecision",
    "RunErrorEvent",
    "RunFinishedEvent",
    "RunResult",
    "RunStartedEvent",
    "TextDeltaEvent",
    "TimelineEntry",
    "Tool",
    "ToolArgumentsError",
    "ToolCallContext",
    "ToolCallEvent",
    "ToolProgressEvent",
    "ToolContext",
    "ToolRejection",
    "ToolResultEvent",
    "Usage",
    "hitl_key",
    "tool",
]
