"""The top-level package exports exactly the public names API.md promises (and more is fine)."""

from __future__ import annotations

import inspect

import framework_agents

#: Every name API.md says is importable from ``framework_agents``.
API_NAMES = {
    # Messages and repair
    "Message",
    "ToolCall",
    "TextBlock",
    "ReasoningBlock",
    "repair_history",
    # Errors
    "AgentError",
    # Memory
    "Memory",
    "InMemoryMemory",
    "FileMemory",
    "CompactedMemory",
    "GraphMemory",
    # Conversation managers
    "ConversationManager",
    "trim_dangling",
    "NullConversationManager",
    "SlidingWindowConversationManager",
    "SummarizingConversationManager",
    # Agent, models, tools
    "Agent",
    "FunctionModel",
    "ScriptedModel",
    "tool",
    # Sessions and snapshots
    "SessionManager",
    "InMemoryStorage",
    "LocalFileStorage",
    "Snapshot",
    "SnapshotData",
    "select_snapshot_fields",
    # Checkpoints and HITL
    "FileCheckpointer",
    "ThreadCheckpoint",
    "with_file_lock",
    "HitlInterrupt",
    "hitl_key",
    "ToolRejection",
    # Timeline and graph
    "TimelineEntry",
    "GraphStore",
}


def test_api_names_are_exported() -> None:
    missing = sorted(API_NAMES - set(framework_agents.__all__))
    assert missing == []
    for name in API_NAMES:
        assert getattr(framework_agents, name) is not None


def test_all_names_resolve_and_are_documented() -> None:
    for name in framework_agents.__all__:
        obj = getattr(framework_agents, name)
        # Type aliases (Role, ModelChunk, ...) cannot carry docstrings; classes and functions must.
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not name.startswith("_"):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_error_codes_are_stable() -> None:
    codes = {
        "MemoryCorruptError": "MEMORY_CORRUPT",
        "CheckpointMissingError": "CHECKPOINT_MISSING",
        "MessageNotEditableError": "MESSAGE_NOT_EDITABLE",
        "MessageNotFoundError": "MESSAGE_NOT_FOUND",
        "HitlDecisionError": "HITL_DECISION",
        "StorageKeyInvalidError": "STORAGE_KEY_INVALID",
        "ThreadIdInvalidError": "THREAD_ID_INVALID",
        "SnapshotFieldError": "SNAPSHOT_FIELD",
        "SnapshotMissingError": "SNAPSHOT_MISSING",
        "LockTimeoutError": "LOCK_TIMEOUT",
    }
    for name, code in codes.items():
        cls = getattr(framework_agents, name)
        assert issubclass(cls, framework_agents.AgentError)
        assert cls("boom").code == code


def test_star_import_does_not_shadow_common_names() -> None:
    namespace: dict[str, object] = {}
    exec("from typing import Literal\nfrom framework_agents import *", namespace)
    import typing

    assert namespace["Literal"] is typing.Literal
    assert framework_agents.GraphLiteral is framework_agents.graph.Literal
