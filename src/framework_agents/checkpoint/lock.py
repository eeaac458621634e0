"""Cross-process file locks that survive a holder's crash: :func:`with_file_lock`.

The lock is the file at ``path``. Whoever creates it with ``O_CREAT | O_EXCL`` owns it, and
holds ``flock(LOCK_EX)`` on it for as long as it owns it; the file carries a JSON record
(pid, host, a random token, the time) for people reading it (:func:`lock_holder`).

Proof of death. A waiter that finds the file opens it and tries ``flock(LOCK_EX | LOCK_NB)``.
A live owner still holds the kernel lock, so the try fails and the waiter polls again. If the
try succeeds, the kernel has released the owner's lock, which it does only when the owner
closed the file or died. The waiter then re-checks, still holding the kernel lock, that the
path names the very inode it locked (``fstat`` against ``stat``) and takes the lock over *in
place*: it writes its own record into that file and is the owner. No unlink happens on this
path, so racing waiters cannot delete each other's fresh locks: only one of them can hold the
kernel lock of that inode, and a waiter that locked an inode the path no longer names starts
again. Release unlinks the path only if it still names the owner's inode, and does so
*before* closing the file (and so before the kernel lock drops).

A creator takes the kernel lock right after ``O_EXCL``; a creator killed in between leaves
an empty file that nobody holds, which the next waiter takes over at once like any other
dead lock. A live creator that lost that instant to a waiter notices it (its ``flock``
fails, or the file is no longer empty or no longer at the path) and does not own the lock.

When ``stale_after`` applies: only when the filesystem refuses ``flock`` (``ENOLCK``,
``EOPNOTSUPP``, ``ENOSYS``, ``EINVAL``: some NFS and FUSE mounts), because then nothing can
prove death. An owner then refreshes the file's mtime every ``stale_after / 4`` seconds
while it holds the lock (a heartbeat task), and a lock whose mtime is older than
``stale_after`` counts as abandoned. That reclaim is serialised by a second ``O_EXCL``
guard file (``<name>.reclaim``, itself abandoned after ``stale_after``) and re-checks under
the guard that the path still names the same stale inode with the same record before it
unlinks it. This mode trusts clocks (the file server's mtime against this host's time),
and an owner whose event loop stalls past ``stale_after`` can lose the lock: a fallback.

A live owner that holds the kernel lock is never robbed, however old the file: age is
never taken over proof. A hung owner therefore makes waiters fail with ``LOCK_TIMEOUT``.

Inside one process the tasks of one event loop queue on an ``asyncio.Lock`` per path (made
absolute) first (FIFO, no polling); only the head of that queue polls the file, with a
small jittered backoff (1 ms doubling to 50 ms). Across processes there is no FIFO order.
The lock's directory is reached as the path spells it (the kernel follows its symlinks at
each call; the lock file itself is never followed). Two spellings of one directory queue
apart in a process and exclude each other through the file like two processes. A
directory symlink swapped while the lock is held makes the release find another inode at
the path: it leaves the file, which the next waiter takes over (its kernel lock is gone).

Limits: the kernel lock belongs to the open file description, so a child made with
``fork()`` while the lock is held shares it (the descriptor is ``O_CLOEXEC``, so ``exec``
does not). Only POSIX systems with ``fcntl`` are supported; all processes that share a
lock must see the same flock behaviour of its filesystem.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import random
import socket
import stat
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from .._persist import LoopLocks as LocalLocks
from .._persist import check_seconds, io_error, run_blocking
from .._platform import posix_fcntl
from ..errors import AgentError, InvalidArgumentError, LockTimeoutError

__all__ = [
    "FileLockHold",
    "LockDirectoryMissingError",
    "call_with_file_lock",
    "hold_file_lock",
    "lock_holder",
    "with_file_lock",
]

#: errno values meaning "this filesystem does not do flock" (degraded mode).
_NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL})
# O_NONBLOCK: a FIFO in the lock file's place never waits for a peer (no effect on a file).
_OPEN_FLAGS = os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_MIN_DELAY = 0.001
_MAX_DELAY = 0.05

_T = TypeVar("_T")

logger = logging.getLogger(__name__)


class LockDirectoryMissingError(InvalidArgumentError, FileNotFoundError):
    """The directory of a lock path does not exist (INVALID_ARGUMENT, still an OSError)."""


def _flock(fd: int, operation: int) -> None:
    # One seam for the kernel lock, so tests can simulate a filesystem without flock.
    posix_fcntl().flock(fd, operation)


@dataclass(frozen=True, slots=True)
class _Held:
    """A lock this process owns: its open descriptor and the inode it names."""

    path: Path
    fd: int
    dev: int
    ino: int
    token: str
    kernel_locked: bool


class _Busy:
    """Sentinel: the lock is held by someone else (or being created); poll again."""


class _Again:
    """Sentinel: the path changed under us; try again at once."""


_BUSY = _Busy()
_AGAIN = _Again()


def _record(token: str) -> bytes:
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "token": token,
        "acquired_at": time.time(),
    }
    return json.dumps(info).encode() + b"\n"


def _write_record(fd: int, token: str, *, fresh: bool = False) -> None:
    # Diagnostics and "creator finished" marker only; not fsynced on purpose (after a
    # machine crash the kernel lock is gone anyway and rule 1 covers a lost record).
    # Written first, then cut to its length (a takeover overwrites a longer record):
    # never truncated to zero, because ext4 (auto_da_alloc) flushes a file truncated to
    # zero when it is closed, which costs the release as much as the fdatasync of the
    # save the lock protects. A ``fresh`` file (created and found empty under our kernel
    # lock, which a takeover needs) has nothing to cut.
    data = _record(token)
    os.pwrite(fd, data, 0)
    if not fresh:
        os.ftruncate(fd, len(data))


def _parse_record(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("token"), str):
        return value
    return None


def _read_record(fd: int) -> dict[str, Any] | None:
    return _parse_record(os.pread(fd, 4096, 0))


def _names(path: Path, st: os.stat_result) -> bool:
    """Whether ``path`` (not followed) currently names the inode of ``st``."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def _try_kernel_lock(fd: int) -> bool | None:
    """``True``: locked; ``None``: someone else holds it; ``False``: no flock here."""
    try:
        fcntl = posix_fcntl()
        _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno in _NO_FLOCK:
            return False
        raise
    return True


def _create(path: Path, token: str) -> _Held | _Busy | _Again | None:
    """Try to create the lock file; ``None`` when it already exists."""
    try:
        fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return None
    except (FileNotFoundError, NotADirectoryError):
        raise LockDirectoryMissingError(
            f"lock path {str(path)!r}: its directory does not exist (create it first)"
        ) from None
    try:
        st = os.fstat(fd)
        locked = _try_kernel_lock(fd)
        if locked is None:
            # A waiter found our fresh file unlocked and took it over: it is theirs now.
            os.close(fd)
            return _BUSY
        if locked and (os.fstat(fd).st_size != 0 or not _names(path, st)):
            # A waiter took it over and already released it again: start afresh.
            os.close(fd)
            return _AGAIN
        _write_record(fd, token, fresh=locked)
        return _Held(path, fd, st.st_dev, st.st_ino, token, kernel_locked=locked)
    except BaseException:
        os.close(fd)
        raise


def _inspect(path: Path, token: str, stale_after: float) -> _Held | _Busy | _Again:
    """The lock file exists: reclaim it if its owner is provably gone, else report busy."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return _AGAIN
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidArgumentError(
                f"lock path {str(path)!r} is a symlink; a lock file is never followed"
            ) from exc
        if exc.errno == errno.EISDIR:
            raise InvalidArgumentError(
                f"lock path {str(path)!r} is a directory, not a lock file"
            ) from None
        raise
    keep = False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidArgumentError(
                f"lock path {str(path)!r} is not a regular file (a FIFO, device or socket); "
                "it was left untouched"
            )
        locked = _try_kernel_lock(fd)
        if locked is None:
            return _BUSY
        if not locked:
            return _inspect_without_flock(path, fd, st, stale_after)
        if not _names(path, st):
            return _AGAIN
        # Nobody holds the kernel lock of the inode the path names: its owner is gone (or
        # its creator has not locked it yet and will notice the takeover). Take it over.
        _write_record(fd, token)
        keep = True
        return _Held(path, fd, st.st_dev, st.st_ino, token, kernel_locked=True)
    finally:
        if not keep:
            os.close(fd)


def _inspect_without_flock(
    path: Path, fd: int, st: os.stat_result, stale_after: float
) -> _Busy | _Again:
    """Degraded mode (no flock): reclaim by age under an O_EXCL guard (rule 2)."""
    if time.time() - st.st_mtime <= stale_after:
        return _BUSY
    seen = _read_record(fd)
    guard = path.with_name(path.name + ".reclaim")
    try:
        gfd = os.open(guard, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - os.stat(guard).st_mtime > stale_after:
                os.unlink(guard)  # a reclaimer died holding the guard
        return _BUSY
    try:
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return _AGAIN
        same = (now.st_dev, now.st_ino, now.st_mtime_ns) == (st.st_dev, st.st_ino, st.st_mtime_ns)
        if same and _read_record(fd) == seen and time.time() - now.st_mtime > stale_after:
            os.unlink(path)
        return _AGAIN
    finally:
        os.close(gfd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(guard)


def _acquire_once(path: Path, token: str, stale_after: float) -> _Held | _Busy:
    """One non-blocking attempt (blocking I/O; runs in a worker thread).

    Raises ``INVALID_ARGUMENT`` for something other than a regular file at ``path``.
    """
    for _ in range(8):
        created = _create(path, token)
        outcome = _inspect(path, token, stale_after) if created is None else created
        if not isinstance(outcome, _Again):
            return outcome
    return _BUSY


def _release(held: _Held) -> None:
    """Unlink the lock file if it is still ours, then close (dropping the kernel lock)."""
    try:
        now = os.stat(held.path, follow_symlinks=False)
        ours = (now.st_dev, now.st_ino) == (held.dev, held.ino)
        if ours and not held.kernel_locked:
            record = _read_record(held.fd)
            ours = record is not None and record.get("token") == held.token
        if ours:
            os.unlink(held.path)
    except FileNotFoundError:
        pass
    finally:
        os.close(held.fd)


def lock_holder(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record in a lock file (pid, host, token, acquired_at), or ``None`` (blocking)."""
    try:
        with open(path, "rb") as fh:
            return _parse_record(fh.read(4096))
    except (FileNotFoundError, NotADirectoryError):
        return None


_LOCAL = LocalLocks()


def _absolute(path: object) -> Path:
    """``path`` checked and made absolute (no I/O: safe on the event loop)."""
    raw = os.fspath(path) if isinstance(path, str | os.PathLike) else path
    if not isinstance(raw, str) or not raw:
        raise InvalidArgumentError(
            f"lock path must be a non-empty str or os.PathLike of str, not {path!r:.60}"
        )
    return Path(os.path.abspath(raw))


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _timeout_error(path: Path, timeout: float | None) -> LockTimeoutError:
    holder = lock_holder(path)
    who = ""
    if holder is not None:
        who = f" (held by pid {holder.get('pid')} on {holder.get('host')})"
    return LockTimeoutError(f"lock {str(path)!r} not acquired within {timeout}s{who}")


@dataclass(frozen=True, slots=True)
class _Taken:
    """The lock, taken, and what ``then`` returned right after it was."""

    held: _Held
    value: object


def _acquire_then(
    path: Path, token: str, stale_after: float, then: Callable[[], object] | None
) -> _Taken | _Busy:
    """One attempt and, when it took the lock, ``then()`` (an error releases it again).

    An operating system failure taking the lock (a full or read-only disk) is
    ``STORAGE_IO`` naming the lock file. (``call_with_file_lock``'s fast path leaves it an
    ``OSError``: its caller names the file the call writes.)
    """
    try:
        outcome = _acquire_once(path, token, stale_after)
    except AgentError:
        raise
    except OSError as exc:
        raise io_error(exc, action="take the lock", key=path.name, root=path.parent) from exc
    if not isinstance(outcome, _Held):
        return outcome
    try:
        value = None if then is None else then()
    except BaseException:
        _release(outcome)
        raise
    return _Taken(outcome, value)


def _release_taken(outcome: _Taken | _Busy) -> None:
    if isinstance(outcome, _Taken):
        _release(outcome.held)


async def _acquire_file(
    path: Path,
    deadline: float | None,
    limit: float | None,
    stale_after: float,
    then: Callable[[], object] | None = None,
) -> _Taken:
    token = uuid.uuid4().hex
    delay = _MIN_DELAY
    while True:
        # A cancel waits for the attempt and gives back a lock it took (never leaked).
        outcome = await run_blocking(
            _acquire_then, path, token, stale_after, then, undo=_release_taken
        )
        if isinstance(outcome, _Taken):
            return outcome
        left = _remaining(deadline)
        if left is not None and left <= 0:
            raise _timeout_error(path, limit)
        pause = delay * (0.5 + random.random())
        await asyncio.sleep(pause if left is None else min(pause, left))
        delay = min(delay * 2, _MAX_DELAY)


async def _heartbeat(held: _Held, every: float) -> None:
    # Degraded mode only: keep the mtime fresh so waiters do not judge us abandoned.
    while True:
        await asyncio.sleep(every)
        with contextlib.suppress(OSError):
            await run_blocking(os.utime, held.fd)


@contextlib.asynccontextmanager
async def with_file_lock(
    path: str | os.PathLike[str],
    timeout: float | None = 10.0,  # noqa: ASYNC109 - the contract's name (API.md)
    stale_after: float = 30.0,
) -> AsyncIterator[None]:
    """Hold the cross-process lock file ``path`` for the block (see the module docstring).

    ``timeout`` bounds the wait in seconds (``None`` waits forever, ``0`` tries once) and
    raises :class:`~framework_agents.errors.LockTimeoutError` (``LOCK_TIMEOUT``).
    ``stale_after`` is the age past which a lock that cannot be proven dead or alive counts
    as abandoned. The directory of ``path`` must exist (else
    :class:`LockDirectoryMissingError`: INVALID_ARGUMENT, and a ``FileNotFoundError``).
    A wrong type or value of any argument is INVALID_ARGUMENT.
    """
    async with hold_file_lock(path, timeout, stale_after):
        yield


class FileLockHold:
    """A lock held by :func:`hold_file_lock`: what ``then()`` returned, and an early release."""

    __slots__ = ("_held", "_turn", "released", "value")

    def __init__(self, held: _Held, value: object, turn: _LocalTurn | None = None) -> None:
        """Wrap the held lock ``held``; ``value`` is what ``then()`` returned."""
        self._held = held
        self._turn = turn
        self.value = value
        self.released = False

    def release_sync(self) -> None:
        """Let the lock file go now: blocking, for a worker call (the holder's last write).

        The block's end then releases nothing more, and :meth:`end_turn` (on the loop,
        once the worker call returned) hands this process's turn on at once. Without
        ``flock`` (a heartbeat task keeps the lock), nothing happens: the block's end
        releases it as usual. The kernel lock is dropped even when removing the file
        fails (logged): the next waiter takes the file over.
        """
        if self.released or not self._held.kernel_locked:
            return
        self.released = True
        try:
            _release(self._held)
        except OSError as exc:
            logger.warning("lock %s: could not remove the lock file: %s", self._held.path, exc)

    def end_turn(self) -> None:
        """After :meth:`release_sync`: the next task of this loop may take the lock now."""
        if self.released and self._turn is not None:
            self._turn.end()


@contextlib.asynccontextmanager
async def hold_file_lock(
    path: str | os.PathLike[str],
    timeout: float | None = 10.0,  # noqa: ASYNC109 - the same as with_file_lock's
    stale_after: float = 30.0,
    *,
    then: Callable[[], object] | None = None,
) -> AsyncIterator[FileLockHold]:
    """:func:`with_file_lock`, in fewer worker hand-offs for a long hold (a run).

    ``then()`` (blocking) runs in the worker call that takes the lock, right after it is
    taken, and the block gets its result as ``hold.value`` (an error in it releases the
    lock and is raised): a lock and a read in one hand-off instead of two. The holder's
    last write may let the lock go in its own hand-off (:meth:`FileLockHold.release_sync`,
    or ``call_with_file_lock(..., release=hold)``) instead of one more at the block's end.
    """
    target, limit, deadline, stale = _lock_arguments(path, timeout, stale_after)
    async with (
        _local_turn(target, deadline, limit) as turn,
        _file_held(target, deadline, limit, stale, then=then, turn=turn) as hold,
    ):
        yield hold


async def call_with_file_lock(
    path: str | os.PathLike[str],
    fn: Callable[..., _T],
    *args: Any,
    timeout: float | None = 10.0,  # noqa: ASYNC109 - the same as with_file_lock's
    stale_after: float = 30.0,
    release: FileLockHold | None = None,
) -> _T:
    """Run the blocking ``fn(*args)`` in a worker thread while holding the lock ``path``.

    The same lock as :func:`with_file_lock` (same file, same protocol, same errors), in
    one worker hand-off when the lock is free: taking it, ``fn`` and the release happen
    in a single call instead of three. When the lock is busy, or the filesystem has no
    ``flock`` (the holder then needs its heartbeat), it falls back to waiting as
    :func:`with_file_lock` does. A cancel waits for ``fn`` to finish (it is never torn).
    ``release``: another lock (held around this call) let go in the same hand-off once
    ``fn`` returned, and its turn in this process handed on; on the slow path it stays
    held.
    """
    target, limit, deadline, stale = _lock_arguments(path, timeout, stale_after)
    async with _local_turn(target, deadline, limit):
        done = await run_blocking(_call_if_free, target, stale, fn, args, release)
        if isinstance(done, _Done):
            if release is not None:
                release.end_turn()
            return cast("_T", done.value)
        async with _file_held(target, deadline, limit, stale):
            return await run_blocking(fn, *args)


@dataclass(frozen=True, slots=True)
class _Done:
    value: object


def _call_if_free(
    path: Path,
    stale_after: float,
    fn: Callable[..., object],
    args: tuple[Any, ...],
    release: FileLockHold | None = None,
) -> _Done | None:
    """Take the lock if free, run ``fn`` and release (blocking); ``None``: not taken.

    ``release`` is let go too once ``fn`` returned.
    """
    outcome = _acquire_once(path, uuid.uuid4().hex, stale_after)
    if not isinstance(outcome, _Held):
        return None
    if not outcome.kernel_locked:  # degraded mode: the holder needs its heartbeat task
        _release(outcome)
        return None
    try:
        done = _Done(fn(*args))
    finally:
        _release(outcome)
    if release is not None:
        release.release_sync()
    return done


def _lock_arguments(
    path: object, timeout: object, stale_after: object
) -> tuple[Path, float | None, float | None, float]:
    """The checked arguments: the absolute path, the timeout, its deadline, the stale age."""
    limit = check_seconds("timeout", timeout, optional=True)
    stale = check_seconds("stale_after", stale_after, optional=False, positive=True)
    assert stale is not None
    target = _absolute(path)
    deadline = None if limit is None else time.monotonic() + limit
    return target, limit, deadline, stale


class _LocalTurn:
    """A task's turn in this process's FIFO queue of one lock path (its asyncio lock)."""

    __slots__ = ("held", "lock")

    def __init__(self, lock: asyncio.Lock) -> None:
        self.lock = lock
        self.held = False

    def end(self) -> None:
        """Hand the turn on (once; the block's end does it when nothing did before)."""
        if self.held:
            self.held = False
            self.lock.release()


@contextlib.asynccontextmanager
async def _local_turn(
    target: Path, deadline: float | None, limit: float | None
) -> AsyncIterator[_LocalTurn]:
    """This process's turn at ``target``: tasks of one event loop queue FIFO first."""
    key = str(target)
    turn = _LocalTurn(_LOCAL.enter(key))
    try:
        try:
            async with asyncio.timeout(_remaining(deadline)):
                await turn.lock.acquire()
        except TimeoutError:
            raise _timeout_error(target, limit) from None
        turn.held = True
        try:
            yield turn
        finally:
            turn.end()
    finally:
        _LOCAL.leave(key)


@contextlib.asynccontextmanager
async def _file_held(
    target: Path,
    deadline: float | None,
    limit: float | None,
    stale_after: float,
    *,
    then: Callable[[], object] | None = None,
    turn: _LocalTurn | None = None,
) -> AsyncIterator[FileLockHold]:
    """The lock file held for the block (polling until ``deadline``), then released.

    The block gets the hold, with what ``then()`` returned in the hand-off that took the
    lock; a hold released early (``release_sync``) is not released again, and may end
    ``turn`` (this process's turn) early.
    """
    taken = await _acquire_file(target, deadline, limit, stale_after, then)
    held = taken.held
    hold = FileLockHold(held, taken.value, turn)
    beat = None
    if not held.kernel_locked:
        beat = asyncio.create_task(_heartbeat(held, stale_after / 4))
    try:
        yield hold
    finally:
        recancel = False
        if beat is not None:
            # Wait for the heartbeat to stop (its utime must not hit a closed fd),
            # without swallowing a cancel of ours that arrives meanwhile.
            beat.cancel()
            while not beat.done():
                try:
                    await asyncio.wait([beat])
                except asyncio.CancelledError:
                    recancel = True
        if not hold.released:
            await run_blocking(_release, held)
        if recancel:
            raise asyncio.CancelledError()
