"""framework-agents: LLM agents whose memory and sessions stay correct, durable and fast.

The public API is flat: everything ``docs/api.md`` documents is importable from here,
plus the extras ``docs/exports.md`` lists. ``__all__`` is a literal list, grouped by the
subpackage that owns each name (``tests/test_exports.py`` pins it); a new subpackage adds
its group.
"""

# ruff: noqa: F403, F405
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

__all__ = [
    # messages
    "ContentBlock",
    "MESSAGES_FORMAT_VERSION",
    "Message",
    "ReasoningBlock",
    "Role",
    "TextBlock",
    "ToolCall",
    "new_id",
    # history
    "INTERRUPTED_TEXT",
    "group_bounds",
    "is_well_formed",
    "repair_history",
    "trim_dangling",
    "well_formed_problems",
    # errors
    "AgentBusyError",
    "AgentError",
    "BackendUnavailableError",
    "BusyError",
    "CheckpointConflictError",
    "CheckpointCorruptError",
    "CheckpointMissingError",
    "ContextOverflowError",
    "CorruptStoreError",
    "DataValidationError",
    "GraphStateError",
    "GraphStoreBusyError",
    "GraphStoreCorruptError",
    "GraphStoreIOError",
    "GraphTermError",
    "HitlDecisionError",
    "InvalidArgumentError",
    "InvalidInputError",
    "LockTimeoutError",
    "MaxTurnsError",
    "MemoryCorruptError",
    "MessageNotEditableError",
    "MessageNotFoundError",
    "ModelError",
    "NotFoundError",
    "OutputInvalidError",
    "ScriptExhaustedError",
    "SnapshotCorruptError",
    "SnapshotFieldError",
    "SnapshotMissingError",
    "StateNotJsonError",
    "StorageIOError",
    "StorageKeyInvalidError",
    "StoreError",
    "ThreadBusyError",
    "ThreadIdInvalidError",
    # memory
    "COMPACTION_PREFIX",
    "CompactedMemory",
    "FileMemory",
    "GROUNDING_KIND",
    "GroundingMemory",
    "InMemoryMemory",
    "Memory",
    "ReplaceableMemory",
    "is_grounding",
    "replace_history",
    # conversation
    "ConversationManager",
    "NullConversationManager",
    "SlidingWindowConversationManager",
    "SummarizingConversationManager",
    # agent
    "Agent",
    "AgentEvent",
    "AgentState",
    "DECISION_KINDS",
    "DEFAULT_MAX_TURNS",
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
    "ToolContext",
    "ToolRejection",
    "ToolResultEvent",
    "Usage",
    "hitl_key",
    "tool",
    # models
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
    # sessions
    "InMemoryStorage",
    "LocalFileStorage",
    "SessionManager",
    "Snapshot",
    "SnapshotData",
    "Storage",
    "select_snapshot_fields",
    # checkpoint
    "CHECKPOINT_FORMAT_VERSION",
    "Checkpointer",
    "FileCheckpointer",
    "InMemoryCheckpointer",
    "ThreadCheckpoint",
    "lock_holder",
    "with_file_lock",
    # graph
    "ENTAILED_GRAPH",
    "Fact",
    "GROUNDING_HEADER",
    "GraphLiteral",
    "GraphMemory",
    "GraphStore",
    "IRI",
    "Quad",
    "Term",
    "APP_DATA_KEY",
    "app_data_with_state",
    "restore_state",
    # stores
    "Store",
    "open_store",
    "SqliteStorage",
    "SqliteCheckpointer",
    "SqliteMemory",
    "PostgresStorage",
    "PostgresCheckpointer",
    "PostgresMemory",
    "RedisStorage",
    "RedisCheckpointer",
    "RedisMemory",
    "SchemaTooNewError",
    # swarm
    "Swarm",
    "SwarmResult",
    "Handoff",
    "SwarmAgentView",
    "SwarmEvent",
    "SwarmStartedEvent",
    "MemberEvent",
    "HandoffEvent",
    "SwarmFinishedEvent",
    "SwarmInterruptEvent",
    "SwarmErrorEvent",
    "HANDOFF_TOOL",
    "HANDOFF_KIND",
    "HANDOFF_MESSAGE_KIND",
    "SWARM_STATE_KEY",
    "swarm_agent_events",
    "swarm_run_result",
    # summarize
    "Summarizer",
    "extractive_summary",
    # testing
    "FunctionModel",
    "ModelCall",
    "ScriptedModel",
]
