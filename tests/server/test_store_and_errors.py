"""The store URL resolution and the one code -> status table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError
from server_support import MODEL_STATUSES

from framework_agents import errors
from framework_agents.checkpoint import FileCheckpointer, InMemoryCheckpointer
from framework_agents.errors import AgentError, InvalidArgumentError, ModelError
from framework_agents.server import STATUS_BY_CODE, resolve_store
from framework_agents.server import _errors as server_errors
from framework_agents.server._errors import STATUS_BY_CLASS, error_payload, status_for
from framework_agents.sessions import InMemoryStorage, LocalFileStorage

HAS_STORES = importlib.util.find_spec("framework_agents.stores") is not None


@pytest.mark.skipif(HAS_STORES, reason="framework_agents.stores resolves every URL")
def test_memory_and_directory_urls_without_the_stores_package(tmp_path: Path) -> None:
    memory = resolve_store("memory:")
    assert isinstance(memory.checkpointer, InMemoryCheckpointer)
    assert isinstance(memory.storage, InMemoryStorage)
    for url in (str(tmp_path / "a"), f"file://{tmp_path / 'b'}"):
        store = resolve_store(url)
        assert isinstance(store.checkpointer, FileCheckpointer)
        assert isinstance(store.storage, LocalFileStorage)
    with pytest.raises(InvalidArgumentError, match=r"framework_agents\.stores"):
        resolve_store("sqlite:///./x.db")


@pytest.mark.parametrize("url", ["", None, 3])
def test_a_store_must_be_a_url(url: object) -> None:
    with pytest.raises(InvalidArgumentError):
        resolve_store(url)  # type: ignore[arg-type]


def _codes() -> dict[str, type[AgentError]]:
    found = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, AgentError) and value is not AgentError:
            found[value.default_code] = value
    return found


# Codes that mean the server or its store failed: 500 on purpose.
SERVER_SIDE = {
    "MEMORY_CORRUPT",
    "CHECKPOINT_CORRUPT",
    "SNAPSHOT_CORRUPT",
    "GRAPH_STORE_CORRUPT",
    "STORE_INTEGRITY",
    "GRAPH_STORE_IO",
    "GRAPH_STORE_BUSY",
    "GRAPH_TERM_INVALID",
    "GRAPH_STATE_INVALID",
    "MAX_TURNS",
    "OUTPUT_INVALID",
    "SCRIPT_EXHAUSTED",
    "AGENT_ERROR",
}


def test_every_error_code_has_a_deliberate_status() -> None:
    unplaced = set(_codes()) - set(STATUS_BY_CODE) - SERVER_SIDE
    assert unplaced == set(), f"place these codes in STATUS_BY_CODE or SERVER_SIDE: {unplaced}"
    assert all(400 <= status < 600 for status in STATUS_BY_CODE.values())
    assert status_for(AgentError("x", code="SOMETHING_NEW")) == 500


def test_internal_errors_are_not_described() -> None:
    payload = error_payload(RuntimeError("secret path /etc/x"))
    assert payload["code"] == "INTERNAL"
    assert "secret" not in payload["message"]
    assert error_payload(InvalidArgumentError("bad")) == {
        "code": "INVALID_ARGUMENT",
        "message": "bad",
    }


@pytest.mark.parametrize(
    ("error", "status"), list(MODEL_STATUSES.items()), ids=[c.__name__ for c in MODEL_STATUSES]
)
def test_each_model_error_class_has_its_status(error: type[ModelError], status: int) -> None:
    assert status_for(error("failed")) == status
    assert STATUS_BY_CODE[error.default_code] == status


def _shipped_error_classes() -> list[type[AgentError]]:
    found: set[type[AgentError]] = set()
    for module in (errors, server_errors):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, AgentError):
                found.add(value)
    found.discard(errors.DataValidationError)  # pydantic's to build; checked by the next test
    return sorted(found, key=lambda cls: cls.__name__)


@pytest.mark.parametrize("error", _shipped_error_classes(), ids=lambda cls: cls.__name__)
def test_the_class_and_the_code_of_a_shipped_error_give_one_status(
    error: type[AgentError],
) -> None:
    # A subclass whose own code is not in the table would take its parent's status: listed
    # classes only, so that the code a client reads has the status the table says.
    assert status_for(error("x")) == STATUS_BY_CODE.get(error.default_code, 500)


def test_the_most_specific_class_in_the_table_wins() -> None:
    class ProviderQuirkError(ModelError):
        default_code = "PROVIDER_QUIRK"

    assert status_for(ProviderQuirkError("odd")) == 502  # a model error: from ModelError
    assert status_for(errors.GraphStoreIOError("disk")) == 500  # not StorageIOError's 503
    assert status_for(errors.DataValidationError.wrap(_validation_error())) == 400
    assert STATUS_BY_CLASS[errors.ModelError] == 502


def _validation_error() -> ValidationError:
    class Box(BaseModel):
        n: int

    try:
        Box.model_validate({"n": "not a number"})
    except ValidationError as exc:
        return exc
    raise AssertionError("pydantic accepted a string for an int")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (AgentError("held", code="THREAD_BUSY"), 409),
        (ModelError("slow", code="MODEL_TIMEOUT"), 504),
        (ModelError("odd", code="NOT_IN_THE_TABLE"), 502),
        (AgentError("odd", code="NOT_IN_THE_TABLE"), 500),
        (RuntimeError("not ours"), 500),
    ],
    ids=[
        "agent-error-with-a-known-code",
        "model-error-with-a-code",
        "model-error-unknown-code",
        "agent-error-unknown-code",
        "not-an-agent-error",
    ],
)
def test_an_error_raised_with_another_code_gets_that_codes_status(
    error: BaseException, status: int
) -> None:
    assert status_for(error) == status
