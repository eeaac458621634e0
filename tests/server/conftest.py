"""Fixtures of the server tests (helpers live in ``server_support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from console_support import chromium, new_page
from server_support import PUBLISHED, Served, make_agent, start_server

from framework_agents.server import create_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for a browser test module (which skips first when it is missing)."""
    yield from chromium()


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """A signed-in console page beside the module's ``server``; no uncaught page error."""
    page, errors = new_page(browser, signed_in=True)
    yield page
    page.context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"
