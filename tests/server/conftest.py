"""Fixtures of the server tests (helpers live in ``server_support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import PUBLISHED, Served, make_agent, start_server

from framework_agents.server import create_app


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A directory store for one test."""
    return tmp_path / "store"


@pytest.fixture
def served(store_dir: Path) -> Iterator[Served]:
    """The test agent served without a token on a directory store."""
    PUBLISHED.clear()
    running = start_server(create_app(make_agent, store=str(store_dir), console=False))
    yield running
    running.stop()
