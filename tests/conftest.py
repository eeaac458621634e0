"""Shared test fixtures and the hypothesis profiles.

``history_strategy`` builds hypothesis strategies of random histories. Use it with
``st.data()`` (the fixture is session-scoped, so hypothesis accepts it)::

    @given(data=st.data())
    def test_something(history_strategy, data):
        history = data.draw(history_strategy(well_formed=False))

or import it (``from history_strategies import histories``) where a test needs the
strategy itself, e.g. to pin a found case with ``@example``.

Hypothesis keeps the examples it found in a database. It never lives in the tree: a fresh
clone's first run must not replay an example a stale checkout found (a red property that
was fixed since). Locally it is a directory under the system temp dir, one per checkout,
so a failure replays until it is fixed; with the environment variable ``CI`` set, runs
are derandomized and keep no database (the same examples on every run).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase

from history_strategies import HistoryStrategy, histories

_CHECKOUT = hashlib.sha256(str(Path(__file__).resolve().parent).encode()).hexdigest()[:16]
_HOME = Path(tempfile.gettempdir()) / f"framework-agents-hypothesis-{_CHECKOUT}"
set_hypothesis_home_dir(_HOME)  # its caches too: nothing under the tree
settings.register_profile("dev", database=DirectoryBasedExampleDatabase(_HOME / "examples"))
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def history_strategy() -> HistoryStrategy:
    """``history_strategy(well_formed=False, max_groups=12)``: a strategy of random histories."""
    return histories
