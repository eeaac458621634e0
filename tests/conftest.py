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


#: The modules that take longest (about 4 s or more, one test or many; a module's CLI,
#: server, browser or model processes cost seconds each), slowest first, as measured with
#: ``--junitxml`` per family (2026-12-06; the tenants' and encryption's modules, measured
#: on a busier machine, placed by half their time; the classes of
#: test_stores_conformance.py, about 6 s each, rank where one does). ``make test`` hands
#: scopes to its two workers in collection order (``--no-loadscope-reorder``), a worker
#: taking the next when it has two tests left, so these go first and the many short
#: modules fill in after them: the workers end together instead of one running a long
#: module alone at the end (a long module of one or two tests would otherwise come last,
#: after every larger module).
#: Update it when a module grows past these.
LONGEST_FIRST = (
    "tests/test_docs.py",
    "tests/cli/test_cli_serve.py",
    "tests/cli/test_cli_serve_lifecycle.py",
    "tests/cli/test_cli_serve_tenants.py",
    "tests/server/test_console_browser.py",
    "tests/server/test_tenants_browser.py",
    "tests/crypto/test_rotation_processes.py",
    "tests/mcp/test_mcp_malformed.py",
    "tests/stores/test_stores_crypto.py",
    "tests/server/test_tenants_stores.py",
    "tests/server/test_tenants.py",
    "tests/cli/test_cli_chat.py",
    "tests/cli/test_cli_doctor.py",
    "tests/checkpoint/test_checkpoint_lock_reclaim.py",
    "tests/checkpoint/test_checkpoint_values.py",
    "tests/graph/test_graph_rules.py",
    "tests/checkpoint/test_checkpoint_lock.py",
    "tests/mcp/test_mcp_progress.py",
    "tests/checkpoint/test_checkpoint_canonical.py",
    "tests/checkpoint/test_checkpoint_file.py",
    "tests/stores/test_bank_sql.py",
    "tests/memory/test_memory_properties.py",
    "tests/memory/test_memory_canonical.py",
    "tests/stores/test_stores_conformance.py",
    "tests/memory/test_memory_window.py",
    "tests/server/test_mcp_conformance.py",
    "tests/conversation/test_conversation_properties.py",
    "tests/server/test_cross_site.py",
    "tests/server/test_cross_site_browser.py",
    "tests/server/test_mcp_serve.py",
    "tests/server/test_streaming.py",
    "tests/server/test_console_elicitation_browser.py",
    "tests/mcp/test_mcp_client.py",
    "tests/models/test_models_local.py",
    "tests/server/test_unknown_outcome_after_crash.py",
    "tests/server/test_memories_api.py",
    "tests/sessions/test_sessions_strict.py",
    "tests/server/test_a2a.py",
    "tests/server/test_server_cipher.py",
    "tests/mcp/test_mcp_elicitation.py",
    "tests/server/test_memories_browser.py",
    "tests/server/test_elicitation_serving.py",
    "tests/graph/test_graph_open.py",
    "tests/memory/test_memory_file_appendable.py",
    "tests/agent/test_agent_at_most_once_kills.py",
    # Few tests but seconds each (2-3 s): they would come last of all.
    "tests/cli/test_cli_models.py",
    "tests/stores/test_stores_properties.py",
    "tests/bank/test_bank_ranking.py",
    "tests/server/test_js_clients.py",
    "tests/bank/test_bank_properties.py",
    "tests/test_platform.py",
    "tests/telemetry/test_telemetry_off.py",
    "tests/test_history_problems_reference.py",
    "tests/test_history_repair_reference.py",
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
