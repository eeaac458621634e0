"""The store URL resolution and the one code -> status table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from framework_agents import errors
from framework_agents.checkpoint import FileCheckpointer, InMemoryCheckpointer
from framework_agents.errors import AgentError, InvalidArgumentError
from framework_agents.server import STATUS_BY_CODE, resolve_store
from framework_agents.server._errors import error_payload, status_for
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
    assert status_for("SOMETHING_NEW") == 500


def test_internal_errors_are_not_described() -> None:
    payload = error_payload(RuntimeError("secret path /etc/x"))
    assert payload["code"] == "INTERNAL"
    assert "secret" not in payload["message"]
    assert error_payload(InvalidArgumentError("bad")) == {
        "code": "INVALID_ARGUMENT",
        "message": "bad",
    }
