"""Editing a stored thread and branching it, for the JSON API (and the console).

* ``edit_message`` replaces the text of one message of the thread's checkpoint (the
  message keeps its id); a turn that holds tool calls cannot be edited
  (``MESSAGE_NOT_EDITABLE``: results answer its call ids; branch from before it), nor a
  thread that runs or waits for a decision. The timeline gets an ``edit`` entry.
* ``branch`` makes a new thread holding the history up to and including one message (a
  turn with calls keeps their results; the cut is repaired so it is well formed) and a
  copy of the state. The link to the parent is stored at
  ``server/threads/<new>/parent.json``; both timelines get a ``branch`` entry.

Both hold the thread in this process (``THREAD_BUSY`` while a run holds it) and write
under the checkpointer's thread lock, so a run of another replica never interleaves.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..checkpoint._base import thread_lock
from ..checkpoint.model import ThreadCheckpoint, check_thread_id
from ..errors import (
    InvalidArgumentError,
    MessageNotEditableError,
    MessageNotFoundError,
)
from ..history import repair_history
from ..messages import Message, new_id
from ._errors import ApprovalPendingError
from ._runner import ThreadRunner, parent_key

__all__ = ["branch_history", "branch_thread", "edit_message", "parent_of"]

logger = logging.getLogger(__name__)


async def parent_of(runner: ThreadRunner, thread_id: str) -> dict[str, Any] | None:
    """``{"thread_id", "message_id"}`` the thread was branched from, or ``None``."""
    raw = await runner.store.storage.get(parent_key(check_thread_id(thread_id)))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        logger.warning("unreadable parent link of thread %s; shown as none", thread_id)
        return None
    return data if isinstance(data, dict) else None


def _index_of(checkpoint: ThreadCheckpoint, message_id: str) -> int:
    for i, message in enumerate(checkpoint.messages):
        if message.id == message_id:
            return i
    raise MessageNotFoundError(
        f"thread {checkpoint.thread_id!r} has no message {message_id!r:.100}"
    )


async def edit_message(
    runner: ThreadRunner, thread_id: str, message_id: str, content: str
) -> ThreadCheckpoint:
    """Replace one message's text; the updated checkpoint."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidArgumentError("content must be a non-empty string")
    handle = runner.claim(thread_id, resume=False)
    try:
        async with thread_lock(runner.checkpointer, thread_id):  # other replicas too
            updated = await _edited(runner, thread_id, message_id, content)
            await runner.checkpointer.save(updated)
        await runner.record(thread_id, "edit", message_id)
        return updated
    finally:
        runner.release(handle)


async def _edited(
    runner: ThreadRunner, thread_id: str, message_id: str, content: str
) -> ThreadCheckpoint:
    checkpoint = await runner.require(thread_id)
    if checkpoint.pending is not None:
        raise ApprovalPendingError(
            f"thread {thread_id!r} waits for a decision; answer it before editing"
        )
    index = _index_of(checkpoint, message_id)
    old = checkpoint.messages[index]
    if old.tool_calls:
        raise MessageNotEditableError(
            f"message {message_id!r} holds tool calls; branch from before it instead"
        )
    messages = list(checkpoint.messages)
    messages[index] = old.model_copy(update={"content": content})
    return checkpoint.model_copy(update={"messages": messages, "saved_at": datetime.now(UTC)})


def branch_history(messages: Sequence[Message], index: int) -> list[Message]:
    """The history of a branch at ``messages[index]``: up to it, with its calls' results.

    The cut is repaired, so the branch is well formed whatever the original was.
    """
    end = index + 1
    calls = {c.id for c in messages[index].tool_calls}
    while end < len(messages) and messages[end].tool_call_id in calls:
        end += 1  # the answers of that turn's calls come along
    return repair_history(messages[:end])


async def branch_thread(
    runner: ThreadRunner,
    thread_id: str,
    message_id: str,
    *,
    new_thread_id: str | None = None,
    label: str | None = None,
) -> str:
    """A new thread holding the history up to ``message_id``; its id."""
    if label is not None and not isinstance(label, str):
        raise InvalidArgumentError("label must be a string")
    checkpoint = await runner.require(thread_id)
    messages = branch_history(checkpoint.messages, _index_of(checkpoint, message_id))
    new = check_thread_id(new_thread_id or f"{thread_id[:100]}-branch-{new_id()[:8]}")
    handle = runner.claim(new, resume=False)
    try:
        async with thread_lock(runner.checkpointer, new):
            if await runner.load(new) is not None:
                raise InvalidArgumentError(f"thread {new!r} exists already")
            state = copy.deepcopy(checkpoint.state)
            await runner.checkpointer.save(ThreadCheckpoint(new, None, messages, state))
        link = {"thread_id": thread_id, "message_id": message_id}
        await runner.store.storage.put(parent_key(new), json.dumps(link).encode())
        await runner.record(new, "branch", label or f"from {thread_id}")
    finally:
        runner.release(handle)
    await runner.record(thread_id, "branch", label or f"to {new}")
    return new
