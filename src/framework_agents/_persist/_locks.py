"""Locks of the persistence layer: the per-event-loop registry and the sidecar ``flock``.

In-process, the tasks of one event loop that write one store queue on an
``asyncio.Lock`` per key (:class:`LoopLocks`); across processes, a writer holds
``flock(LOCK_EX)`` on a sidecar lock file that is never deleted (:func:`open_lock_file`,
:func:`flock`), and a reader that must see a document and its journal from the same
moment holds ``LOCK_SH``. A kernel lock dies with its holder, so a crash never leaves
a store locked. Every wait is bounded by the operation's :class:`Deadline` and ended by
a cancel of its caller (:func:`holding`, :func:`flock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import numbers
import os
import stat
import threading
import time
import weakref
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass
from pathlib import Path

from .._platform import posix_fcntl
from ..errors import InvalidArgumentError, LockTimeoutError
from ._files import FILE_MODE, OddFileError
from ._io import StopWaiting, wait_or_stop

__all__ = ["Deadline", "LoopLocks", "check_seconds", "flock", "holding", "open_lock_file"]


def check_seconds(
    name: str, value: object, *, optional: bool, positive: bool = False
) -> float | None:
    """``value`` as seconds (``None`` if ``optional``), else a clear INVALID_ARGUMENT.

    A real number, not a bool; ``>= 0`` (``> 0`` when ``positive``); ``inf`` is allowed.
    """
    bound = "> 0" if positive else ">= 0"
    what = f"{name} must be a number of seconds {bound}" + (" or None" if optional else "")
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{what}, not {value!r:.60}")
    try:
        seconds = float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{what}, not {value!r:.40} (too large)") from None
    if not (seconds > 0 if positive else seconds >= 0):  # NaN fails both
        raise InvalidArgumentError(f"{what}, not {value!r}")
    return seconds


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


def open_lock_file(path: Path, *, create: bool, shared: bool = False) -> int | None:
    """Open the sidecar lock file ``path`` (``0600``, never a symlink); ``None`` if absent.

    Opened without blocking (a FIFO there never waits for a writer) and kept only if it
    is a regular file. ``shared``: for a shared ``flock`` only, opened read-only (a
    reader then works on a read-only file system); never with ``create``.

    Raises:
        OddFileError: a symlink, directory, FIFO or device is where the lock file belongs.
        FileNotFoundError: ``create`` and the directory does not exist.
    """
    flags = (os.O_RDONLY if shared and not create else os.O_RDWR) | os.O_CLOEXEC
    flags |= os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_CREAT if create else 0)
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


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a wait for a lock gives up: ``limit`` seconds after it began (``LOCK_TIMEOUT``).

    One per operation, made on the loop when it starts, so the wait of this process's
    tasks (:func:`holding`) and the wait for other processes (:func:`flock`, in a worker)
    share one bound.
    """

    limit: float
    at: float  # on the time.monotonic() clock, which every thread shares

    @classmethod
    def after(cls, limit: float | None) -> Deadline | None:
        """The deadline ``limit`` seconds from now, or ``None``: no deadline.

        ``None``, ``inf`` and anything a thread cannot wait for (``TIMEOUT_MAX``) alike.
        """
        if limit is None or limit >= threading.TIMEOUT_MAX:
            return None
        return cls(limit, time.monotonic() + limit)

    def left(self) -> float:
        """Seconds until the deadline (0 once past)."""
        return max(0.0, self.at - time.monotonic())

    def error(self, name: object) -> LockTimeoutError:
        """``LOCK_TIMEOUT`` for the lock ``name``."""
        return LockTimeoutError(f"lock {str(name)!r} not acquired within {self.limit}s")


@contextlib.asynccontextmanager
async def holding(
    lock: asyncio.Lock, deadline: Deadline | None, name: object
) -> AsyncIterator[None]:
    """Hold this loop's ``lock`` for the block, waiting for it no longer than ``deadline``."""
    if deadline is None:
        async with lock:
            yield
        return
    try:
        async with asyncio.timeout(deadline.left()):
            await lock.acquire()
    except TimeoutError:
        raise deadline.error(name) from None
    try:
        yield
    finally:
        lock.release()


class _Waiter:
    """A blocking ``flock`` in a helper thread, on a duplicate of its owner's descriptor.

    A duplicate shares the open file description, so the lock it gets is the owner's. An
    owner that stops waiting (cancelled, or past its deadline) just closes its own
    descriptor: the helper, still blocked, gets the lock some day and lets it go at once
    by closing the duplicate, the description's last descriptor. The duplicate also means
    the helper never touches a descriptor number the process reused.

    Every waiter with a helper of its own is a waiter of the kernel's, woken the moment
    the holder lets go (fair to other processes). A helper whose owner gave up becomes
    the key's orphan (``_ORPHANS``, one per lock file and mode): later waiters of this
    process wait for it to end (the lock was let go) and try again instead of starting
    helpers of their own, so callers that give up again and again while a holder hangs
    leave one thread behind, not one each. Each waiter waits on an event of its own,
    which the helper sets when it ends, and which only that waiter's cancel sets too.
    """

    __slots__ = ("_fd", "_operation", "ended", "error", "events", "key")

    def __init__(self, key: tuple[int, int, int], fd: int, operation: int) -> None:
        self.key = key
        self.events: list[threading.Event] = []  # set when it ends
        self.ended = False
        self.error: OSError | None = None
        self._operation = operation
        self._fd = os.dup(fd)  # under _WAITERS_LOCK: a fork sees every duplicate
        _LIVE.add(self)

    def start(self) -> None:
        """Start the helper thread (else end the helper, and raise an ``OSError``)."""
        try:
            threading.Thread(target=self._run, name="fa-flock-wait", daemon=True).start()
        except RuntimeError as exc:  # "can't start new thread"
            self._end()
            raise OSError(errno.EAGAIN, f"no thread to wait for the lock: {exc}") from exc

    def give_up(self) -> None:
        """Its owner stopped waiting: later waiters wait for it (see the class)."""
        with _WAITERS_LOCK:
            if not self.ended:
                _ORPHANS.setdefault(self.key, self)

    def _run(self) -> None:
        try:
            posix_fcntl().flock(self._fd, self._operation)
        except OSError as exc:
            self.error = exc
        finally:
            self._end()

    def _end(self) -> None:
        with _WAITERS_LOCK:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            _LIVE.discard(self)
            if _ORPHANS.get(self.key) is self:
                del _ORPHANS[self.key]
            self.ended = True
            events, self.events = self.events, []
        for event in events:
            event.set()


#: Helpers whose owner gave up, by (device, inode, operation) of their lock file; and
#: every helper whose duplicate is open (closed in a forked child).
_ORPHANS: dict[tuple[int, int, int], _Waiter] = {}
_LIVE: set[_Waiter] = set()
_WAITERS_LOCK = threading.Lock()


def _before_fork() -> None:
    _WAITERS_LOCK.acquire()


def _after_fork_in_parent() -> None:
    _WAITERS_LOCK.release()


def _after_fork_in_child() -> None:
    # The helpers did not come along, their duplicates did: a child keeping one would
    # keep its open file description, and the lock it gets, for the child's whole life.
    # (Nothing else is touched: an event another thread was using at the fork may be
    # locked for ever in the child, and no thread of the child waits on these.)
    for waiter in _LIVE:
        with contextlib.suppress(OSError):
            os.close(waiter._fd)
        waiter._fd = -1
    _LIVE.clear()
    _ORPHANS.clear()
    _WAITERS_LOCK.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


def _join_waiter(
    key: tuple[int, int, int], fd: int, operation: int, wake: threading.Event
) -> _Waiter | None:
    """Have ``wake`` set when the lock ``key`` is let go; the new waiter, if one is started.

    The lock's orphaned waiter sets it if there is one (then ``None``), else a new waiter
    for ``fd``, started here and returned.
    """
    with _WAITERS_LOCK:
        orphan = _ORPHANS.get(key)
        if orphan is not None:
            orphan.events.append(wake)
            return None
        helper = _Waiter(key, fd, operation)
        helper.events.append(wake)
    helper.start()
    return helper


def _let_go_by_orphan(key: tuple[int, int, int]) -> bool:
    """Whether the orphan of lock ``key`` held it, and has let it go by now (waited for).

    An orphan (its owner gave up, :class:`_Waiter`) takes the lock when its holder lets
    go, and lets it go at once; a try at that moment finds the lock busy although nobody
    holds it for long, so a bound of zero, or one just spent, would be LOCK_TIMEOUT with
    no holder at all. Whether the orphan is the holder, a try on its own open file
    description tells (it succeeds there only), made under the lock it closes it under.
    """
    fcntl = posix_fcntl()
    with _WAITERS_LOCK:
        orphan = _ORPHANS.get(key)
        if orphan is None:
            return False
        try:
            fcntl.flock(orphan._fd, orphan._operation | fcntl.LOCK_NB)
        except OSError:  # busy: another holder has it
            return False
        ended = threading.Event()
        orphan.events.append(ended)
    wait_or_stop(ended, None)  # it lets go as soon as its thread runs
    return True


def _await_waiter(
    wake: threading.Event, helper: _Waiter | None, deadline: Deadline | None, name: object
) -> None:
    """Wait for ``wake`` within ``deadline``; a cancel or a timeout lets ``helper`` go."""
    try:
        if not wait_or_stop(wake, None if deadline is None else deadline.left()):
            assert deadline is not None  # only a bounded wait ends without its event
            raise deadline.error(name)
    except (StopWaiting, LockTimeoutError):
        if helper is not None:
            helper.give_up()
        raise


def flock(fd: int, *, exclusive: bool, deadline: Deadline | None = None, name: object = "") -> None:
    """Wait until this process holds ``flock`` on ``fd`` (released by closing ``fd``).

    Blocking (a worker's work). A free lock is taken at once. For a busy one, a helper
    thread blocks in ``flock`` (woken by the kernel the moment the holder lets go, as a
    waiter should be; see :class:`_Waiter`) while the worker waits for it in a way that a
    cancel of its caller ends at once (``StopWaiting``, see :func:`~._io.wait_or_stop`)
    and that ``deadline`` bounds (``LockTimeoutError``, ``LOCK_TIMEOUT``, naming
    ``name``): a ``flock`` blocking in the worker itself could be neither cancelled nor
    bounded. The caller closes ``fd`` when it stops waiting.
    """
    fcntl = posix_fcntl()  # POSIX only: FILE_LOCK_UNSUPPORTED elsewhere
    operation = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    key: tuple[int, int, int] | None = None
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if key is None:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino, operation)
        if deadline is not None and deadline.left() <= 0:
            if _let_go_by_orphan(key):
                continue  # a given-up waiter's, let go now: try again
            try:  # or the orphan let it go since the try above
                fcntl.flock(fd, operation | fcntl.LOCK_NB)
            except BlockingIOError:
                raise deadline.error(name) from None
            return
        wake = threading.Event()  # ours alone: a cancel of ours sets it, nobody else's
        helper = _join_waiter(key, fd, operation, wake)
        _await_waiter(wake, helper, deadline, name)
        if helper is not None:  # it ended: with the lock, on our open file description
            if helper.error is not None:
                raise helper.error
            return
        # The orphan ended: the lock was let go at least once; try again.
