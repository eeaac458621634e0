"""The lock that gives one process (one open GraphStore) an on-disk store (blocking).

An advisory lock on ``<path>/graph.lock`` (``flock`` on POSIX, ``msvcrt.locking`` on
Windows), held from open to close. The operating system releases it when the holder
dies, so a killed process never leaves a store locked. Other openers wait up to their
timeout, then get ``GRAPH_STORE_BUSY``.

On POSIX the lock file is opened and waited for by the persistence layer, as every file
store's lock is (:func:`~framework_agents._persist.open_lock_file`,
:func:`~framework_agents._persist.flock`): the waiter is woken the moment the holder lets
go, and a cancelled ``await store.open()`` stops waiting at once, taking nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import weakref
from pathlib import Path

from .._persist import Deadline, OddFileError, flock, open_lock_file
from .._platform import posix_fcntl
from ..errors import (
    GraphStoreBusyError,
    GraphStoreCorruptError,
    GraphStoreIOError,
    LockTimeoutError,
)

__all__ = ["LOCK_NAME", "StoreLock", "graph_io_error"]


def graph_io_error(exc: OSError, message: str) -> GraphStoreIOError:
    """``GRAPH_STORE_IO`` for ``exc`` (its ``errno`` kept, whether a write may have landed)."""
    return GraphStoreIOError(
        f"{message}: {exc.strerror or exc}",
        errno=exc.errno,
        may_have_landed=bool(getattr(exc, "may_have_landed", False)),
    )


def _open(file: Path) -> int:
    """The lock file, opened (created 0600; a symlink, FIFO or device is refused)."""
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        return os.open(file, os.O_RDWR | os.O_CREAT, 0o600)
    fd = open_lock_file(file, create=True)
    assert fd is not None  # created when missing
    return fd


LOCK_NAME = "graph.lock"

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def _wait(fd: int, timeout: float, file: Path) -> None:
        deadline, delay = time.monotonic() + max(timeout, 0.0), 0.005
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise LockTimeoutError(f"lock {str(file)!r} not acquired within {timeout}s")
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, 0.1)

else:
    # fcntl is looked up when a store is opened, not at import: ``import framework_agents``
    # works where the platform has neither (FILE_LOCK_UNSUPPORTED then names the way out).

    def _wait(fd: int, timeout: float, file: Path) -> None:
        flock(fd, exclusive=True, deadline=Deadline.after(timeout), name=file)

    def _unlock(fd: int) -> None:
        fcntl = posix_fcntl()
        fcntl.flock(fd, fcntl.LOCK_UN)


class StoreLock:
    """An exclusive lock on one store directory; ``acquire()`` then ``release()``."""

    def __init__(self, directory: Path) -> None:
        """A lock on ``directory`` (not taken yet)."""
        self.file = directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting up to ``timeout`` seconds for its holder to let go.

        Raises ``GRAPH_STORE_BUSY`` when another process (or another open store of this
        process) still holds it, ``GRAPH_STORE_IO`` when the lock file cannot be opened.
        """
        try:
            fd = _open(self.file)
        except OddFileError as exc:
            raise GraphStoreCorruptError(
                f"graph store lock {self.file}: {exc.reason}; it was left untouched"
            ) from None
        except OSError as exc:
            raise graph_io_error(exc, f"cannot open the lock {self.file}") from exc
        try:
            _wait(fd, timeout, self.file)
        except LockTimeoutError:
            os.close(fd)
            raise GraphStoreBusyError(
                f"graph store {self.file.parent} is open in another process (or another "
                "GraphStore of this one); close it there, or pass lock_timeout= to wait"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise graph_io_error(exc, f"cannot lock {self.file}") from exc
        except BaseException:  # cancelled while waiting: nothing taken
            os.close(fd)
            raise
        self._fd = fd
        # A store dropped without close() must not hold the path until the process ends:
        # closing the descriptor when the lock is collected lets it go.
        self._finalizer = weakref.finalize(self, os.close, fd)

    def release(self) -> None:
        """Let the lock go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            self._finalizer.detach()
            # Closing the descriptor lets the lock go whatever the unlock said; neither
            # failing leaves anything to undo, so neither is raised at a close.
            with contextlib.suppress(OSError):
                _unlock(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
