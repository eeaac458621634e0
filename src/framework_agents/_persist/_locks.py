"""Locks of the persistence layer: the per-event-loop registry and the sidecar ``flock``.

In-process, the tasks of one event loop that write one store queue on an
``asyncio.Lock`` per key (:class:`LoopLocks`); across processes, a writer holds
``flock(LOCK_EX)`` on a sidecar lock file that is never deleted (:func:`open_lock_file`,
:func:`flock`), and a reader that must see a document and its journal from the same
moment holds ``LOCK_SH``. A kernel lock dies with its holder, so a crash never leaves
a store locked.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import threading
import weakref
from collections.abc import AsyncIterator, Hashable
from pathlib import Path

from .._platform import posix_fcntl
from ._files import FILE_MODE, OddFileError

__all__ = ["LoopLocks", "flock", "open_lock_file"]


class LoopLocks:
    """``asyncio.Lock`` objects by key, one set per running event loop.

    An ``asyncio.Lock`` belongs to the loop it was first contended in, so a lock shared
    by key must be per loop: applications and tests run several loops one after the
    other (``asyncio.run``) or in several threads. :meth:`get` hands out a lock that
    lives while someone references it; :meth:`enter`/:meth:`leave` (and :meth:`hold`)
    count their users explicitly, for locks held across many awaits.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._weak: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, weakref.WeakValueDictionary[Hashable, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()
        self._counted: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, tuple[asyncio.Lock, int]]
        ] = weakref.WeakKeyDictionary()

    def get(self, key: Hashable) -> asyncio.Lock:
        """The lock for ``key`` in the running loop (created on first use)."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            locks = self._weak.get(loop)
            if locks is None:
                locks = weakref.WeakValueDictionary()
                self._weak[loop] = locks
            lock = locks.get(key)
            if lock is None:
                lock = asyncio.Lock()
                locks[key] = lock
            return lock

    def enter(self, key: Hashable) -> asyncio.Lock:
        """The lock for ``key``, counted as used until the matching :meth:`leave`."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            table = self._counted.setdefault(loop, {})
            lock, users = table.get(key, (None, 0))
            if lock is None:
                lock = asyncio.Lock()
            table[key] = (lock, users + 1)
            return lock

    def leave(self, key: Hashable) -> None:
        """Stop using the lock of ``key`` (dropped when nobody uses it)."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            table = self._counted.get(loop, {})
            lock, users = table[key]
            if users <= 1:
                del table[key]
            else:
                table[key] = (lock, users - 1)

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold the lock of ``key`` for the block."""
        lock = self.enter(key)
        try:
            async with lock:
                yield
        finally:
            self.leave(key)


def open_lock_file(path: Path, *, create: bool) -> int | None:
    """Open the sidecar lock file ``path`` (``0600``, never a symlink); ``None`` if absent.

    Opened without blocking (a FIFO there never waits for a writer) and kept only if it
    is a regular file.

    Raises:
        OddFileError: a symlink, directory, FIFO or device is where the lock file belongs.
        FileNotFoundError: ``create`` and the directory does not exist.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    flags |= os.O_CREAT if create else 0
    try:
        fd = os.open(path, flags, FILE_MODE)
    except FileNotFoundError:
        if create:
            raise
        return None
    except IsADirectoryError:
        raise OddFileError(path, "a directory is where the lock file belongs") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OddFileError(
                path, "the lock file is a symlink, which is never followed"
            ) from None
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened without blocking
            raise OddFileError(path, "a FIFO is where the lock file belongs") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OddFileError(
            path, "something other than a regular file is where the lock file belongs"
        )
    return fd


def flock(fd: int, *, exclusive: bool) -> None:
    """Block until this process holds ``flock`` on ``fd`` (released by closing ``fd``)."""
    fcntl = posix_fcntl()  # POSIX only: FILE_LOCK_UNSUPPORTED elsewhere
    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
