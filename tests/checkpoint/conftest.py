"""Fixtures of the checkpoint tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lock_support import Child

from processes import close_process


@pytest.fixture
def children() -> Iterator[list[Child]]:
    """lock_child.py processes a test started: closed (killed if still running) after it."""
    made: list[Child] = []
    yield made
    for child in made:
        close_process(child.proc)
