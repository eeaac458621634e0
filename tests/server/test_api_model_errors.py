"""A model's failure reaches a JSON API client with its class's status and its code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import MODEL_STATUSES, Served, start_server

from framework_agents import Agent, FunctionModel, Message, errors
from framework_agents.server import create_app

#: Each model error class a provider raises and the status a client gets for it.
STATUSES = {
    error: status
    for error, status in MODEL_STATUSES.items()
    if error.default_code.startswith("MODEL_")
}

_BY_NAME = {cls.__name__: cls for cls in STATUSES}


def failing(messages: list[Message], tools: list[Any]) -> Message:
    """The model: raises the model error class the prompt names."""
    raise _BY_NAME[messages[-1].text]("the provider said no")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server whose agent's model fails as each prompt asks."""
    store: Path = tmp_path_factory.mktemp("store")
    running = start_server(
        create_app(lambda: Agent(FunctionModel(failing)), store=str(store), console=False)
    )
    yield running
    running.stop()


@pytest.mark.parametrize(
    ("error", "status"), list(STATUSES.items()), ids=[cls.__name__ for cls in STATUSES]
)
def test_a_failed_run_is_answered_with_the_errors_status_and_code(
    served: Served, error: type[errors.ModelError], status: int
) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        response = client.post(
            f"/api/threads/{error.__name__}/runs",
            json={"prompt": error.__name__},
            headers={"Accept": "application/json"},
        )
    assert response.status_code == status
    summary = response.json()
    assert summary["status"] == "failed"
    assert summary["error"] == {"code": error.default_code, "message": "the provider said no"}


def test_a_streamed_run_has_begun_200_and_ends_on_the_code(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        response = client.post("/api/threads/streamed/runs", json={"prompt": "ModelTimeoutError"})
    assert response.status_code == 200
    assert response.text.rstrip().endswith(
        '"code": "MODEL_TIMEOUT", "message": "the provider said no"}'
    )
