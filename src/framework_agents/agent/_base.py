"""What a driver built on the agent's loop uses (the swarm): its checks, drains and id rule.

* :func:`check_target`: a checkpointer and a thread id, checked (``INVALID_ARGUMENT``,
  ``THREAD_ID_INVALID``);
* :func:`until_interrupt`: an event stream that ends quietly on an interrupt;
* :func:`finished_event`: a driver drained to its finished event (``run()`` from ``stream()``);
* :func:`aclose_events`: an event stream closed at once;
* :func:`at_least`: an int limit, checked (``INVALID_ARGUMENT``);
* :func:`unique_call_ids`: calls with an empty or repeated id get a fresh one.
"""

from __future__ import annotations

from ._checks import at_least
from ._drain import aclose_events, finished_event, until_interrupt
from ._loop import unique_call_ids
from ._threads import check_target

__all__ = [
    "aclose_events",
    "at_least",
    "check_target",
    "finished_event",
    "unique_call_ids",
    "until_interrupt",
]
