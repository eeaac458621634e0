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


#: The scopes (modules, or classes) that take longest, measured with ``--durations`` (the
#: slowest first; a module's CLI or model processes cost seconds each). ``make test``
#: hands scopes to its two workers in collection order (``--no-loadscope-reorder``), so
#: these go first and the many short modules fill in after them: the workers end
#: together instead of one running a long module alone at the end. Update it when a
#: module grows past these.
LONGEST_FIRST = (
    "tests/test_docs.py",
    "tests/cli/test_cli_serve.py",
    "tests/cli/test_cli_chat.py",
    "tests/cli/test_cli_doctor.py",
    "tests/models/test_models_extras.py",
    "tests/server/test_streaming.py",
    "tests/memory/test_memory_properties.py",
    "tests/server/test_console_browser.py",
    "tests/models/test_models_local.py",
    "tests/checkpoint/test_checkpoint_file.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the scopes: :data:`LONGEST_FIRST`, then the rest by number of tests.

    A scope is what ``--dist loadscope`` keeps on one worker (a class, else a module);
    the rest keep xdist's own default order (most tests first). The tests of a scope keep
    their order.
    """
    scopes: dict[str, list[pytest.Item]] = {}
    for item in items:
        scopes.setdefault(item.nodeid.rsplit("::", 1)[0], []).append(item)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(scope: str) -> tuple[int, int]:
        module = scope.split("::", 1)[0]
        return (rank.get(module, len(rank)), -len(scopes[scope]))

    items[:] = [item for scope in sorted(scopes, key=key) for item in scopes[scope]]


@pytest.fixture(scope="session")
def history_strategy() -> HistoryStrategy:
    """``history_strategy(well_formed=False, max_groups=12)``: a strategy of random histories."""
    return histories
