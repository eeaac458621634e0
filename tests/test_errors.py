"""Errors: one root with a stable ``code``, one subclass per code, codes survive pickling."""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable

import pytest
from pydantic import ValidationError

import framework_agents
from framework_agents import errors
from framework_agents.errors import AgentError

#: Every error class and the code it carries (the contract; add new ones here).
CODES = {
    "MemoryCorruptError": "MEMORY_CORRUPT",
    "CheckpointMissingError": "CHECKPOINT_MISSING",
    "CheckpointCorruptError": "CHECKPOINT_CORRUPT",
    "MessageNotEditableError": "MESSAGE_NOT_EDITABLE",
    "MessageNotFoundError": "MESSAGE_NOT_FOUND",
    "MemoryNotFoundError": "MEMORY_NOT_FOUND",
    "HitlDecisionError": "HITL_DECISION",
    "StorageKeyInvalidError": "STORAGE_KEY_INVALID",
    "ThreadIdInvalidError": "THREAD_ID_INVALID",
    "ThreadBusyError": "THREAD_BUSY",
    "SnapshotFieldError": "SNAPSHOT_FIELD",
    "SnapshotMissingError": "SNAPSHOT_MISSING",
    "SnapshotCorruptError": "SNAPSHOT_CORRUPT",
    "LockTimeoutError": "LOCK_TIMEOUT",
    "AgentBusyError": "AGENT_BUSY",
    "StateNotJsonError": "STATE_NOT_JSON",
    "MaxTurnsError": "MAX_TURNS",
    "OutputInvalidError": "OUTPUT_INVALID",
    "ScriptExhaustedError": "SCRIPT_EXHAUSTED",
    "ContextOverflowError": "CONTEXT_OVERFLOW",
    "InvalidArgumentError": "INVALID_ARGUMENT",
    "ModelError": "MODEL_ERROR",
    "ModelAuthError": "MODEL_AUTH",
    "ModelRateLimitError": "MODEL_RATE_LIMIT",
    "ModelBadRequestError": "MODEL_BAD_REQUEST",
    "ModelNotFoundError": "MODEL_NOT_FOUND",
    "ModelServerError": "MODEL_SERVER",
    "ModelConnectionError": "MODEL_CONNECTION",
    "ModelTimeoutError": "MODEL_TIMEOUT",
    "GraphStoreIOError": "GRAPH_STORE_IO",
    "GraphStoreBusyError": "GRAPH_STORE_BUSY",
    "StorageIOError": "STORAGE_IO",
    "CheckpointConflictError": "CHECKPOINT_CONFLICT",
    "BackendUnavailableError": "BACKEND_UNAVAILABLE",
    "StoreIntegrityError": "STORE_INTEGRITY",
}


#: The intermediate bases users catch; never raised themselves (no code of their own).
BASES = {
    "InvalidInputError",
    "NotFoundError",
    "CorruptStoreError",
    "BusyError",
    "StoreError",
}

#: Every class of the tree, with its parent: the tree drawn in errors.py, pinned.
TREE = {
    "InvalidInputError": "AgentError",
    "InvalidArgumentError": "InvalidInputError",
    "DataValidationError": "InvalidArgumentError",
    "HitlDecisionError": "InvalidInputError",
    "MessageNotEditableError": "InvalidInputError",
    "StorageKeyInvalidError": "InvalidInputError",
    "ThreadIdInvalidError": "InvalidInputError",
    "SnapshotFieldError": "InvalidInputError",
    "StateNotJsonError": "InvalidInputError",
    "GraphTermError": "InvalidInputError",
    "GraphStateError": "InvalidInputError",
    "NotFoundError": "AgentError",
    "CheckpointMissingError": "NotFoundError",
    "MessageNotFoundError": "NotFoundError",
    "MemoryNotFoundError": "NotFoundError",
    "SnapshotMissingError": "NotFoundError",
    "CorruptStoreError": "AgentError",
    "MemoryCorruptError": "CorruptStoreError",
    "CheckpointCorruptError": "CorruptStoreError",
    "SnapshotCorruptError": "CorruptStoreError",
    "GraphStoreCorruptError": "CorruptStoreError",
    "StoreIntegrityError": "CorruptStoreError",
    "BusyError": "AgentError",
    "AgentBusyError": "BusyError",
    "ThreadBusyError": "BusyError",
    "LockTimeoutError": "BusyError",
    "GraphStoreBusyError": "BusyError",
    "StoreError": "AgentError",
    "StorageIOError": "StoreError",
    "GraphStoreIOError": "StorageIOError",
    "CheckpointConflictError": "StoreError",
    "BackendUnavailableError": "StoreError",
    "ModelError": "AgentError",
    "ModelAuthError": "ModelError",
    "ModelRateLimitError": "ModelError",
    "ModelBadRequestError": "ModelError",
    "ModelNotFoundError": "ModelError",
    "ModelServerError": "ModelError",
    "ModelConnectionError": "ModelError",
    "ModelTimeoutError": "ModelError",
    "ContextOverflowError": "ModelError",
    "OutputInvalidError": "ModelError",
    "ScriptExhaustedError": "ModelError",
    "MaxTurnsError": "AgentError",
}


def _error_classes() -> dict[str, type[AgentError]]:
    """Every raisable error class with a code of its own (not the bases, not the wrapper)."""
    return {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, AgentError)
        and obj is not AgentError
        and name not in BASES
        and name != "DataValidationError"
    }


def test_root_error() -> None:
    err = AgentError("boom", code="SOMETHING")
    assert isinstance(err, Exception)
    assert err.code == "SOMETHING"
    assert err.message == "boom"
    assert str(err) == "[SOMETHING] boom"
    assert AgentError("boom").code == "AGENT_ERROR"


@pytest.mark.parametrize(("name", "code"), sorted(CODES.items()), ids=sorted(CODES))
def test_subclass_codes(name: str, code: str) -> None:
    cls = getattr(framework_agents, name)
    assert issubclass(cls, AgentError)
    err = cls("boom")
    assert err.code == code
    assert code in str(err)
    assert (cls.__doc__ or "").strip()
    with pytest.raises(AgentError) as info:
        raise err
    assert info.value.code == code


def test_every_error_class_is_exported_drawn_and_has_its_own_code() -> None:
    classes = _error_classes()
    assert set(CODES) <= set(classes)
    assert set(errors.__all__) == {*classes, "AgentError", "DataValidationError", *BASES}
    doc = errors.__doc__ or ""
    for name, cls in classes.items():
        assert name in doc and cls.default_code in doc, f"{name} missing from the error tree"
        assert pickle.loads(pickle.dumps(cls("x"))).code == cls.default_code
    codes = [cls.default_code for cls in classes.values()]
    assert len(set(codes)) == len(codes)


def test_code_can_be_overridden() -> None:
    err = errors.ModelError("rate limited", code="MODEL_RATE_LIMIT")
    assert err.code == "MODEL_RATE_LIMIT"
    assert isinstance(err, errors.ModelError)


@pytest.mark.parametrize("name", sorted(CODES), ids=sorted(CODES))
def test_pickling_keeps_class_code_and_message(name: str) -> None:
    cls = getattr(errors, name)
    back = pickle.loads(pickle.dumps(cls("lost?")))
    assert type(back) is cls
    assert back.code == CODES[name]
    assert back.message == "lost?"
    assert str(back) == str(cls("lost?"))


def test_pickling_keeps_an_overridden_code() -> None:
    back = pickle.loads(pickle.dumps(AgentError("x", code="CUSTOM")))
    assert back.code == "CUSTOM"
    assert str(back) == "[CUSTOM] x"


def test_the_tree_is_pinned_class_by_class() -> None:
    named = {n for n, o in vars(errors).items() if inspect.isclass(o) and issubclass(o, AgentError)}
    assert named - {"AgentError"} == set(TREE)
    for name, parent in TREE.items():
        cls = getattr(errors, name)
        assert getattr(errors, parent) in cls.__bases__, name
        assert name in (errors.__doc__ or "")


@pytest.mark.parametrize("base", sorted(BASES), ids=sorted(BASES))
def test_a_base_catches_its_leaves(base: str) -> None:
    leaves = [name for name, parent in TREE.items() if parent == base]
    assert leaves
    for leaf in leaves:
        cls = getattr(errors, leaf)
        if leaf == "DataValidationError":
            continue
        with pytest.raises(getattr(errors, base)):
            raise cls("x")


def test_tool_arguments_error_is_an_agent_error_and_a_value_error() -> None:
    from framework_agents import tool
    from framework_agents.tools import ToolArgumentsError

    @tool
    def add(x: int) -> int:
        """Add."""
        return x

    with pytest.raises(ToolArgumentsError) as info:
        add.validate({"x": "not a number"})
    err = info.value
    assert err.code == "TOOL_ARGUMENTS" and isinstance(err, errors.InvalidInputError)
    assert isinstance(err, ValueError) and "'add'" in err.message


def test_bad_constructor_data_is_invalid_argument_and_still_a_validation_error() -> None:
    from pydantic import ValidationError

    from framework_agents import Message, ToolCall

    bad: list[Callable[[], object]] = [
        lambda: Message("wizard", "x"),  # type: ignore[arg-type]
        lambda: Message("user", 5),  # type: ignore[arg-type]
        lambda: Message("user", "x", mood="happy"),
        lambda: ToolCall("c", "t", args="nope"),  # type: ignore[arg-type]
        lambda: ToolCall(name="t"),  # type: ignore[call-arg]
    ]
    for make in bad:
        with pytest.raises(errors.DataValidationError) as info:
            make()
        err = info.value
        assert err.code == "INVALID_ARGUMENT" and str(err).startswith("[INVALID_ARGUMENT]")
        assert isinstance(err, errors.InvalidArgumentError)
        assert isinstance(err, ValidationError) and isinstance(err, ValueError)
        assert err.errors()  # pydantic's details are kept
    # Parsing stored data keeps pydantic's own error (readers map it to *_CORRUPT codes).
    with pytest.raises(ValidationError) as parsed:
        Message.model_validate({"role": "wizard"})
    assert not isinstance(parsed.value, AgentError)


def _bad_constructions() -> dict[str, Callable[[], object]]:
    from framework_agents import Snapshot, SnapshotData, ThreadCheckpoint

    return {
        "checkpoint-messages": lambda: ThreadCheckpoint("t", None, [5]),  # type: ignore[list-item]
        "checkpoint-pending": lambda: ThreadCheckpoint("t", None, [], {}, 5),  # type: ignore[arg-type]
        "checkpoint-unknown": lambda: ThreadCheckpoint("t", bogus=1),
        "data-messages": lambda: SnapshotData([5]),  # type: ignore[list-item]
        "data-state": lambda: SnapshotData(state=5),  # type: ignore[arg-type]
        "snapshot-id": lambda: Snapshot(SnapshotData(), snapshot_id="x"),
        "snapshot-data": lambda: Snapshot(5),  # type: ignore[arg-type]
        "snapshot-missing-data": lambda: Snapshot(),
    }


@pytest.mark.parametrize("name", list(_bad_constructions()))
def test_snapshots_and_checkpoints_refuse_bad_data_with_a_code(name: str) -> None:
    # They raised pydantic's bare ValidationError; like Message(...), the error is now
    # coded and still a ValidationError (what callers caught before still catches it).
    with pytest.raises(AgentError) as info:
        _bad_constructions()[name]()
    assert info.value.code == "INVALID_ARGUMENT"
    assert isinstance(info.value, ValidationError) and info.value.errors()
