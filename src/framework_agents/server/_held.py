"""A run's thread held by the server while it places the run's message, then lent to the agent.

A client that lost its answer (the replica that ran it died, the stream broke) sends its
message again under the same id. Whether that message is new, taken already, or taken
but never answered can only be told under the thread's lock: two replicas retrying one
prompt at once must answer it once, and a check made before the lock (then the append
after it) lets both through. So a run of a message takes the thread's lock itself
(:func:`~framework_agents.checkpoint._base.hold_thread`), decides with the checkpoint it
holds (:func:`placement`), and hands the agent a :class:`HeldCheckpointer`: the same
checkpointer, whose lock of that thread is the one already held (the agent's run takes
no second lock, and saves under the held one: a leased store's fence is the server's).

* ``new``: the thread does not hold the message's id: the run appends it and answers.
* ``continue``: the thread ends in that message, unanswered, with nothing pending (its
  replica died after the prompt was saved, before the model answered): the run goes on
  from the thread as it stands (``agent.stream(None, ...)``), answering it once.
* ``taken``: anything else the thread holds it in (answered, or waiting for a decision):
  nothing runs; the protocol answers with the thread as it stands.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from types import EllipsisType
from typing import Any, Literal

from ..checkpoint._base import HeldThread, hold_thread, save_progress, thread_lock
from ..checkpoint.model import ThreadCheckpoint

__all__ = ["HeldCheckpointer", "Placement", "placement", "ran_unanswered", "timed_lock"]

#: How a run's message goes on a thread (see the module docstring).
Placement = Literal["new", "continue", "taken"]


def placement(checkpoint: ThreadCheckpoint | None, message_id: str | None) -> Placement:
    """How a message of id ``message_id`` goes on the thread ``checkpoint`` (``None``: new).

    Stable once ``taken``: a thread that answered a message, or moved past it, never ends
    in it unanswered again; so a check before the lock may answer ``taken`` at once, while
    ``new`` and ``continue`` are decided again under the lock.
    """
    if checkpoint is None or message_id is None:
        return "new"
    messages = checkpoint.messages
    if not any(m.id == message_id for m in messages):
        return "new"
    last = messages[-1]
    unanswered = (
        last.id == message_id
        and last.role == "user"
        and checkpoint.pending is None
        and not checkpoint.in_flight
        and checkpoint.turn is None
    )
    return "continue" if unanswered else "taken"


def ran_unanswered(checkpoint: ThreadCheckpoint | None, call_id: str | None) -> bool:
    """Whether the thread holds a decided turn with its results, unanswered.

    A decision's run died after the call's result landed, before the model answered: the
    turn and its results are saved, nothing is pending or in flight (the thread's
    messages end in the prompt). The decision sent again (A2A), or a client catching up
    (AG-UI), has it answered (the call does not run again); decided under the lock like a
    prompt. ``call_id``: that call's result in particular (``None``: any).
    """
    if checkpoint is None or checkpoint.turn is None:
        return False
    if checkpoint.pending is not None or checkpoint.in_flight or not checkpoint.results:
        return False
    return call_id is None or any(r.tool_call_id == call_id for r in checkpoint.results)


def timed_lock(
    checkpointer: Any, thread_id: str, timeout: float | EllipsisType | None
) -> AbstractAsyncContextManager[None]:
    """``checkpointer``'s lock of ``thread_id``, waiting ``timeout`` seconds (``None``: forever).

    ``...`` waits the checkpointer's own ``lock_timeout``; so does a lock that takes no
    ``timeout=`` (the in-process stand-in of :func:`thread_lock`, a third party's).
    """
    lock = getattr(checkpointer, "thread_lock", None)
    try:
        takes_timeout = lock is not None and "timeout" in inspect.signature(lock).parameters
    except (TypeError, ValueError):
        takes_timeout = False
    if timeout is ... or not takes_timeout:
        return thread_lock(checkpointer, thread_id)
    timed: AbstractAsyncContextManager[None] = checkpointer.thread_lock(thread_id, timeout=timeout)
    return timed


class HeldCheckpointer:
    """``inner`` seen by a run of ``thread_id``, whose lock its caller holds already.

    Holding or locking that thread yields at once (the held checkpoint, once; then a fresh
    load), every other call goes to ``inner``: saves are made under the caller's hold.
    """

    def __init__(self, inner: Any, thread_id: str, held: HeldThread) -> None:
        """Lend ``held`` (``inner``'s hold of ``thread_id``) to one run."""
        self.inner = inner
        self.thread_id = thread_id
        self._held: HeldThread | None = held

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """``inner``'s save."""
        await self.inner.save(checkpoint)

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """``inner``'s progress save (a plain save where it has none)."""
        await save_progress(self.inner, checkpoint)

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """``inner``'s checkpoint of ``thread_id``."""
        loaded: ThreadCheckpoint | None = await self.inner.load(thread_id)
        return loaded

    async def delete(self, thread_id: str) -> None:
        """``inner``'s delete."""
        await self.inner.delete(thread_id)

    async def list_threads(self) -> list[str]:
        """``inner``'s thread ids."""
        listed: list[str] = await self.inner.list_threads()
        return listed

    def thread_lock(
        self, thread_id: str, *, timeout: float | EllipsisType | None = ...
    ) -> AbstractAsyncContextManager[None]:
        """Nothing to take for the held thread; ``inner``'s lock for any other.

        That lock waits ``timeout`` where ``inner``'s lock takes one (:func:`timed_lock`).
        """
        if thread_id == self.thread_id:
            return contextlib.nullcontext()
        return timed_lock(self.inner, thread_id, timeout)

    @contextlib.asynccontextmanager
    async def hold_thread(self, thread_id: str) -> AsyncIterator[HeldThread]:
        """The held thread as the caller took it (first use), then as loaded now."""
        if thread_id != self.thread_id:
            async with hold_thread(self.inner, thread_id) as other:
                yield other
            return
        held, self._held = self._held, None
        if held is None:
            held = HeldThread(await self.inner.load(thread_id), self._save_last)
        yield held

    async def _save_last(self, checkpoint: ThreadCheckpoint) -> bool:
        await self.inner.save(checkpoint)
        return False  # the caller lets the thread go when its hold ends

    @property
    def lock_timeout(self) -> float | None:
        """``inner``'s wait for a busy thread."""
        value: float | None = getattr(self.inner, "lock_timeout", None)
        return value
