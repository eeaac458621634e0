"""The top-level package exports exactly the names below (httpx's ``test_exported_members``).

Adding or removing a top-level name is a change of the public API: edit ``EXPORTED``,
``__all__`` in ``framework_agents/__init__.py`` and the index at the end of ``docs/api.md``
together. What is not at the top level lives in its subpackage (``MOVED``, and
``docs/exports.md``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import framework_agents
from framework_agents import errors

ROOT = Path(__file__).parents[1]

#: ``framework_agents.__all__``, exactly and in this (sorted) order.
EXPORTED = [
    "Agent",
    "AgentBusyError",
    "AgentError",
    "AgentEvent",
    "AnthropicModel",
    "BackendUnavailableError",
    "BankMemory",
    "BusyError",
    "CheckpointConflictError",
    "CheckpointCorruptError",
    "CheckpointMissingError",
    "Checkpointer",
    "Cipher",
    "CompactedMemory",
    "ContextOverflowError",
    "ConversationManager",
    "CorruptStoreError",
    "DataValidationError",
    "FileCheckpointer",
    "FileMemory",
    "FunctionModel",
    "GraphMemory",
    "GraphStateError",
    "GraphStore",
    "GraphStoreBusyError",
    "GraphStoreCorruptError",
    "GraphStoreIOError",
    "GraphTermError",
    "Handoff",
    "HitlDecisionError",
    "HitlInterrupt",
    "InMemoryCheckpointer",
    "InMemoryMemory",
    "InMemoryStorage",
    "InvalidArgumentError",
    "InvalidInputError",
    "LocalFileStorage",
    "LocalModel",
    "LockTimeoutError",
    "MaxTurnsError",
    "Memory",
    "MemoryBank",
    "MemoryCorruptError",
    "MemoryHit",
    "MemoryNotFoundError",
    "MemoryRecord",
    "Message",
    "MessageNotEditableError",
    "MessageNotFoundError",
    "Middleware",
    "Model",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelCallContext",
    "ModelConnectionError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimitError",
    "ModelServerError",
    "ModelTimeoutError",
    "NotFoundError",
    "NullConversationManager",
    "OpenAIModel",
    "OutputInvalidError",
    "PostgresCheckpointer",
    "PostgresMemory",
    "PostgresStorage",
    "ReasoningBlock",
    "RedisCheckpointer",
    "RedisMemory",
    "RedisStorage",
    "RunResult",
    "SchemaTooNewError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SessionManager",
    "SlidingWindowConversationManager",
    "Snapshot",
    "SnapshotCorruptError",
    "SnapshotData",
    "SnapshotFieldError",
    "SnapshotMissingError",
    "SqliteCheckpointer",
    "SqliteMemory",
    "SqliteStorage",
    "StateNotJsonError",
    "Storage",
    "StorageIOError",
    "StorageKeyInvalidError",
    "Store",
    "StoreError",
    "StoreIntegrityError",
    "SummarizingConversationManager",
    "Swarm",
    "SwarmEvent",
    "SwarmResult",
    "TextBlock",
    "ThreadBusyError",
    "ThreadCheckpoint",
    "ThreadIdInvalidError",
    "TimelineEntry",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallContext",
    "ToolContext",
    "ToolRejection",
    "ToolSpec",
    "hitl_key",
    "is_well_formed",
    "open_store",
    "repair_history",
    "select_snapshot_fields",
    "tool",
    "trim_dangling",
    "with_file_lock",
]

#: Every name API.md uses at the top level (a subset of ``EXPORTED``).
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
    # Durable stores
    "Storage",
    "SqliteStorage",
    "SqliteCheckpointer",
    "SqliteMemory",
    "PostgresStorage",
    "PostgresCheckpointer",
    "PostgresMemory",
    "RedisStorage",
    "RedisCheckpointer",
    "RedisMemory",
    "open_store",
    # Swarm
    "Swarm",
    "SwarmResult",
    "Handoff",
}

#: Names that left the top level, and the subpackage that exports each (docs/exports.md).
MOVED = {
    "messages": ["ContentBlock", "MESSAGES_FORMAT_VERSION", "Role", "new_id"],
    "history": ["INTERRUPTED_TEXT", "group_bounds", "well_formed_problems"],
    "memory": [
        "COMPACTION_PREFIX",
        "GROUNDING_KIND",
        "GroundingMemory",
        "ReplaceableMemory",
        "is_grounding",
        "replace_history",
    ],
    "agent": [
        "AgentState",
        "DEFAULT_MAX_TURNS",
        "InterruptEvent",
        "MessageCompletedEvent",
        "MessageStartedEvent",
        "Prompt",
        "ReasoningDeltaEvent",
        "RunErrorEvent",
        "RunFinishedEvent",
        "RunStartedEvent",
        "TextDeltaEvent",
        "ToolCallEvent",
        "ToolProgressEvent",
        "ToolResultEvent",
        "Usage",
    ],
    "hitl": ["Decision", "ResolvedDecision"],
    "tools": ["DECISION_KINDS"],
    "models": ["ModelChunk", "ModelDone", "ReasoningDelta", "StreamingModel", "TextDelta"],
    "testing": ["ModelCall"],
    "checkpoint": ["CHECKPOINT_FORMAT_VERSION", "lock_holder"],
    "sessions": ["SealedStorage"],
    "graph": [
        "APP_DATA_KEY",
        "ENTAILED_GRAPH",
        "Fact",
        "GROUNDING_HEADER",
        "GraphLiteral",
        "IRI",
        "Quad",
        "Term",
        "app_data_with_state",
        "restore_state",
    ],
    "swarm": [
        "HANDOFF_KIND",
        "HANDOFF_MESSAGE_KIND",
        "HANDOFF_TOOL",
        "HandoffEvent",
        "MemberEvent",
        "SWARM_STATE_KEY",
        "SwarmAgentView",
        "SwarmErrorEvent",
        "SwarmFinishedEvent",
        "SwarmInterruptEvent",
        "SwarmStartedEvent",
        "swarm_agent_events",
        "swarm_run_result",
    ],
    "summarize": ["Summarizer", "extractive_summary"],
}

#: Type aliases cannot carry a docstring: each is documented by a ``#:`` comment above it.
ALIASES = {
    "AgentEvent": "framework_agents.agent.events",
    "SwarmEvent": "framework_agents.swarm._types",
}


def test_the_top_level_exports_exactly_these_names() -> None:
    assert framework_agents.__all__ == EXPORTED
    assert sorted(EXPORTED) == EXPORTED


def test_the_api_names_are_exported() -> None:
    assert sorted(API_NAMES - set(EXPORTED)) == []


def test_every_error_class_is_exported() -> None:
    """Users ``except`` them: the whole tree of ``errors.py`` and the two defined elsewhere."""
    assert set(errors.__all__) | {"ToolArgumentsError", "SchemaTooNewError"} <= set(EXPORTED)
    exceptions = {
        name
        for name in EXPORTED
        if inspect.isclass(obj := getattr(framework_agents, name)) and issubclass(obj, Exception)
    }
    # Every exported exception is an error with a code, but for the two control-flow signals.
    signals = {
        n for n in exceptions if not issubclass(getattr(framework_agents, n), errors.AgentError)
    }
    assert signals == {"HitlInterrupt", "ToolRejection"}


def test_every_name_resolves_and_has_a_docstring() -> None:
    for name in EXPORTED:
        obj = getattr(framework_agents, name)
        if name in ALIASES:
            source = inspect.getsource(importlib.import_module(ALIASES[name]))
            assert re.search(rf"^#: \S.*\n{name} = ", source, re.M), f"{name}: no #: comment"
        else:
            assert inspect.isclass(obj) or inspect.isfunction(obj), name
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"


def test_nothing_public_beyond_all_and_the_subpackages() -> None:
    # Names are imported on first use (PEP 562): once each is resolved, the namespace
    # holds exactly these, and dir() lists them before.
    assert set(EXPORTED) <= set(dir(framework_agents))
    for name in EXPORTED:
        getattr(framework_agents, name)
    extra = [
        name
        for name, value in vars(framework_agents).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    ]
    assert sorted(extra) == EXPORTED


def _literal_all() -> list[str]:
    """``__all__`` as written in ``__init__.py``: a literal list (static tools read it)."""
    source = Path(framework_agents.__file__).read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List), "__all__ must be a literal list"
            names = []
            for item in node.value.elts:
                assert isinstance(item, ast.Constant) and isinstance(item.value, str)
                names.append(item.value)
            return names
    raise AssertionError("no __all__ in framework_agents/__init__.py")


def test_the_top_level_all_is_a_literal_list() -> None:
    assert _literal_all() == EXPORTED


def _api_index() -> str:
    text = (ROOT / "docs/api.md").read_text()
    return text[text.index("\n## Index of top-level names\n") :]


def test_docs_api_md_indexes_every_top_level_name_and_no_other() -> None:
    index = _api_index()
    assert [n for n in EXPORTED if f"`{n}`" not in index] == []
    # Each entry is a bullet opening with the names it documents.
    listed = set()
    for line in index.splitlines():
        if line.startswith("- `"):
            head = line[2:].split(":", 1)[0]
            listed |= set(re.findall(r"`(\w+)`", head))
    assert sorted(listed) == EXPORTED


@pytest.mark.parametrize("subpackage", sorted(MOVED))
def test_moved_names_live_in_their_subpackage(subpackage: str) -> None:
    module = importlib.import_module(f"framework_agents.{subpackage}")
    documented = (ROOT / "docs/exports.md").read_text()
    for name in MOVED[subpackage]:
        assert name in module.__all__, name
        assert hasattr(module, name), name
        assert name not in EXPORTED and not hasattr(framework_agents, name), name
        assert f"`{name}`" in documented, f"{name}: add it to docs/exports.md"


def test_error_codes_are_stable() -> None:
    codes = {
        "MemoryCorruptError": "MEMORY_CORRUPT",
        "CheckpointMissingError": "CHECKPOINT_MISSING",
        "MessageNotEditableError": "MESSAGE_NOT_EDITABLE",
        "MessageNotFoundError": "MESSAGE_NOT_FOUND",
        "MemoryNotFoundError": "MEMORY_NOT_FOUND",
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


def test_star_import_gives_all_and_does_not_shadow_common_names() -> None:
    namespace: dict[str, object] = {}
    exec("from typing import Literal\nfrom framework_agents import *", namespace)
    import typing

    assert namespace["Literal"] is typing.Literal
    assert set(namespace) - {"Literal", "__builtins__"} == set(EXPORTED)
    from framework_agents import graph

    assert graph.GraphLiteral is graph.Literal


def test_docs_api_md_is_the_shared_contract() -> None:
    assert (
        "# framework-agents for Python: the public contract" in (ROOT / "docs/api.md").read_text()
    )
    assert "](docs/api.md)" in (ROOT / "README.md").read_text()
