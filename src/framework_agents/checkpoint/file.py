"""Checkpoints as files, safe across tasks, processes and crashes: :class:`FileCheckpointer`.

The blocking steps run in worker threads: reads in ``_file_reader``, saves (a delta
appended or the checkpoint folded) in ``_file_writer``; this module holds the locking
around them, and the public API.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import stat
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from .._crypto import Cipher
from .._fs import sweep_temp_files
from .._persist import check_seconds, checked_cipher, io_error, run_blocking
from .._retention import check_older_than, check_ttl, waits_for_approval
from ..errors import (
    AgentError,
    CheckpointCorruptError,
    InvalidArgumentError,
    LockTimeoutError,
    ThreadBusyError,
)
from ._base import HeldThread, ThreadLockBase, held_then_loaded
from ._file_records import (
    CHECKPOINT_FILE,
    JOURNAL_FILE,
    PROGRESS_FILE,
    RUN_LOCK_FILE,
    WRITE_LOCK_FILE,
    not_a_file,
)
from ._file_writer import FileWriter
from ._values import check_checkpoint
from .lock import (
    FileLockHold,
    LockDirectoryMissingError,
    call_with_file_lock,
    hold_file_lock,
)
from .model import ThreadCheckpoint, check_thread_id

__all__ = ["FileCheckpointer"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Default bound on the bytes of a thread's checkpoint plus its journal.
DEFAULT_MAX_BYTES = 256 << 20
#: Default bound on the messages and tool calls (objects with an ``"id"``) of a thread's
#: checkpoint, and of its journal, each (counted before parsing).
DEFAULT_MAX_ITEMS = 200_000
#: The steps ``hold_thread`` fuses: a subclass overriding one gets them one by one.
_FUSED = ("load", "save", "thread_lock")


class FileCheckpointer(FileWriter, ThreadLockBase):
    """Thread checkpoints under ``root``, every write under :func:`with_file_lock`.

    Layout (directories ``0700``, files ``0600``)::

        <root>/threads/<thread_id>/checkpoint.json    the checkpoint (atomic publish)
        <root>/threads/<thread_id>/checkpoint.journal deltas appended since (one per save)
        <root>/threads/<thread_id>/progress.json      read only: the delta file of the
                                                      release before the journal
        <root>/threads/<thread_id>/checkpoint.lock    write lock: held for one write
        <root>/threads/<thread_id>/run.lock           thread lock: held for a whole run

    Two lock files, so a run that holds its thread (``thread_lock``) can save as often as it
    likes: saves take only the write lock, which nobody holds for longer than one write.
    The thread lock is not reentrant on purpose: a second run of the same thread, even from
    inside the first, waits and then fails with THREAD_BUSY instead of interleaving.

    A save whose history extends the stored one appends a delta to ``checkpoint.journal``
    (framed, checksummed, one ``fdatasync``; see ``_journal``): the new messages and the
    other fields, checked alone. ``checkpoint.json`` (layout v3, see ``_file_format``)
    carries a CRC32 of all its bytes, its own token and the token of the journal it
    folded; the journal's header names the token of the document it extends. A publish
    of a new ``checkpoint.json`` (another history, or the journal past half its size)
    makes the journal stale, and it is removed; a journal bound to neither the document
    nor the one it folded is CHECKPOINT_CORRUPT, never dropped in silence. A torn last
    record (the file ends inside it, or its commit marker was never written) is an
    unacknowledged save and is ignored; a complete damaged one is CHECKPOINT_CORRUPT. A
    version-2 ``checkpoint.json`` (and its journal) is read as before and folded into
    layout v3 by the next save. A ``progress.json`` left by the previous release still
    applies when its ``base`` digest matches, until the next save folds it in.

    Reads take no lock (a published file is always complete). A write never replaces a
    corrupt file: when a file changed since this instance last read or wrote it, it is
    validated first and CHECKPOINT_CORRUPT leaves it untouched. Symlinks, FIFOs and
    devices are never followed or read (CHECKPOINT_CORRUPT); an ``OSError`` is
    ``STORAGE_IO`` naming the thread and the root.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float | None = 10.0,
        stale_after: float = 30.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        ttl: float | None = None,
        max_items: int = DEFAULT_MAX_ITEMS,
        cipher: Cipher | None = None,
    ) -> None:
        """``lock_timeout``: how long a save or a run waits for the thread (``None``: forever).

        ``cipher``: seal each ``checkpoint.json`` and journal record at rest, bound to the
        thread id and the document's token (``docs/security.md``).

        ``max_bytes`` bounds a stored checkpoint plus its journal, ``max_items`` the
        messages and tool calls in the checkpoint and in its journal, each (both checked
        before parsing: CHECKPOINT_CORRUPT). ``ttl``: seconds an idle thread is kept
        after its last save (see :meth:`prune`).
        """
        if not isinstance(root, str | os.PathLike) or not isinstance(os.fspath(root), str):
            raise InvalidArgumentError(
                f"FileCheckpointer root must be a str or os.PathLike of str, not {root!r:.60}"
            )
        check_seconds("lock_timeout", lock_timeout, optional=True)
        check_seconds("stale_after", stale_after, optional=False, positive=True)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise InvalidArgumentError(f"max_bytes must be a positive int, not {max_bytes!r}")
        if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
            raise InvalidArgumentError(f"max_items must be a positive int, not {max_items!r}")
        self.ttl = check_ttl(ttl)
        super().__init__(
            Path(root), stale_after=stale_after, max_bytes=max_bytes, max_items=max_items
        )
        self.lock_timeout = lock_timeout
        self.use_cipher(cipher)

    def use_cipher(self, cipher: Cipher | None) -> None:
        """Seal every checkpoint this instance writes, and open those it reads."""
        self._cipher = checked_cipher(cipher)
        self._known = {}

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"FileCheckpointer({str(self.root)!r})"

    # -- reading -------------------------------------------------------------------------

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint, or ``None`` (CHECKPOINT_CORRUPT when unreadable)."""
        check_thread_id(thread_id)
        return await run_blocking(self._load_checked, thread_id)

    def _load_checked(self, thread_id: str) -> ThreadCheckpoint | None:
        """:meth:`_load_sync`, an ``OSError`` raised as STORAGE_IO."""
        try:
            return self._load_sync(thread_id)
        except OSError as exc:
            key = f"threads/{thread_id}/{CHECKPOINT_FILE}"
            raise io_error(exc, action="read", key=key, root=self.root) from exc

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        return await run_blocking(self._list)

    # -- locking -------------------------------------------------------------------------

    async def _make_dir(self, thread_id: str) -> None:
        directory = self.thread_dir(thread_id)
        try:
            await run_blocking(functools.partial(os.makedirs, directory, mode=0o700, exist_ok=True))
        except (FileExistsError, NotADirectoryError):
            raise CheckpointCorruptError(
                f"{str(directory)!r} is not a directory (a file is in its way); "
                "it was left untouched: remove it to continue"
            ) from None

    @contextlib.asynccontextmanager
    async def _locked(
        self,
        thread_id: str,
        name: str,
        wait: float | None,
        then: Callable[[], object] | None = None,
    ) -> AsyncIterator[FileLockHold]:
        """The thread's lock file ``name`` held for the block (``hold_file_lock``)."""
        directory = self.thread_dir(thread_id)
        async with contextlib.AsyncExitStack() as stack:
            for attempt in range(3):
                try:
                    hold = await stack.enter_async_context(
                        hold_file_lock(directory / name, wait, self.stale_after, then=then)
                    )
                    break
                except LockDirectoryMissingError:
                    # No directory yet, or a delete removed it after our mkdir: make it.
                    if attempt == 2:
                        raise
                    await self._make_dir(thread_id)
            yield hold

    async def _call_locked(
        self,
        thread_id: str,
        fn: Callable[..., _T],
        *args: Any,
        release: FileLockHold | None = None,
    ) -> _T:
        """``fn(*args)`` under the write lock, in one worker hand-off when it is free.

        The thread's directory is made only when the lock file cannot be made without it
        (the first save, or after a delete removed it). ``release``: the run lock, let go
        in the same hand-off once ``fn`` returned (``call_with_file_lock``).
        """
        lock = self._files(thread_id).write_lock
        for attempt in range(3):
            try:
                return await call_with_file_lock(
                    lock,
                    fn,
                    *args,
                    timeout=self.lock_timeout,
                    stale_after=self.stale_after,
                    release=release,
                )
            except LockDirectoryMissingError:
                if attempt == 2:
                    raise
                await self._make_dir(thread_id)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- writing -------------------------------------------------------------------------

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Store the thread's checkpoint under its write lock (a delta when it can).

        When the stored history is a prefix of ``checkpoint.messages`` (the same message
        objects this instance last saved or loaded; messages are values, never changed
        in place), only the new messages and the other fields are appended to the journal
        (one record, one ``fdatasync``), checked alone. Otherwise, or once the journal
        outgrows half the document, the whole checkpoint is checked and published.
        """
        await self._save(checkpoint, None)

    async def _save(self, checkpoint: ThreadCheckpoint, release: FileLockHold | None) -> None:
        check_checkpoint(checkpoint)
        thread_id = checkpoint.thread_id
        try:
            await self._call_locked(
                thread_id, self._guard, thread_id, self._save_sync, checkpoint, release=release
            )
        except AgentError:
            raise
        except OSError as exc:  # taking or releasing the write lock
            key = f"threads/{thread_id}/{CHECKPOINT_FILE}"
            raise io_error(exc, action="write", key=key, root=self.root) from exc
        logger.debug("thread %s: checkpoint saved", thread_id)

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """The same as :meth:`save` (every save writes only what is new when it can)."""
        await self.save(checkpoint)

    async def rotate(self, *, migrate: bool = False) -> int:
        """Publish again, under ``cipher.current``, each thread with a value not under it.

        One thread at a time under its write lock (other writers wait for one fold at
        most); re-running it after a crash finishes the job. ``migrate``: plain files
        (written without ``cipher=``) are sealed too; else they are STORE_INTEGRITY. The
        number of threads written.
        """
        if self._cipher is None:
            raise InvalidArgumentError("rotate() needs a FileCheckpointer with cipher=")
        written = 0
        for thread_id in await self.list_threads():
            written += await self._call_locked(
                thread_id, self._guard, thread_id, self._rotate_sync, thread_id, migrate
            )
        return written

    def _guard(self, thread_id: str, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn``; an ``OSError`` becomes ``STORAGE_IO`` naming the thread and root."""
        try:
            return fn(*args)
        except AgentError:
            raise
        except OSError as exc:
            self._known.pop(thread_id, None)
            key = f"threads/{thread_id}/{CHECKPOINT_FILE}"
            raise io_error(exc, action="write", key=key, root=self.root) from exc

    def _unlink(self, thread_id: str) -> None:
        path = self.path(thread_id)
        targets = (path, path.with_name(PROGRESS_FILE), path.with_name(JOURNAL_FILE))
        for target in targets:  # all checked first: a delete never stops half-way
            try:
                mode = os.stat(target, follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(mode):
                raise not_a_file(target)
        for target in targets:
            try:
                os.unlink(target)
            except FileNotFoundError:
                pass
            except IsADirectoryError:  # a directory in the way (EISDIR on Linux)
                raise not_a_file(target) from None
            # We hold the write lock, so no writer of ours is mid-flight: sweep every temp.
            sweep_temp_files(target, grace_seconds=0.0)
        self._known.pop(thread_id, None)

    def _remove_dir_if_empty(self, thread_id: str) -> None:
        with contextlib.suppress(FileNotFoundError, OSError):
            os.rmdir(self.thread_dir(thread_id))

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's checkpoint (also a corrupt one); no error when there is none."""
        check_thread_id(thread_id)
        if not await run_blocking(os.path.isdir, self.thread_dir(thread_id)):
            return
        async with self._locked(thread_id, WRITE_LOCK_FILE, self.lock_timeout):
            await run_blocking(self._unlink, thread_id)
        await run_blocking(self._remove_dir_if_empty, thread_id)

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove threads not saved for ``older_than`` (default: ``ttl``); how many went.

        A thread is kept when a run holds it (``run.lock``), when it waits for an
        approval (a pending call or calls in flight), or when its checkpoint is
        unreadable (CHECKPOINT_CORRUPT data is left as it is, and logged).
        """
        cutoff = time.time() - check_older_than(older_than, self.ttl)
        gone = 0
        for thread_id in await self.list_threads():
            if await run_blocking(self._last_saved, thread_id) >= cutoff:
                continue
            try:
                async with (
                    self._locked(thread_id, RUN_LOCK_FILE, 0),
                    self._locked(thread_id, WRITE_LOCK_FILE, self.lock_timeout),
                ):
                    if await run_blocking(self._prune_if_idle, thread_id, cutoff):
                        gone += 1
            except LockTimeoutError:
                continue  # a run holds it
            except CheckpointCorruptError as exc:
                logger.warning("prune() kept thread %s: %s", thread_id, exc.message)
                continue
            await run_blocking(self._remove_dir_if_empty, thread_id)
        if gone:
            logger.info("pruned %d idle threads under %s", gone, self.root)
        return gone

    def _last_saved(self, thread_id: str) -> float:
        """The newest modification time of the thread's files (0: none)."""
        path = self.path(thread_id)
        newest = 0.0
        for target in (path, path.with_name(PROGRESS_FILE), path.with_name(JOURNAL_FILE)):
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                newest = max(newest, os.stat(target, follow_symlinks=False).st_mtime)
        return newest

    def _prune_if_idle(self, thread_id: str, cutoff: float) -> bool:
        """Under both locks: remove the thread if it is still idle since ``cutoff``."""
        if self._last_saved(thread_id) >= cutoff:
            return False
        checkpoint = self._read(thread_id)
        if checkpoint is None or waits_for_approval(checkpoint):
            return False
        self._unlink(thread_id)
        return True

    @contextlib.asynccontextmanager
    async def hold_thread(self, thread_id: str) -> AsyncIterator[HeldThread]:
        """:meth:`thread_lock` and :meth:`load` in one hand-off (``checkpoint._base``).

        The block gets the checkpoint as it was when the lock was taken (what a ``load``
        right after taking it would return), and a last save that lets the thread go in
        its own hand-off. A subclass (or an instance) that overrides a step has each made
        by its method.
        """
        if any(
            name in vars(self) or getattr(type(self), name) is not getattr(FileCheckpointer, name)
            for name in _FUSED
        ):
            async with held_then_loaded(self, thread_id) as held:  # its own steps, each
                yield held
            return
        check_thread_id(thread_id)
        load = functools.partial(self._load_checked, thread_id)
        async with self._thread_held(thread_id, self.lock_timeout, load) as hold:

            async def save_last(checkpoint: ThreadCheckpoint) -> bool:
                if checkpoint.thread_id != thread_id:
                    await self.save(checkpoint)
                    return False
                await self._save(checkpoint, hold)
                return hold.released

            loaded = cast("ThreadCheckpoint | None", hold.value)
            yield HeldThread(loaded, save_last)

    @contextlib.asynccontextmanager
    async def _thread_held(
        self, thread_id: str, wait: float | None, then: Callable[[], object] | None = None
    ) -> AsyncIterator[FileLockHold]:
        """The thread's ``run.lock`` held for the block (``then``: see ``hold_file_lock``)."""
        async with contextlib.AsyncExitStack() as stack:
            try:
                hold = await stack.enter_async_context(
                    self._locked(thread_id, RUN_LOCK_FILE, wait, then)
                )
            except LockTimeoutError as exc:
                raise ThreadBusyError(
                    f"thread {thread_id!r} is busy: another run holds it ({exc.message})"
                ) from exc
            yield hold
