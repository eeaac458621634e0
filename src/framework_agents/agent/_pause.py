"""``agent.pause`` outside a run of the thread: save the agent's history as the thread's.

A pause made while a run holds the thread goes through that run instead (``ctx.pause()``,
``LoopRun.pause``, ``_threads._ThreadRun.on_pause``): it never waits for the lock its own
run holds. Here the thread's lock is taken like any writer's.
"""

from __future__ import annotations

from typing import Any

from ..checkpoint._base import Checkpointer, thread_lock
from ..checkpoint.model import ThreadCheckpoint
from ..errors import CheckpointMissingError
from ..history import repair_history
from ..memory.carry import app_data_with_state
from ..messages import Message
from ._history import AgentHistory

__all__ = ["pause_thread"]


async def pause_thread(
    checkpointer: Checkpointer,
    thread_id: str,
    history: AgentHistory,
) -> None:
    """Save ``history``'s messages and state as the thread's checkpoint (``pending=None``).

    Takes the thread's lock (a pause made from inside a run holding the thread goes
    through that run instead: ``LoopRun.pause``). ``history`` holds what the agent holds
    now (before its first run, what that run would start from). Calls of unknown outcome
    recorded in the thread's checkpoint are kept (a pause must not make the at-most-once
    protocol forget them). A thread with no checkpoint is ``CHECKPOINT_MISSING``, nothing
    written (:func:`_check_new_thread`), unless the agent's own history is parked there.
    """
    async with thread_lock(checkpointer, thread_id):
        messages = repair_history(history.messages)  # a seed may be malformed; runs repair too
        base = await checkpointer.load(thread_id)
        if base is None:
            _check_new_thread(checkpointer, thread_id, history, messages)
        keep: dict[str, Any] = {}
        if base is not None and base.in_flight:
            keep = {
                "turn": base.turn,
                "results": base.results,
                "in_flight": base.in_flight,
                "outcome_unknown": base.outcome_unknown,
            }
        app_data = app_data_with_state(history.memory, base.app_data if base else None)
        keep["app_data"] = app_data if isinstance(app_data, dict) else None
        state = history.state.to_dict()
        await checkpointer.save(ThreadCheckpoint(thread_id, None, messages, state, **keep))


def _check_new_thread(
    checkpointer: Checkpointer, thread_id: str, history: AgentHistory, messages: list[Message]
) -> None:
    """``CHECKPOINT_MISSING`` unless pausing ``thread_id`` (no checkpoint) parks a history.

    The agent's history is parked under a new thread id when it is the agent's own (no
    thread's run or resume left it, or this very thread's did: its checkpoint was deleted
    since) and holds a message. A history another thread's run left is that thread's: a
    pause never copies one thread into another (``branch()`` the agent for that).
    """
    bound = history.thread
    if bound is not None and (bound[0] is not checkpointer or bound[1] != thread_id):
        raise CheckpointMissingError(
            f"thread {thread_id!r} has no checkpoint, and the agent's history is thread "
            f"{bound[1]!r}'s: a pause does not copy one thread into another "
            "(run the new thread with a prompt, or branch() the agent)"
        )
    if not messages:
        raise CheckpointMissingError(
            f"thread {thread_id!r} has no checkpoint and the agent holds no message: "
            "nothing to pause (run it with a prompt first)"
        )
