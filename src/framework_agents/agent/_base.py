"""What a driver built on the agent's loop uses (the swarm): one check, one drain, one id rule.

* :func:`check_target`: a checkpointer and a thread id, checked (``INVALID_ARGUMENT``,
  ``THREAD_ID_INVALID``);
* :func:`until_interrupt`: an event stream that ends quietly on an interrupt;
* :func:`unique_call_ids`: calls with an empty or repeated id get a fresh one.
"""

from __future__ import annotations

from ._drain import until_interrupt
from ._loop import unique_call_ids
from ._threads import check_target

__all__ = ["check_target", "unique_call_ids", "until_interrupt"]
