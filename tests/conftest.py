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
from hypothesis import is_hypothesis_test, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase

from history_strategies import HistoryStrategy, histories

_CHECKOUT = hashlib.sha256(str(Path(__file__).resolve().parent).encode()).hexdigest()[:16]
_HOME = Path(tempfile.gettempdir()) / f"framework-agents-hypothesis-{_CHECKOUT}"
set_hypothesis_home_dir(_HOME)  # its caches too: nothing under the tree
settings.register_profile("dev", database=DirectoryBasedExampleDatabase(_HOME / "examples"))
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


#: The modules that take longest (about 1.5 s or more, one test or many; a module's CLI,
#: server, browser or model processes cost seconds each), slowest first, as measured per
#: test with ``--junitxml``-like timing of a ``make test`` run (2026-12-06, on a machine
#: loaded about 5-9 by other runs: the order, not the figures, is what counts here; the
#: classes of test_stores_conformance.py rank where its PostgreSQL class does, the others
#: taking 2-6 s each). ``make test`` hands scopes to its workers in collection order
#: (``--no-loadscope-reorder``), a worker taking the next when it has two tests left, so
#: these go first and the many short modules fill in after them: the workers end together
#: instead of one running a long module alone at the end (a long module of one or two
#: tests would otherwise come last, after every larger module).
#: Update it when a module grows past these.
LONGEST_FIRST = (
    "tests/test_docs.py",
    "tests/stores/test_stores_conformance.py",
    "tests/cli/test_cli_serve_lifecycle.py",
    "tests/server/test_tenants_browser.py",
    "tests/server/test_console_browser.py",
    "tests/server/test_tenants.py",
    "tests/cli/test_cli_doctor.py",
    "tests/cli/test_cli_chat.py",
    "tests/cli/test_cli_serve.py",
    "tests/stores/test_stores_crypto.py",
    "tests/cli/test_cli_serve_tenants.py",
    "tests/server/test_a2a.py",
    "tests/server/test_memories_api.py",
    "tests/server/test_mcp_serve.py",
    "tests/stores/test_bank_sql.py",
    "tests/server/test_cross_site.py",
    "tests/mcp/test_mcp_malformed.py",
    "tests/server/test_console_elicitation_browser.py",
    "tests/server/test_streaming.py",
    "tests/checkpoint/test_checkpoint_lock.py",
    "tests/server/test_cross_site_browser.py",
    "tests/checkpoint/test_checkpoint_lock_reclaim.py",
    "tests/checkpoint/test_checkpoint_file.py",
    "tests/server/test_elicitation_serving.py",
    "tests/mcp/test_mcp_client.py",
    "tests/models/test_models_local.py",
    "tests/mcp/test_mcp_progress.py",
    "tests/server/test_a2a_binding.py",
    "tests/graph/test_graph_rules.py",
    "tests/agent/test_agent_shared_history.py",
    "tests/memory/test_memory_file_appendable.py",
    "tests/server/test_api.py",
    "tests/persist/test_golden_corpus_v3.py",
    # Few tests but seconds each (1.5-4 s): they would come last of all.
    "tests/server/test_unknown_outcome_after_crash.py",
    "tests/server/test_mcp_conformance.py",
    "tests/server/test_tenants_stores.py",
    "tests/server/test_memories_browser.py",
    "tests/bank/test_bank_ranking.py",
    "tests/models/test_models_extras.py",
    "tests/mcp/test_mcp_elicitation.py",
    "tests/crypto/test_rotation_processes.py",
    "tests/cli/test_cli_demo.py",
    "tests/server/test_js_clients.py",
    "tests/test_platform.py",
    "tests/sessions/test_sessions_journal_kills.py",
    "tests/agent/test_agent_at_most_once_kills.py",
    "tests/telemetry/test_telemetry_off.py",
    "tests/test_readme.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark every property test ``properties``: ``make stress`` runs them all at full count.

    ``make test`` runs them too, those that ask for ``examples(n)`` at a quarter of their
    examples (tests/property_budget.py); the mark is given here, before ``-m`` selects, so
    no property test can be left out of ``make stress`` by a forgotten mark.
    """
    if is_hypothesis_test(getattr(item, "obj", None)):
        item.add_marker(pytest.mark.properties)


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
