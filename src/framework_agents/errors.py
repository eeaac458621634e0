"""Errors raised by framework-agents.

Every error is an :class:`AgentError` with a stable string ``code``; the code is the
contract, the subclasses let callers ``except`` one kind::

    AgentError (code)
    ├── InvalidInputError               bad input: fix the call, do not retry it
    │   ├── InvalidArgumentError        INVALID_ARGUMENT
    │   │   └── DataValidationError     INVALID_ARGUMENT (also pydantic's ValidationError)
    │   ├── HitlDecisionError           HITL_DECISION
    │   ├── MessageNotEditableError     MESSAGE_NOT_EDITABLE
    │   ├── StorageKeyInvalidError      STORAGE_KEY_INVALID
    │   ├── ThreadIdInvalidError        THREAD_ID_INVALID
    │   ├── SnapshotFieldError          SNAPSHOT_FIELD
    │   ├── StateNotJsonError           STATE_NOT_JSON
    │   ├── GraphTermError              GRAPH_TERM_INVALID
    │   ├── GraphStateError             GRAPH_STATE_INVALID
    │   └── ToolArgumentsError          TOOL_ARGUMENTS (``framework_agents.tools``; a ValueError)
    ├── NotFoundError                   the thing named does not exist
    │   ├── CheckpointMissingError      CHECKPOINT_MISSING
    │   ├── MessageNotFoundError        MESSAGE_NOT_FOUND
    │   ├── MemoryNotFoundError         MEMORY_NOT_FOUND
    │   └── SnapshotMissingError        SNAPSHOT_MISSING
    ├── CorruptStoreError               stored data unreadable or wrongly shaped; left untouched
    │   ├── MemoryCorruptError          MEMORY_CORRUPT
    │   ├── CheckpointCorruptError      CHECKPOINT_CORRUPT
    │   ├── SnapshotCorruptError        SNAPSHOT_CORRUPT
    │   ├── GraphStoreCorruptError      GRAPH_STORE_CORRUPT
    │   └── StoreIntegrityError         STORE_INTEGRITY
    ├── BusyError                       held by someone else: retry later
    │   ├── AgentBusyError              AGENT_BUSY
    │   ├── ThreadBusyError             THREAD_BUSY
    │   ├── LockTimeoutError            LOCK_TIMEOUT
    │   └── GraphStoreBusyError         GRAPH_STORE_BUSY
    ├── StoreError                      a store could not do its I/O
    │   ├── StorageIOError              STORAGE_IO
    │   │   └── GraphStoreIOError       GRAPH_STORE_IO
    │   ├── CheckpointConflictError     CHECKPOINT_CONFLICT
    │   └── BackendUnavailableError     BACKEND_UNAVAILABLE
    ├── ModelError                      MODEL_ERROR: a model failed in another way
    │   ├── ModelAuthError              MODEL_AUTH
    │   ├── ModelRateLimitError         MODEL_RATE_LIMIT
    │   ├── ModelBadRequestError        MODEL_BAD_REQUEST
    │   ├── ModelNotFoundError          MODEL_NOT_FOUND
    │   ├── ModelServerError            MODEL_SERVER
    │   ├── ModelConnectionError        MODEL_CONNECTION
    │   ├── ModelTimeoutError           MODEL_TIMEOUT
    │   ├── ContextOverflowError        CONTEXT_OVERFLOW
    │   ├── OutputInvalidError          OUTPUT_INVALID
    │   └── ScriptExhaustedError        SCRIPT_EXHAUSTED
    └── MaxTurnsError                   MAX_TURNS

The intermediate bases (``InvalidInputError``, ``NotFoundError``, ``CorruptStoreError``,
``BusyError``, ``StoreError``, ``ModelError``) are for ``except`` clauses; only their
leaves are raised (``ModelError`` also is, for a model failure no leaf names).

Control-flow signals such as ``HitlInterrupt`` are not errors and do not derive from
:class:`AgentError`.
"""

from __future__ import annotations

from pydantic import ValidationError

__all__ = [
    # in the order of the tree above
    "AgentError",
    "InvalidInputError",
    "InvalidArgumentError",
    "DataValidationError",
    "HitlDecisionError",
    "MessageNotEditableError",
    "StorageKeyInvalidError",
    "ThreadIdInvalidError",
    "SnapshotFieldError",
    "StateNotJsonError",
    "GraphTermError",
    "GraphStateError",
    "NotFoundError",
    "CheckpointMissingError",
    "MessageNotFoundError",
    "MemoryNotFoundError",
    "SnapshotMissingError",
    "CorruptStoreError",
    "MemoryCorruptError",
    "CheckpointCorruptError",
    "SnapshotCorruptError",
    "GraphStoreCorruptError",
    "StoreIntegrityError",
    "BusyError",
    "AgentBusyError",
    "ThreadBusyError",
    "LockTimeoutError",
    "GraphStoreBusyError",
    "StoreError",
    "StorageIOError",
    "GraphStoreIOError",
    "CheckpointConflictError",
    "BackendUnavailableError",
    "ModelError",
    "ModelAuthError",
    "ModelRateLimitError",
    "ModelBadRequestError",
    "ModelNotFoundError",
    "ModelServerError",
    "ModelConnectionError",
    "ModelTimeoutError",
    "ContextOverflowError",
    "OutputInvalidError",
    "ScriptExhaustedError",
    "MaxTurnsError",
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


class InvalidInputError(AgentError):
    """Base of the errors of bad input (arguments, ids, keys, decisions, values)."""


class NotFoundError(AgentError):
    """Base of the errors of a named thread, message or snapshot that does not exist."""


class CorruptStoreError(AgentError):
    """Base of the errors of stored data that is unreadable or wrongly shaped.

    The stored data is left untouched (never overwritten, never read as empty).
    """


class BusyError(AgentError):
    """Base of the errors of something held by another run, task or process."""


class StoreError(AgentError):
    """Base of the errors of a store that could not do its I/O (disk, server, lease)."""


class ModelError(AgentError):
    """A model failed; its subclasses say how, plain ``MODEL_ERROR`` is any other failure."""

    default_code = "MODEL_ERROR"


class ModelAuthError(ModelError):
    """The provider refused the credentials (HTTP 401 / 403), or there were none."""

    default_code = "MODEL_AUTH"


class ModelRateLimitError(ModelError):
    """The provider's rate or quota limits refused the request (HTTP 429)."""

    default_code = "MODEL_RATE_LIMIT"


class ModelBadRequestError(ModelError):
    """The provider refused the request as sent (HTTP 400 / 413 / 422)."""

    default_code = "MODEL_BAD_REQUEST"


class ModelNotFoundError(ModelError):
    """The provider does not know the model or endpoint (HTTP 404), or no model file exists."""

    default_code = "MODEL_NOT_FOUND"


class ModelServerError(ModelError):
    """The provider failed or is overloaded (HTTP 5xx, 529, or such an error mid-stream)."""

    default_code = "MODEL_SERVER"


class ModelConnectionError(ModelError):
    """The provider's server could not be reached (or a local server did not start)."""

    default_code = "MODEL_CONNECTION"


class ModelTimeoutError(ModelError):
    """The request to the provider (or a local server's start) timed out."""

    default_code = "MODEL_TIMEOUT"


class MemoryCorruptError(CorruptStoreError):
    """A stored memory file is unreadable or wrongly shaped; it was left untouched."""

    default_code = "MEMORY_CORRUPT"


class MemoryNotFoundError(NotFoundError):
    """A memory bank record that does not exist (``update`` of an unknown id)."""

    default_code = "MEMORY_NOT_FOUND"


class StoreIntegrityError(CorruptStoreError):
    """An encrypted store met a value that does not authenticate for its place.

    Plain text in an encrypted store, a value moved or replayed from another row, thread
    or version, a truncated or altered value, or one sealed under a key id the
    :class:`~framework_agents.Cipher` does not hold. The stored value is left as it is.
    """

    default_code = "STORE_INTEGRITY"


class CheckpointMissingError(NotFoundError):
    """``resume()`` named a thread that has no checkpoint."""

    default_code = "CHECKPOINT_MISSING"


class CheckpointCorruptError(CorruptStoreError):
    """A stored checkpoint is unreadable or wrongly shaped."""

    default_code = "CHECKPOINT_CORRUPT"


class MessageNotEditableError(InvalidInputError):
    """``edit_message()`` targeted a message that holds tool calls."""

    default_code = "MESSAGE_NOT_EDITABLE"


class MessageNotFoundError(NotFoundError):
    """``edit_message()`` got an unknown id or an index out of range."""

    default_code = "MESSAGE_NOT_FOUND"


class HitlDecisionError(InvalidInputError):
    """A human-in-the-loop decision is malformed or not allowed for the tool."""

    default_code = "HITL_DECISION"


class StorageKeyInvalidError(InvalidInputError):
    """A storage key could escape its root or is not a safe relative path."""

    default_code = "STORAGE_KEY_INVALID"


class ThreadIdInvalidError(InvalidInputError):
    """A thread id is not a single safe directory name."""

    default_code = "THREAD_ID_INVALID"


class ThreadBusyError(BusyError):
    """Another run holds the thread and did not release it in time."""

    default_code = "THREAD_BUSY"


class SnapshotFieldError(InvalidInputError):
    """An unknown snapshot preset or field was named."""

    default_code = "SNAPSHOT_FIELD"


class SnapshotMissingError(NotFoundError):
    """``restore_snapshot()`` named an unknown snapshot id."""

    default_code = "SNAPSHOT_MISSING"


class SnapshotCorruptError(CorruptStoreError):
    """A stored snapshot is unreadable or wrongly shaped."""

    default_code = "SNAPSHOT_CORRUPT"


class LockTimeoutError(BusyError):
    """A file lock was not acquired within its timeout."""

    default_code = "LOCK_TIMEOUT"


class AgentBusyError(BusyError):
    """The agent instance is already running; one run at a time per instance."""

    default_code = "AGENT_BUSY"


class StateNotJsonError(InvalidInputError):
    """A value put in ``agent.state`` is not JSON-serialisable."""

    default_code = "STATE_NOT_JSON"


class MaxTurnsError(AgentError):
    """The model kept calling tools past the run's turn limit."""

    default_code = "MAX_TURNS"


class OutputInvalidError(ModelError):
    """The model's structured output stayed invalid after the allowed retries."""

    default_code = "OUTPUT_INVALID"


class ScriptExhaustedError(ModelError):
    """A ``ScriptedModel`` was called more times than it has replies."""

    default_code = "SCRIPT_EXHAUSTED"


class ContextOverflowError(ModelError):
    """The model rejected the request because the history exceeds its context window."""

    default_code = "CONTEXT_OVERFLOW"


class InvalidArgumentError(InvalidInputError):
    """A constructor argument or callback result is of the wrong type or out of range."""

    default_code = "INVALID_ARGUMENT"


class GraphTermError(InvalidInputError):
    """A graph term (entity, predicate or literal) is empty, too long or malformed."""

    default_code = "GRAPH_TERM_INVALID"


class GraphStateError(InvalidInputError):
    """An exported graph state handed to ``import_state()`` is wrongly shaped or too new."""

    default_code = "GRAPH_STATE_INVALID"


class GraphStoreCorruptError(CorruptStoreError):
    """An on-disk graph store is unreadable or wrongly shaped; it was left untouched."""

    default_code = "GRAPH_STORE_CORRUPT"


class StorageIOError(StoreError):
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


class GraphStoreIOError(StorageIOError):
    """An on-disk graph store cannot be opened or written (permissions, disk full or read-only).

    A :class:`StorageIOError` (``errno``, ``may_have_landed``) with the graph store's code.
    """

    default_code = "GRAPH_STORE_IO"


class GraphStoreBusyError(BusyError):
    """An on-disk graph store is held by another process."""

    default_code = "GRAPH_STORE_BUSY"


class CheckpointConflictError(StoreError):
    """A write by a holder that lost its thread (lease expired, connection lost, stale version).

    Nothing was written.
    """

    default_code = "CHECKPOINT_CONFLICT"


class BackendUnavailableError(StoreError):
    """A database or cache server cannot be reached or refuses the connection."""

    default_code = "BACKEND_UNAVAILABLE"


class DataValidationError(ValidationError, InvalidArgumentError):
    """Pydantic's ``ValidationError`` for data given to one of our constructors, with a code.

    Raised by ``Message(...)``, ``ToolCall(...)``, ``TextBlock(...)``,
    ``ReasoningBlock(...)``, ``Snapshot(...)``, ``SnapshotData(...)`` and
    ``ThreadCheckpoint(...)``: both an :class:`InvalidArgumentError` (``INVALID_ARGUMENT``)
    and a ``pydantic.ValidationError`` (so a ``ValueError``), with pydantic's details.
    """

    default_code = "INVALID_ARGUMENT"
    code = "INVALID_ARGUMENT"

    @property
    def message(self) -> str:  # type: ignore[override]
        """The validation report."""
        return ValidationError.__str__(self)

    def __str__(self) -> str:
        return f"[{self.code}] {ValidationError.__str__(self)}"

    @classmethod
    def wrap(cls, error: ValidationError) -> InvalidArgumentError:
        """``error`` as a :class:`DataValidationError` (else a plain ``INVALID_ARGUMENT``)."""
        try:
            wrapped: InvalidArgumentError = cls.from_exception_data(
                error.title,
                error.errors(),  # type: ignore[arg-type]
            )
        except Exception:  # a detail pydantic cannot rebuild: keep the message, lose the type
            wrapped = InvalidArgumentError(str(error))
        return wrapped
