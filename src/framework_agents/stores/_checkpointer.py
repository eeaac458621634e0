"""What the database checkpointers share (internal): settings, the cache, a save's plan.

A backend reads a thread's head (version, length, head JSON) and message bodies its own
way and hands them to :meth:`LeasedCheckpointer._loaded`; it writes a save with the
:class:`SavePlan` from :meth:`LeasedCheckpointer._plan` in one transaction or script,
and reports the new version to :meth:`LeasedCheckpointer._saved` (or a conflict to
:meth:`LeasedCheckpointer._conflicted`). The thread lock is :class:`LeaseLocks` over the
backend's three lock operations (``_try_acquire``, ``_renew``, ``_release``).
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict

from .._crypto import Cipher, sealed_without_cipher
from .._persist import check_seconds, shared_prefix
from .._retention import AutoPrune, check_ttl, waits_for_approval
from ..checkpoint._base import ThreadLockBase, check_checkpoint, check_new_part
from ..checkpoint.model import ThreadCheckpoint
from ..errors import CheckpointCorruptError, InvalidArgumentError, StoreIntegrityError
from ..messages import Message
from ._codec import (
    ThreadCache,
    check_lease,
    decode_checkpoint,
    encode_checked,
    encode_head,
)
from ._lease import LeaseLocks
from ._sealed import GROUP_MAX, is_sealed_head, open_head, open_thread, seal_group, seal_head

__all__ = ["LeasedCheckpointer", "SavePlan"]


@dataclass(frozen=True, slots=True)
class SavePlan:
    """What one save writes: the messages past the stored prefix, the head, the version."""

    thread_id: str
    #: The version this instance last read or wrote (``None``: it knows none; no check).
    expected: int | None
    #: How many stored messages the new history keeps; the log is cut there.
    keep: int
    added: Sequence[Message]
    bodies: list[bytes]
    head: bytes
    #: Whether the thread waits for a human (kept by ``prune``, never expired).
    pending: bool
    length: int
    cache: ThreadCache | None
    #: Where the sealed message groups this save writes start (``cipher=``; else empty).
    starts: Sequence[int] = ()


def group_keep(starts: Sequence[int], stored: int, keep: int, total: int) -> int:
    """Where a sealed save starts writing: ``keep``, moved back to a group's start.

    ``starts``: where the stored log's groups start (``stored`` messages); ``keep``: how
    many of them the new history (``total`` messages) keeps. A ``keep`` inside a group
    goes back to its start (the group is re-sealed with the new messages). Then the
    group before it is taken in too while it is no bigger than what is written and the
    result stays within ``GROUP_MAX``: a thread that grows a turn a save then holds
    groups of growing sizes (a binary counter's), not one group a save.
    """
    at = bisect.bisect_right(starts, keep) - 1
    if at >= 0 and keep < stored and starts[at] != keep:
        keep = starts[at]
    at = bisect.bisect_left(starts, keep) - 1
    while at >= 0 and keep - starts[at] <= total - keep and total - starts[at] <= GROUP_MAX:
        keep = starts[at]
        at -= 1
    return keep


class LeaseSettings(TypedDict, total=False):
    """The settings of the SQLite, PostgreSQL and Redis checkpointers (keywords, all optional).

    Their names, types and defaults are these for all three (the defaults are
    :meth:`LeasedCheckpointer._set_up`'s).
    """

    #: Seconds a save or a run waits for a thread another run holds (10.0; ``None``: forever).
    lock_timeout: float | None
    #: Seconds a thread lock outlives a holder that stopped renewing it (30.0).
    lease: float
    #: Seconds a thread is kept after its last save (``None``, the default: forever).
    ttl: float | None
    #: Seals every head and message at rest (``None``, the default: plain;
    #: ``docs/security.md``).
    cipher: Cipher | None


class LeasedCheckpointer(AutoPrune, ThreadLockBase):
    """The settings, cache and lock handling of the SQLite, PostgreSQL and Redis checkpointers."""

    lock_timeout: float | None
    lease: float
    _cache: dict[str, ThreadCache]
    _locks: LeaseLocks
    #: Seals heads and message bodies at rest (``cipher=``; ``None``: plain).
    _cipher: Cipher | None = None

    def use_cipher(self, cipher: Cipher | None) -> None:
        """Seal every head and body this instance writes, and open those it reads."""
        if cipher is not None and not isinstance(cipher, Cipher):
            raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
        self._cipher = cipher

    def _set_up(
        self,
        give_up: Callable[[str, str], Awaitable[None]] | None = None,
        /,
        *,
        lock_timeout: float | None = 10.0,
        lease: float = 30.0,
        ttl: float | None = None,
        cipher: Cipher | None = None,
        **unknown: object,
    ) -> None:
        """Check the settings (:class:`LeaseSettings`); the lock runs on the backend's hooks."""
        if unknown:  # a misspelt keyword, named as the constructor the caller called
            settings = ", ".join(LeaseSettings.__annotations__)
            raise TypeError(
                f"{type(self).__name__}() got an unexpected keyword argument "
                f"{next(iter(unknown))!r} (its settings: {settings})"
            )
        self.lock_timeout = check_seconds("lock_timeout", lock_timeout, optional=True)
        self.lease = check_lease(lease)
        self.ttl = check_ttl(ttl)
        self._cache = {}
        self._locks = LeaseLocks(
            lease=self.lease,
            try_acquire=self._try_acquire,
            renew=self._renew,
            release=self._release,
            give_up=give_up,
        )
        self.use_cipher(cipher)

    async def _try_acquire(self, thread_id: str, owner: str) -> int | None:
        """Take the thread's lock for ``owner`` if it is free: the fence, else ``None``."""
        raise NotImplementedError

    async def _renew(self, thread_id: str, owner: str) -> bool:
        """Extend ``owner``'s lease; ``False`` when it holds the lock no more."""
        raise NotImplementedError

    async def _release(self, thread_id: str, owner: str) -> None:
        """Free the thread's lock if ``owner`` holds it."""
        raise NotImplementedError

    def _loaded(
        self,
        thread_id: str,
        version: int,
        length: int,
        head: bytes,
        bodies: Sequence[bytes],
        *,
        source: str,
    ) -> ThreadCheckpoint:
        """The checkpoint read back (CHECKPOINT_CORRUPT when it does not add up); cached."""
        cipher = self._cipher
        starts: list[int] = []
        if cipher is not None:
            head = open_head(cipher, thread_id, length, head)  # authenticates the length
            if len(bodies) != length:
                raise StoreIntegrityError(
                    f"{source}: {len(bodies)} messages stored, {length} expected by its "
                    "sealed head: rows dropped or added; left as it is"
                )
            bodies, starts = open_thread(cipher, thread_id, bodies)
        elif len(bodies) != length:
            raise CheckpointCorruptError(
                f"{source} is unreadable: {len(bodies)} messages stored, {length} expected"
            )
        elif is_sealed_head(head):
            raise sealed_without_cipher(source)
        checkpoint = decode_checkpoint(thread_id, head, bodies, source=source)
        self._cache[thread_id] = ThreadCache.of(version, checkpoint.messages, starts)
        return checkpoint

    def _plan(self, checkpoint: object) -> SavePlan:
        """Check ``checkpoint`` and find what its save writes (what is new, checked alone)."""
        checkpoint = check_checkpoint(checkpoint)
        cache = self._cache.get(checkpoint.thread_id)
        keep = 0 if cache is None else shared_prefix(cache.messages, checkpoint.messages)
        check_new_part(checkpoint, keep)
        cipher, thread_id = self._cipher, checkpoint.thread_id
        total = len(checkpoint.messages)
        if cipher is not None and cache is not None:
            keep = group_keep(cache.starts, len(cache.messages), keep, total)
        added = checkpoint.messages[keep:]
        bodies, head = encode_checked(added), encode_head(checkpoint)
        starts: list[int] = []
        if cipher is not None:
            sealed: list[bytes] = []
            for at in range(0, len(added), GROUP_MAX):
                part = added[at : at + GROUP_MAX]
                ids = [m.id for m in part]
                sealed += seal_group(cipher, thread_id, keep + at, ids, bodies[at : at + GROUP_MAX])
                starts.append(keep + at)
            bodies = sealed
            head = seal_head(cipher, thread_id, total, head)
        return SavePlan(
            thread_id=checkpoint.thread_id,
            expected=None if cache is None else cache.version,
            keep=keep,
            added=added,
            bodies=bodies,
            head=head,
            pending=waits_for_approval(checkpoint),
            length=total,
            cache=cache,
            starts=starts,
        )

    def _saved(self, plan: SavePlan, version: int) -> None:
        """Remember the history ``plan`` stored as ``version``."""
        base = plan.cache if plan.cache is not None else ThreadCache(0)
        self._cache[plan.thread_id] = base.advanced(version, plan.keep, plan.added, plan.starts)

    def _forget(self, thread_id: str) -> None:
        """Forget what this instance knows of ``thread_id`` (read it again before writing)."""
        self._cache.pop(thread_id, None)

    async def save(self, checkpoint: ThreadCheckpoint) -> None:  # pragma: no cover
        """Store ``checkpoint`` (each backend writes its :class:`SavePlan`)."""
        raise NotImplementedError

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """Same as :meth:`save` (which already writes only what changed)."""
        await self.save(checkpoint)

    @contextlib.asynccontextmanager
    async def _thread_held(self, thread_id: str, wait: float | None) -> AsyncIterator[None]:
        """Held across processes; a dead or stopped holder is replaced after its ``lease``."""
        async with self._locks.hold(thread_id, wait):
            self._forget(thread_id)  # another run may have written meanwhile
            yield

    def fence(self, thread_id: str) -> int | None:
        """The fencing token of this instance's hold on ``thread_id`` (``None``: not held)."""
        held = self._locks.held.get(thread_id)
        return None if held is None else held.fence

    def _owner(self, thread_id: str) -> str | None:
        """The owner token of this instance's hold on ``thread_id`` (``None``: not held)."""
        held = self._locks.held.get(thread_id)
        return None if held is None else held.owner
