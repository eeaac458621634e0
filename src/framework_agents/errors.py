"""Errors raised by framework-agents.

Every error is an :class:`AgentError` with a stable string ``code``; the code is the
contract, the subclasses let callers ``except`` one kind::

    AgentError (code)
    ├── MemoryCorruptError          MEMORY_CORRUPT
    ├── CheckpointMissingError      CHECKPOINT_MISSING
    ├── CheckpointCorruptError      CHECKPOINT_CORRUPT
    ├── MessageNotEditableError     MESSAGE_NOT_EDITABLE
    ├── MessageNotFoundError        MESSAGE_NOT_FOUND
    ├── HitlDecisionError           HITL_DECISION
    ├── StorageKeyInvalidError      STORAGE_KEY_INVALID
    ├── ThreadIdInvalidError        THREAD_ID_INVALID
    ├── ThreadBusyError             THREAD_BUSY
    ├── SnapshotFieldError          SNAPSHOT_FIELD
    ├── SnapshotMissingError        SNAPSHOT_MISSING
    ├── SnapshotCorruptError        SNAPSHOT_CORRUPT
    ├── LockTimeoutError            LOCK_TIMEOUT
    ├── AgentBusyError              AGENT_BUSY
    ├── StateNotJsonError           STATE_NOT_JSON
    ├── MaxTurnsError               MAX_TURNS
    ├── OutputInvalidError          OUTPUT_INVALID
    ├── ScriptExhaustedError        SCRIPT_EXHAUSTED
    ├── ContextOverflowError        CONTEXT_OVERFLOW
    ├── InvalidArgumentError        INVALID_ARGUMENT
    ├── GraphTermError              GRAPH_TERM_INVALID
    ├── GraphStateError             GRAPH_STATE_INVALID
    ├── GraphStoreCorruptError      GRAPH_STORE_CORRUPT
    ├── GraphStoreIOError           GRAPH_STORE_IO
    ├── GraphStoreBusyError         GRAPH_STORE_BUSY
    ├── StorageIOError              STORAGE_IO
    ├── CheckpointConflictError     CHECKPOINT_CONFLICT
    ├── BackendUnavailableError     BACKEND_UNAVAILABLE
    └── ModelError                  MODEL_ERROR (or a provider-specific MODEL_* code)

Control-flow signals such as ``HitlInterrupt`` are not errors and do not derive from
:class:`AgentError`.
"""

from __future__ import annotations

__all__ = [
    "AgentBusyError",
    "AgentError",
    "BackendUnavailableError",
    "CheckpointConflictError",
    "CheckpointCorruptError",
    "CheckpointMissingError",
    "ContextOverflowError",
    "GraphStateError",
    "GraphStoreBusyError",
    "GraphStoreCorruptError",
    "GraphStoreIOError",
    "GraphTermError",
    "HitlDecisionError",
    "InvalidArgumentError",
    "LockTimeoutError",
    "MaxTurnsError",
    "MemoryCorruptError",
    "MessageNotEditableError",
    "MessageNotFoundError",
    "ModelError",
    "OutputInvalidError",
    "ScriptExhaustedError",
    "SnapshotCorruptError",
    "SnapshotFieldError",
    "SnapshotMissingError",
    "StateNotJsonError",
    "StorageIOError",
    "StorageKeyInvalidError",
    "ThreadBusyError",
    "ThreadIdInvalidError",
]


class AgentError(Exception):
    """Root of every framework error; ``code`` names the failure for programs."""

    default_code: str = "AGENT_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code: str = code or self.default_code
        self.message: str = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __reduce__(self) -> tuple[object, ...]:
        # Keep ``code`` across pickling (multiprocessing, process pools).
        return (_rebuild, (type(self), self.message, self.code))


def _rebuild(cls: type[AgentError], message: str, code: str) -> AgentError:
    err = cls.__new__(cls)
    AgentError.__init__(err, message, code=code)
    return err


class MemoryCorruptError(AgentError):
    """A stored memory file is unreadable or wrongly shaped; it was left untouched."""

    default_code = "MEMORY_CORRUPT"


class CheckpointMissingError(AgentError):
    """``resume()`` named a thread that has no checkpoint."""

    default_code = "CHECKPOINT_MISSING"


class CheckpointCorruptError(AgentError):
    """A stored checkpoint is unreadable or wrongly shaped."""

    default_code = "CHECKPOINT_CORRUPT"


class MessageNotEditableError(AgentError):
    """``edit_message()`` targeted a message that holds tool calls."""

    default_code = "MESSAGE_NOT_EDITABLE"


class MessageNotFoundError(AgentError):
    """``edit_message()`` got an unknown id or an index out of range."""

    default_code = "MESSAGE_NOT_FOUND"


class HitlDecisionError(AgentError):
    """A human-in-the-loop decision is malformed or not allowed for the tool."""

    default_code = "HITL_DECISION"


class StorageKeyInvalidError(AgentError):
    """A storage key could escape its root or is not a safe relative path."""

    default_code = "STORAGE_KEY_INVALID"


class ThreadIdInvalidError(AgentError):
    """A thread id is not a single safe directory name."""

    default_code = "THREAD_ID_INVALID"


class ThreadBusyError(AgentError):
    """Another run holds the thread and did not release it in time."""

    default_code = "THREAD_BUSY"


class SnapshotFieldError(AgentError):
    """An unknown snapshot preset or field was named."""

    default_code = "SNAPSHOT_FIELD"


class SnapshotMissingError(AgentError):
    """``restore_snapshot()`` named an unknown snapshot id."""

    default_code = "SNAPSHOT_MISSING"


class SnapshotCorruptError(AgentError):
    """A stored snapshot is unreadable or wrongly shaped."""

    default_code = "SNAPSHOT_CORRUPT"


class LockTimeoutError(AgentError):
    """A file lock was not acquired within its timeout."""

    default_code = "LOCK_TIMEOUT"


class AgentBusyError(AgentError):
    """The agent instance is already running; one run at a time per instance."""

    default_code = "AGENT_BUSY"


class StateNotJsonError(AgentError):
    """A value put in ``agent.state`` is not JSON-serialisable."""

    default_code = "STATE_NOT_JSON"


class MaxTurnsError(AgentError):
    """The model kept calling tools past the run's turn limit."""

    default_code = "MAX_TURNS"


class OutputInvalidError(AgentError):
    """The model's structured output stayed invalid after the allowed retries."""

    default_code = "OUTPUT_INVALID"


class ScriptExhaustedError(AgentError):
    """A ``ScriptedModel`` was called more times than it has replies."""

    default_code = "SCRIPT_EXHAUSTED"


class ContextOverflowError(AgentError):
    """The model rejected the request because the history exceeds its context window."""

    default_code = "CONTEXT_OVERFLOW"


class InvalidArgumentError(AgentError):
    """A constructor argument or callback result is of the wrong type or out of range."""

    default_code = "INVALID_ARGUMENT"


class ModelError(AgentError):
    """A model provider failed; ``code`` says how (``MODEL_ERROR`` or ``MODEL_*``)."""

    default_code = "MODEL_ERROR"


class GraphTermError(AgentError):
    """A graph term (entity, predicate or literal) is empty, too long or malformed."""

    default_code = "GRAPH_TERM_INVALID"


class GraphStateError(AgentError):
    """An exported graph state handed to ``import_state()`` is wrongly shaped or too new."""

    default_code = "GRAPH_STATE_INVALID"


class GraphStoreCorruptError(AgentError):
    """An on-disk graph store is unreadable or wrongly shaped; it was left untouched."""

    default_code = "GRAPH_STORE_CORRUPT"


class GraphStoreIOError(AgentError):
    """An on-disk graph store cannot be opened or written (permissions, disk full or read-only)."""

    default_code = "GRAPH_STORE_IO"


class GraphStoreBusyError(AgentError):
    """An on-disk graph store is held by another process."""

    default_code = "GRAPH_STORE_BUSY"


class StorageIOError(AgentError):
    """An operating-system I/O failure during a read or write (disk full, read-only, EIO).

    ``errno`` keeps the OS error number; ``may_have_landed`` says whether a write may
    have reached the store anyway (so a caller knows whether a blind retry could
    duplicate it). The ``OSError`` is chained as ``__cause__``.
    """

    default_code = "STORAGE_IO"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        errno: int | None = None,
        may_have_landed: bool = False,
    ) -> None:
        super().__init__(message, code=code)
        self.errno: int | None = errno
        self.may_have_landed: bool = may_have_landed


class CheckpointConflictError(AgentError):
    """A write by a holder that lost its thread (lease expired, connection lost, stale version).

    Nothing was written.
    """

    default_code = "CHECKPOINT_CONFLICT"


class BackendUnavailableError(AgentError):
    """A database or cache server cannot be reached or refuses the connection."""

    default_code = "BACKEND_UNAVAILABLE"
