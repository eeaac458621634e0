"""Carrying a memory's long-term state in session snapshots' ``app_data``.

A session snapshot saves the conversation; a ``GraphMemory`` over an in-memory
``GraphStore`` would lose its facts with the process. These two functions are the seam
the agent calls (on every session save and restore, and in ``take_snapshot`` /
``load_snapshot``):

* ``app_data_with_state(memory, app_data)`` -> the ``app_data`` to save: the memory's
  ``export_state()`` under :data:`APP_DATA_KEY` (``"framework_agents.graph"``), the
  application's other keys untouched;
* ``await restore_state(memory, app_data)`` -> applies the state found there with
  ``import_state()`` (a malformed one raises ``GRAPH_STATE_INVALID`` and changes nothing).

Only memories that say so carry state (:attr:`GraphMemory.carries_state`: by default an
in-memory store does, an on-disk store does not -- it is durable already, and restoring
an old copy over a store other sessions share would take their facts away). ``app_data``
that is not a dict (or ``None``) cannot hold the key: it is saved unchanged, with a
warning.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable

from .._util import implements

__all__ = ["APP_DATA_KEY", "StatefulMemory", "app_data_with_state", "restore_state"]

#: The ``app_data`` key that holds a memory's exported state.
APP_DATA_KEY = "framework_agents.graph"

logger = logging.getLogger(__name__)


@runtime_checkable
class StatefulMemory(Protocol):
    """A memory with long-term state worth carrying in snapshots."""

    @property
    def carries_state(self) -> bool:
        """Whether snapshots should carry the state (see the module docstring)."""
        ...

    def export_state(self) -> dict[str, Any]:
        """The state, JSON-serialisable."""
        ...

    async def import_state(self, state: dict[str, Any]) -> None:
        """Replace the state by an exported one."""
        ...


def app_data_with_state(memory: object, app_data: Any) -> Any:
    """``app_data`` plus ``memory``'s state under :data:`APP_DATA_KEY`, if it carries one.

    A dict is copied (never changed in place), ``None`` becomes a dict; anything else is
    returned as it is (with a warning) since it has no room for the key.
    """
    if not implements(memory, StatefulMemory) or not memory.carries_state:
        return app_data
    if app_data is None:
        return {APP_DATA_KEY: memory.export_state()}
    if isinstance(app_data, dict):
        return {**app_data, APP_DATA_KEY: memory.export_state()}
    logger.warning(
        "app_data is a %s, not a dict: the memory's state is not carried in the snapshot",
        type(app_data).__name__,
    )
    return app_data


async def restore_state(memory: object, app_data: Any) -> bool:
    """Import the state ``app_data`` carries into ``memory``; whether there was one."""
    if not implements(memory, StatefulMemory) or not memory.carries_state:
        return False
    if not isinstance(app_data, dict) or APP_DATA_KEY not in app_data:
        return False
    await memory.import_state(app_data[APP_DATA_KEY])
    return True
