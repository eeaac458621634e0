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


def _literal_all() -> list[str]:
    """``__all__`` as written in ``__init__.py``: it must be a literal list of strings."""
    import ast
    from pathlib import Path

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


def test_the_top_level_all_is_a_literal_list_of_api_names_and_documented_extras() -> None:
    import re
    from pathlib import Path

    names = _literal_all()
    assert names == framework_agents.__all__
    assert len(names) == len(set(names)), "a name is listed twice"
    docs = Path(__file__).parents[1] / "docs"
    documented = (docs / "api.md").read_text() + (docs / "exports.md").read_text()
    undocumented = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", documented)]
    assert undocumented == [], "add them to docs/exports.md"
    assert set(names) >= API_NAMES
    # Internal seams stay private.
    assert not {"RunHooks", "ToolProgress", "LoopRun"} & set(names)


def test_docs_api_md_is_the_shared_contract() -> None:
    from pathlib import Path

    root = Path(__file__).parents[1]
    assert (
        "# framework-agents for Python: the public contract" in (root / "docs/api.md").read_text()
    )
    assert "](docs/api.md)" in (root / "README.md").read_text()
