"""One conformance suite for every store backend, shipped or third-party.

Subclass :class:`StoreConformance` in a test module and give it a ``store_factory``
fixture that returns a :class:`StoreFactory` for a fresh, empty namespace (a new
directory, schema or key prefix) and cleans it up afterwards::

    import functools, pytest
    from framework_agents.testing.conformance import StoreConformance, StoreFactory

    def open_mine(url: str) -> Store: ...          # top level: child processes import it

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return StoreFactory(functools.partial(open_mine, str(tmp_path)), lease=2.0)

Capabilities are detected, and a test whose capability is missing is skipped with the
reason: ``thread_lock`` and ``fence`` on the checkpointer, ``prune`` on the storage and
the checkpointer, ``replace`` on memories, ``cross_process`` and ``lease`` and
``corrupter`` on the factory (a corrupter that is also a :class:`BankCorrupter` spoils
bank records for the bank's ``MEMORY_CORRUPT`` test). The bank tests run on
``store.bank()``. Tests that start OS processes (concurrent appends, lock
exclusion, a killed holder, a fenced stale writer) are marked ``slow``; they use the
``spawn`` start method, so ``StoreFactory.open`` must be picklable (a module-level
function or a ``functools.partial`` of one).

Needs pytest (a test dependency, not a runtime one): import this module from tests only.
"""

from __future__ import annotations

import pytest

from ._corrupt import BankCorrupter
from ._suite import Corrupter, StoreFactory, overlapping_agent_runs
from ._suite_bank import BankSuite
from ._suite_checkpoint import CheckpointSuite
from ._suite_memory import MemorySuite
from ._suite_processes import ProcessSuite
from ._suite_storage import StorageSuite

__all__ = [
    "BankCorrupter",
    "Corrupter",
    "StoreConformance",
    "StoreFactory",
    "overlapping_agent_runs",
]


class StoreConformance(StorageSuite, CheckpointSuite, MemorySuite, BankSuite, ProcessSuite):
    """The contracts of API.md "Durable stores" and "Long-term memory: MemoryBank".

    For the backend of ``store_factory``.
    """

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """Override: a factory for a fresh, empty namespace of the backend under test."""
        raise NotImplementedError("define a store_factory fixture in the subclass")
