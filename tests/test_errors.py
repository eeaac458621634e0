"""Errors: one root with a stable ``code``, one subclass per code, codes survive pickling."""

from __future__ import annotations

import inspect
import pickle

import pytest

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
    "GraphStoreIOError": "GRAPH_STORE_IO",
    "GraphStoreBusyError": "GRAPH_STORE_BUSY",
    "StorageIOError": "STORAGE_IO",
    "CheckpointConflictError": "CHECKPOINT_CONFLICT",
    "BackendUnavailableError": "BACKEND_UNAVAILABLE",
}


def _error_classes() -> dict[str, type[AgentError]]:
    return {
        name: obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, AgentError) and obj is not AgentError
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
    assert set(errors.__all__) == {*classes, "AgentError"}
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
