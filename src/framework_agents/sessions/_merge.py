"""Merging a session save another writer beat (internal): messages by id, state by key.

Two agents on one session (two processes, two tabs) each save the latest snapshot with a
compare-and-swap; the second is refused (``CHECKPOINT_CONFLICT``) because it did not see
the first. Instead of dropping its turn, the agent merges, by id as a shared memory's
``commit(messages, base=...)`` does, in the order the saves were acknowledged:

* messages, by id: the stored messages (the other writer's save was acknowledged first),
  then the saver's that are not stored; a stored message the saver also holds is taken
  in the saver's version (an edit), and one in the saver's base it no longer holds (a
  window cut it, an edit replaced it) stays gone. The merged history usually extends
  the stored one, so its save appends what the saver added;
* state, by key: a key only the other writer changed takes its value, a key only the
  saver changed takes the saver's; a key both changed, to different values, is a real
  conflict: :func:`merge_latest` raises ``CHECKPOINT_CONFLICT`` naming the keys, and
  nothing is written.

``base`` is what the saver last read from or wrote to the session.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..errors import CheckpointConflictError
from ..messages import Message

__all__ = ["merge_messages", "merge_state"]

_MISSING: Any = object()


def merge_messages(
    ours: Sequence[Message], base_ids: Collection[str], theirs: Sequence[Message] | None
) -> list[Message]:
    """``theirs`` (less what ``ours`` dropped from ``base_ids``), then the rest of ``ours``."""
    if not theirs:
        return list(ours)
    own = {m.id: m for m in ours}
    kept = [own.get(m.id, m) for m in theirs if m.id in own or m.id not in base_ids]
    stored = {m.id for m in theirs}
    return [*kept, *(m for m in ours if m.id not in stored)]


def merge_state(
    ours: Mapping[str, Any] | None,
    base: Mapping[str, Any] | None,
    theirs: Mapping[str, Any] | None,
    *,
    where: str,
) -> dict[str, Any] | None:
    """The three-way merge of two writers' states from ``base``, key by key.

    ``None`` is an absent state. ``CHECKPOINT_CONFLICT`` when a key was changed by both
    writers to different values (a key removed counts as a change).
    """
    if ours is None:  # the saver carries no state: the stored one stands
        return None if theirs is None else dict(theirs)
    mine, stored, before = dict(ours or {}), dict(theirs or {}), dict(base or {})
    merged = dict(stored)
    clashes = []
    for key in mine.keys() | stored.keys() | before.keys():
        was = before.get(key, _MISSING)
        now, other = mine.get(key, _MISSING), stored.get(key, _MISSING)
        if _same(now, was):
            continue  # not ours to change: the stored value stands
        if not _same(other, was) and not _same(other, now):
            clashes.append(key)
            continue
        if now is _MISSING:
            merged.pop(key, None)
        else:
            merged[key] = now
    if clashes:
        names = ", ".join(map(repr, sorted(clashes)))
        raise CheckpointConflictError(
            f"{where}: state key(s) {names} changed by this run and by another writer since "
            "it read the session; nothing was written (the next run restores the other "
            "writer's snapshot: apply the change again there)"
        )
    return merged


def _same(a: Any, b: Any) -> bool:
    """Equal values (``_MISSING`` only equals itself); JSON values compare by ``==``."""
    if a is _MISSING or b is _MISSING:
        return a is b
    return type(a) is type(b) and bool(a == b)
