"""The one exclusive section of an agent: a run, a resume, an edit or a snapshot load."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..errors import AgentBusyError

__all__ = ["BusyFlag"]


class BusyFlag:
    """One run (or edit, or snapshot load) at a time per agent instance.

    :meth:`hold` is the only way to take it; it raises ``AGENT_BUSY`` when it is taken
    and yields a ``release()`` that a run calls before its terminal event, so a consumer
    that sees the event sees the agent free (releasing twice is harmless).
    """

    __slots__ = ("_held", "_owner")

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._held = False

    @property
    def held(self) -> bool:
        """Whether a run, edit or snapshot load is in progress."""
        return self._held

    def check(self, what: str | None = None) -> None:
        """``AGENT_BUSY`` if taken (``what``: the operation refused, for the message)."""
        if not self._held:
            return
        if what is None:
            raise AgentBusyError(
                f"agent {self._owner!r} is already running; one run at a time per instance"
            )
        raise AgentBusyError(
            f"{what}() while agent {self._owner!r} is busy (a run, edit or snapshot load); "
            "wait for it to end"
        )

    @contextlib.contextmanager
    def hold(self, what: str | None = None) -> Iterator[Callable[[], None]]:
        """Take the flag for the ``with`` block; yields ``release()`` for an early release."""
        self.check(what)
        self._held = True
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._held = False

        try:
            yield release
        finally:
            release()
