"""The directory-descriptor primitives ``LocalFileStorage`` is built on (``sessions.local``).

Every call here works relative to an open directory (``dir_fd``) and never follows a
symlink (``O_NOFOLLOW``, ``follow_symlinks=False``): a symlink where a value, a lock or a
directory belongs is ``STORAGE_KEY_INVALID``. Here are the sidecar lock files of values,
the directories kept open between appends, the checks made before a value is published,
the temp files it is published through (and the sweep of those crashed writers left),
and the reads and removals of a walk; the storage's layout, atomic writes and safety
rules are told in ``sessions.local``.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import stat
import threading
import time
import uuid
from collections import OrderedDict

from .._persist import TEMP_SUFFIX, Deadline, FileIdent, flock, ident_or_none
from ..errors import StorageKeyInvalidError
from ._keys import is_valid_segment
from ._log import log_name

__all__ = [
    "CLOEXEC",
    "DIR_FLAGS",
    "DIR_MODE",
    "DirHandles",
    "FILE_MODE",
    "NOFOLLOW",
    "OPEN_KEYS",
    "ValueExists",
    "check_target",
    "close_all",
    "holds_keys",
    "holds_value_file",
    "key_lock",
    "lexists",
    "lock_name",
    "odd_file_error",
    "prune_empty_dirs",
    "read_whole",
    "link_temp",
    "sweep_temps",
    "symlink_error",
    "write_temp",
    "written_since",
]

#: Files are created ``0o600`` and directories ``0o700`` (sessions hold conversations).
FILE_MODE = 0o600
DIR_MODE = 0o700
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: How a directory of the walk is opened: never through a symlink.
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | NOFOLLOW | CLOEXEC
#: Keys whose directory one ``DirHandles`` keeps open between appends (the least
#: recently appended go first).
OPEN_KEYS = 32


class ValueExists(Exception):
    """Internal: a value already exists where a new one was to be linked in."""


def lexists(dfd: int, name: str) -> bool:
    """Whether anything, a symlink too, is at ``name`` in the directory ``dfd``."""
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def odd_file_error(key: str) -> StorageKeyInvalidError:
    """``STORAGE_KEY_INVALID`` for a FIFO, device or socket where ``key``'s value belongs."""
    return StorageKeyInvalidError(
        f"storage key {key!r}: a FIFO, device or socket is where its value belongs; "
        "it was left untouched"
    )


def lock_name(name: str) -> str:
    """The sidecar lock file of the value file ``name`` (a dot name is never a key)."""
    return f".{name}.lock"


def key_lock(
    key: str, dfd: int, name: str, *, exclusive: bool, create: bool, deadline: Deadline | None
) -> int | None:
    """``flock`` of ``name``'s sidecar lock, held; ``None`` when there is none to take.

    A wait past ``deadline`` is ``LOCK_TIMEOUT``; a cancel of the caller ends it. With
    ``create``, ``FileNotFoundError`` when the directory ``dfd`` was removed meanwhile (a
    delete of the last key in it): the caller walks to the key again, or finds it gone.

    A holder that removes the value (``delete``, ``prune``) unlinks the lock file while
    it holds it, so a lock taken on a file that is no longer the one at its name is
    dropped and taken again on the current one: two writers never hold different inodes.
    """
    # A shared lock needs no write access: a reader works on a read-only file system.
    access = os.O_RDWR if exclusive or create else os.O_RDONLY
    flags = access | NOFOLLOW | CLOEXEC | (os.O_CREAT if create else 0)
    while True:
        try:
            lock = os.open(lock_name(name), flags, FILE_MODE, dir_fd=dfd)
        except FileNotFoundError:
            if create:
                raise
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise symlink_error(key, lock_name(name)) from None
            raise
        try:
            flock(lock, exclusive=exclusive, deadline=deadline, name=key)
            held = os.fstat(lock)
            try:
                now = os.stat(lock_name(name), dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(lock)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return lock
        os.close(lock)  # unlinked by a remover while we waited: take the current one


class DirHandles:
    """The open directories of keys appended lately (one instance's), by key.

    A directory is taken out while in use and put back after; one opened in another
    process (before a ``fork``) is dropped, never used; one is used again only while
    the path still names it (one ``stat``, against the walk's ``openat`` of every
    component). Lock files are not kept: an open lock file is open for writing, which
    would keep a file system from being remounted read-only, and each call's own open
    file description is what makes ``flock`` exclude two threads of one instance.
    """

    def __init__(self) -> None:
        self._open: OrderedDict[str, tuple[str, int, tuple[int, int]]] = OrderedDict()
        self._mutex = threading.Lock()
        self._pid = os.getpid()

    def take(self, key: str, path: str) -> int | None:
        """The directory fd of ``key`` if the path ``path`` still names it, else ``None``."""
        with self._mutex:
            if self._pid != os.getpid():
                self._drop_all()
                self._pid = os.getpid()
            entry = self._open.pop(key, None)
        if entry is None:
            return None
        held_path, dfd, ident = entry
        try:
            st = os.stat(held_path)
            valid = held_path == path and (st.st_dev, st.st_ino) == ident
        except OSError:
            valid = False
        if not valid:
            os.close(dfd)
            return None
        return dfd

    def give(self, key: str, path: str, dfd: int) -> None:
        """Keep ``dfd``, the directory at ``path``, for the next append of ``key``."""
        try:
            st = os.fstat(dfd)
        except BaseException:
            os.close(dfd)
            raise
        evicted: builtins.list[tuple[str, int, tuple[int, int]]] = []
        with self._mutex:
            old = self._open.pop(key, None)
            if old is not None:
                evicted.append(old)
            self._open[key] = (path, dfd, (st.st_dev, st.st_ino))
            while len(self._open) > OPEN_KEYS:
                evicted.append(self._open.popitem(last=False)[1])
        for _, old_dfd, _ in evicted:
            os.close(old_dfd)

    def drop(self, key: str) -> None:
        """Close the directory kept for ``key`` (removed)."""
        with self._mutex:
            entry = self._open.pop(key, None)
        if entry is not None:
            os.close(entry[1])

    def close(self) -> None:
        """Close every directory kept."""
        with self._mutex:
            self._drop_all()

    def _drop_all(self) -> None:
        for _, dfd, _ in self._open.values():
            with contextlib.suppress(OSError):
                os.close(dfd)
        self._open.clear()


def symlink_error(key: str, part: str) -> StorageKeyInvalidError:
    """``STORAGE_KEY_INVALID`` for the symlink ``part`` met on the way to ``key``."""
    return StorageKeyInvalidError(f"storage key {key!r}: {part!r} is a symlink; not followed")


def check_target(key: str, dfd: int, name: str, *, new_only: bool) -> None:
    """Refuse to publish over what ``name`` is, unless a value file or nothing.

    ``new_only``: a value file there is ``ValueExists``. A symlink, a directory (of other
    keys) or an odd file is ``STORAGE_KEY_INVALID``.
    """
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if new_only and stat.S_ISREG(st.st_mode):
        raise ValueExists
    if stat.S_ISLNK(st.st_mode):
        raise symlink_error(key, name)
    if stat.S_ISDIR(st.st_mode):
        raise StorageKeyInvalidError(f"cannot store {key!r}: other keys are stored under it")
    if not stat.S_ISREG(st.st_mode):
        raise odd_file_error(key)


def read_whole(fd: int, size: int) -> bytes:
    """The rest of the file ``fd`` (``size`` bytes expected): one buffer, no join then."""
    parts = [os.read(fd, size + 1)]  # one more: a file that grew meanwhile is still read
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def holds_keys(fd: int) -> bool:
    """Whether the directory ``fd`` holds anything a key could be (a valid segment)."""
    with os.scandir(fd) as entries:
        return any(is_valid_segment(e.name) for e in entries)


def holds_value_file(key: str, dfd: int, name: str) -> bool:
    """Whether ``name`` in the directory ``dfd`` is a regular file (a symlink is an error)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise symlink_error(key, name)
    return stat.S_ISREG(st.st_mode)


def written_since(dfd: int, name: str, value: FileIdent | None, cutoff: float | None) -> bool:
    """Whether value ``name`` (ident ``value``) or its log was written since ``cutoff``.

    ``cutoff`` is in epoch seconds (a write at that very moment counts); ``False`` with
    no value or no cutoff.
    """
    if value is None or cutoff is None:
        return False
    log = ident_or_none(log_name(name), dir_fd=dfd)
    newest = max(value[3], log[3] if log else 0)
    return newest >= cutoff * 1e9


def prune_empty_dirs(dirs: list[str], fds: list[int]) -> None:
    """Remove the directories left empty, deepest first; stop at the first non-empty one."""
    for depth in range(len(dirs), 0, -1):
        try:
            os.rmdir(dirs[depth - 1], dir_fd=fds[depth - 1])
        except OSError:
            break
        os.fsync(fds[depth - 1])


def close_all(fds: list[int]) -> None:
    """Close the directory descriptors of a walk."""
    for fd in fds:
        os.close(fd)


def write_temp(dfd: int, name: str, head: bytes, data: bytes) -> str:
    """A new temp file beside ``name`` holding ``head`` then ``data``, fsynced: its name.

    Removed again when writing it fails.
    """
    tmp = f".{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC
    fd = os.open(tmp, flags, FILE_MODE, dir_fd=dfd)
    try:
        try:
            for part in (head, data):
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    return tmp


def link_temp(tmp: str, dfd: int, name: str, *, new_only: bool) -> None:
    """Put the temp file ``tmp`` in place as ``name`` (renamed over it); removed on failure.

    ``new_only``: linked in only where no value exists (``ValueExists`` otherwise), then the
    temp name removed.
    """
    try:
        if not new_only:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except FileExistsError:
            raise ValueExists from None
        finally:
            os.unlink(tmp, dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise


def sweep_temps(dfd: int, grace_seconds: float) -> None:
    """Remove the temp files of crashed writers (older than ``grace_seconds``) from ``dfd``."""
    now = time.time()
    with os.scandir(dfd) as entries:
        stale = [
            e.name
            for e in entries
            if e.name.startswith(".")
            and e.name.endswith(TEMP_SUFFIX)
            and e.is_file(follow_symlinks=False)
            and now - e.stat(follow_symlinks=False).st_mtime >= grace_seconds
        ]
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
