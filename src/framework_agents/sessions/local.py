"""``LocalFileStorage``: keys as files under one directory, traversal- and symlink-safe.

Layout: the value of key ``a/b/c.json`` is the file ``<dir>/a/b/c.json``: a header line
(layout v3: the tokens binding the value's log and a CRC32 of the whole file, see
``sessions._log``), then the value's bytes; a file of layout v2 or before (the bytes
alone) is still read. A file that fails its checksum is ``SNAPSHOT_CORRUPT``, left as it
is; a directory or a FIFO where a value belongs is ``STORAGE_KEY_INVALID``. Writes are atomic
and durable: a uniquely named temp file ``.<name>.<hex>.tmp`` in the target's directory is
written and fsynced, renamed over the target and the directory is fsynced, so a reader (or
a process that restarts after a crash) sees the old value or the new one, never a torn one.
Temp files cannot collide with keys (segments never start with a dot); those left by a
killed writer are swept on a later write to the same directory once older than a minute.

Safety, in depth:

1. every key is checked against the allowlist of ``sessions._keys`` first;
2. the joined path is normalised and checked to lie under the resolved root with
   ``os.path.commonpath`` (never a string prefix);
3. the path is then walked one component at a time with ``dir_fd``-relative calls:
   each directory opened with ``O_DIRECTORY | O_NOFOLLOW``, the file with ``O_NOFOLLOW``,
   so a symlink anywhere below the root (planted before or during the call) is never
   followed: it makes the call fail with ``STORAGE_KEY_INVALID`` and ``list()`` skips it.

Files are created ``0o600`` and directories ``0o700`` (sessions hold conversations). The
root itself is resolved once, at construction. POSIX only (``dir_fd`` and ``O_NOFOLLOW``).
Blocking work runs in a worker thread that a cancel waits for (``run_blocking``).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import os
import stat
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from .._persist import (
    JOURNAL_FORMAT_VERSION,
    Deadline,
    FileIdent,
    check_seconds,
    header_token_at,
    ident_or_none,
    io_error,
    mark_landed,
    run_blocking,
)
from .._retention import AutoPrune, check_older_than, check_ttl
from ..errors import InvalidArgumentError, LockTimeoutError, StorageKeyInvalidError
from ._base import ArgumentTypeError, CompareAndPut, check_expected_tag, check_tag, digest
from ._dirfd import (
    CLOEXEC,
    DIR_FLAGS,
    DIR_MODE,
    NOFOLLOW,
    DirHandles,
    ValueExists,
    check_target,
    close_all,
    holds_keys,
    holds_value_file,
    key_lock,
    lexists,
    link_temp,
    lock_name,
    odd_file_error,
    prune_empty_dirs,
    read_whole,
    sweep_temps,
    symlink_error,
    write_temp,
    written_since,
)
from ._keys import is_valid_key, is_valid_segment, validate_key, validate_prefix
from ._log import (
    VALUE_HEADER_BYTES,
    LogState,
    Value,
    append_log_at,
    digest_tag,
    drop_log_at,
    log_name,
    open_value_parts,
    read_log_at,
    tag_of,
    value_header,
)
from .memory_storage import as_bytes

__all__ = ["LocalFileStorage"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
#: Temp files younger than this may belong to a writer that is still running.
_TEMP_GRACE_SECONDS = 60.0
#: How often one instance scans a directory it writes into for stale temp files.
_SWEEP_INTERVAL_SECONDS = 60.0
#: A concurrent ``delete`` may prune a directory a ``put`` has just created; retry then.
_PUT_ATTEMPTS = 8
#: Keys whose checked path segments one instance remembers.
_CHECKED_KEYS = 1024


class _NotADir(Exception):
    """A path component exists but is a regular file (or other non-directory)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _Blind:
    """Sentinel: a plain ``put`` (no compare-and-swap)."""


_BLIND = _Blind()


class LocalFileStorage(CompareAndPut, AutoPrune):
    """Stores each key as a file under ``dir``; nothing outside ``dir`` is read or written.

    Every write of an existing key (``put``, ``swap``, ``append_logged``, ``delete``,
    ``prune``) holds ``flock`` of its sidecar ``.<name>.lock`` (never a key), so writers
    in several processes are serialised per key; a ``put`` of a new key links its file in
    only if none exists, which needs no lock.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        lock_timeout: float | None = None,
    ) -> None:
        """Create it; ``ttl``: seconds a value is kept after its last write (``prune``).

        ``lock_timeout``: how long a call waits for a key's lock held by another
        process or thread (seconds; ``None``, the default: as long as it takes; a cancel
        of the caller ends the wait at once); past it, ``LOCK_TIMEOUT``, nothing written.
        """
        if not (
            NOFOLLOW
            and hasattr(os, "O_DIRECTORY")
            and {os.open, os.mkdir, os.unlink, os.rmdir, os.stat} <= os.supports_dir_fd
        ):
            raise NotImplementedError("LocalFileStorage needs POSIX dir_fd and O_NOFOLLOW")
        if not isinstance(dir, str | os.PathLike) or not isinstance(os.fspath(dir), str):
            raise ArgumentTypeError(f"dir must be a str path, not {type(dir).__name__}")
        if not os.fspath(dir):
            raise InvalidArgumentError("dir is empty (use '.' for the working directory)")
        self._root = os.path.realpath(os.fspath(dir))
        self.ttl = check_ttl(ttl)
        self.lock_timeout = check_seconds("lock_timeout", lock_timeout, optional=True)
        # Key -> (signatures of its value and log files, the value's digest and token, the
        # log) as this instance last appended: the next append reads neither file again.
        self._logs: dict[
            str, tuple[tuple[FileIdent | None, FileIdent | None], str, str, LogState]
        ] = {}
        # Directory (as key segments) -> monotonic time of its next temp-file sweep.
        self._next_sweep: dict[tuple[str, ...], float] = {}
        # The directory and lock file of keys appended lately, kept open between appends.
        self._handles = DirHandles()
        self._closer = weakref.finalize(self, self._handles.close)
        # Key -> its segments, checked (allowlist and containment) once.
        self._checked: OrderedDict[str, builtins.list[str]] = OrderedDict()

    async def close(self) -> None:
        """Close the descriptors kept open between appends (the storage stays usable)."""
        self._handles.close()

    def _segments(self, key: str) -> builtins.list[str]:
        """The checked segments of ``key`` (``STORAGE_KEY_INVALID`` when it is not one)."""
        segments = self._checked.get(key)
        if segments is None:
            segments = validate_key(key)
            self._check_contained(key, segments)
            self._checked[key] = segments
            if len(self._checked) > _CHECKED_KEYS:
                with contextlib.suppress(KeyError, StopIteration):
                    del self._checked[next(iter(self._checked))]
        return segments

    @property
    def dir(self) -> Path:
        """The resolved root directory."""
        return Path(self._root)

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"LocalFileStorage({self._root!r})"

    # -- path handling -------------------------------------------------------------------

    def _check_contained(self, key: str, segments: builtins.list[str]) -> None:
        path = os.path.normpath(os.path.join(self._root, *segments))
        if path == self._root or os.path.commonpath([self._root, path]) != self._root:
            raise StorageKeyInvalidError(f"storage key {key!r} resolves outside the storage")

    def _open_root(self, *, create: bool) -> int | None:
        if create:
            os.makedirs(self._root, mode=DIR_MODE, exist_ok=True)
        try:
            return os.open(self._root, DIR_FLAGS)
        except FileNotFoundError:
            return None
        except NotADirectoryError as exc:
            raise StorageKeyInvalidError(
                f"storage root {self._root!r} is not a directory (or became a symlink)"
            ) from exc

    def _walk(self, key: str, dirs: builtins.list[str], *, create: bool) -> builtins.list[int]:
        """Open the root and each of ``dirs`` without following links; return all fds.

        The caller closes the fds. Raises ``_NotADir`` when a component is a file (a key
        cannot be a directory and a value at once), ``FileNotFoundError`` when a component
        is missing and ``create`` is false, and ``STORAGE_KEY_INVALID`` on a symlink.
        """
        root = self._open_root(create=create)
        if root is None:
            raise FileNotFoundError(self._root)
        fds = [root]
        try:
            for index, name in enumerate(dirs):
                fds.append(self._open_dir(key, fds[-1], name, index, create=create))
        except BaseException:
            close_all(fds)
            raise
        return fds

    @staticmethod
    def _open_dir(key: str, parent: int, name: str, index: int, *, create: bool) -> int:
        for _ in range(3):
            try:
                return os.open(name, DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, DIR_MODE, dir_fd=parent)
                    os.fsync(parent)
            except NotADirectoryError:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise symlink_error(key, name) from None
                raise _NotADir(index) from None
        raise FileNotFoundError(errno.ENOENT, "directory keeps vanishing", name)

    # -- sync operations (run in a worker thread) -----------------------------------------

    def _put_sync(
        self,
        key: str,
        segments: builtins.list[str],
        data: bytes,
        deadline: Deadline | None,
        expected: str | _Blind | None = _BLIND,
    ) -> None:
        *dirs, name = segments
        for attempt in range(_PUT_ATTEMPTS):
            try:
                fds = self._walk(key, dirs, create=True)
                try:
                    if isinstance(expected, _Blind) or expected is None:
                        try:  # a new key needs no lock (and leaves no lock file)
                            # A log left by a removal: the value names it folded.
                            folded = header_token_at(log_name(name), dir_fd=fds[-1])
                            self._publish(
                                key, tuple(dirs), fds[-1], name, data, folded, new_only=True
                            )
                            return
                        except ValueExists:
                            pass  # a value is there: compared under its lock (a conflict)
                    self._swap_locked(key, tuple(dirs), fds[-1], name, data, expected, deadline)
                finally:
                    close_all(fds)
                return
            except _NotADir as exc:
                parent = "/".join(segments[: exc.index + 1])
                raise StorageKeyInvalidError(
                    f"cannot store {key!r}: {parent!r} already holds a value"
                ) from None
            except FileNotFoundError:
                # A concurrent delete pruned a directory between our mkdir and create.
                if attempt == _PUT_ATTEMPTS - 1:
                    raise

    def _swap_locked(
        self,
        key: str,
        dirs: tuple[str, ...],
        dfd: int,
        name: str,
        data: bytes,
        expected: str | _Blind | None,
        deadline: Deadline | None,
    ) -> None:
        """Compare-and-swap under ``flock`` of the sidecar ``.<name>.lock`` (never a key).

        ``_BLIND`` stores without comparing (a ``put`` of a value that has a log).
        """
        lock = key_lock(key, dfd, name, exclusive=True, create=True, deadline=deadline)
        assert lock is not None  # created when missing (its directory gone: an error)
        try:
            if isinstance(expected, _Blind) and not lexists(dfd, log_name(name)):
                token = self._publish(key, dirs, dfd, name, data, None)  # a plain put
                self._remember_value(key, dfd, name, data, token)
                return
            current = self._read_stored(key, dfd, name)
            log = read_log_at(key, dfd, name, current)
            if not isinstance(expected, _Blind):
                value = None if current is None else current.data
                check_tag(key, tag_of(value, len(log.records), log.end), expected)
            # The new value names the log it replaces: if removing it below fails, that
            # log is the one a reader may take for stale.
            token = self._publish(key, dirs, dfd, name, data, log.token)
            if log.exists:
                drop_log_at(dfd, name)  # bound to the replaced value: stale either way
            self._remember_value(key, dfd, name, data, token)
        finally:
            os.close(lock)

    def _remember_value(self, key: str, dfd: int, name: str, data: bytes, token: str) -> None:
        """Note the value just stored under the key's lock: an append reads it not again.

        Its log, if one is still there (its removal failed), is stale: it is bound to the
        value replaced. Any other writer changes a file's signature, so this is dropped.
        Only for a key this instance appended to (a fold): other values are not hashed.
        """
        if key not in self._logs:
            return
        value = ident_or_none(name, dir_fd=dfd)
        log = ident_or_none(log_name(name), dir_fd=dfd)
        state = LogState([], 0, exists=log is not None, stale=log is not None)
        self._logs[key] = ((value, log), digest(data), token, state)

    def _publish(
        self,
        key: str,
        dirs: tuple[str, ...],
        dfd: int,
        name: str,
        data: bytes,
        folded: str | None,
        *,
        new_only: bool = False,
    ) -> str:
        """Write ``data`` to a temp file, fsync, rename it over ``name``, fsync the dir.

        Returns the new value's token.

        The file opens with its header (a new token, ``folded``: the token of the log on
        disk, if any, and the CRC32). ``new_only``: link it in only where no value exists
        (``ValueExists`` otherwise), which needs no lock: no other writer's value can be
        replaced.
        """
        check_target(key, dfd, name, new_only=new_only)
        self._sweep_when_due(dirs, dfd)
        token = uuid.uuid4().hex
        tmp = write_temp(dfd, name, value_header(token, folded or "", data), data)
        link_temp(tmp, dfd, name, new_only=new_only)
        try:
            os.fsync(dfd)
        except OSError as exc:
            raise mark_landed(exc) from None
        return token

    def _sweep_when_due(self, dirs: tuple[str, ...], dfd: int) -> None:
        """Sweep the directory's stale temp files, once a minute at most.

        A temp file left by a writer killed just before (a quick restart) is too young
        for the first sweep; sweep again once a minute, not only once per instance.
        """
        now = time.monotonic()
        if now >= self._next_sweep.get(dirs, 0.0):
            sweep_temps(dfd, _TEMP_GRACE_SECONDS)
            self._next_sweep[dirs] = now + _SWEEP_INTERVAL_SECONDS

    def _read_value(self, key: str, dfd: int, name: str) -> bytes | None:
        """The value of ``name`` in the directory ``dfd``, or ``None`` (no value there)."""
        stored = self._read_stored(key, dfd, name)
        return None if stored is None else stored.data

    def _read_stored(self, key: str, dfd: int, name: str) -> Value | None:
        """The value file ``name`` in the directory ``dfd`` as stored, or ``None``."""
        # O_NONBLOCK: a FIFO planted under the root must not hang the reader.
        flags = os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise symlink_error(key, name) from None
            raise
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                if holds_keys(fd):
                    return None  # a directory of other keys: no value at this one
                raise StorageKeyInvalidError(
                    f"storage key {key!r}: a directory holding no keys is where its value "
                    "belongs; it was left untouched"
                )
            if not stat.S_ISREG(mode):
                raise odd_file_error(key)
            # The header apart, then the value into its own buffer: no copy of the value.
            head = os.read(fd, VALUE_HEADER_BYTES)
            body = read_whole(fd, max(os.fstat(fd).st_size - len(head), 0))
        finally:
            os.close(fd)
        return open_value_parts(key, head, body)

    def _get_sync(self, key: str, segments: builtins.list[str]) -> bytes | None:
        *dirs, name = segments
        try:
            fds = self._walk(key, dirs, create=False)
        except (FileNotFoundError, _NotADir):
            return None
        try:
            return self._read_value(key, fds[-1], name)
        finally:
            close_all(fds)

    def _delete_sync(
        self,
        key: str,
        segments: builtins.list[str],
        deadline: Deadline | None,
        cutoff: float | None = None,
    ) -> bool:
        """Remove the value, its log and its lock file under its lock; prune empty dirs.

        With ``cutoff`` (``prune``), only a value and log last written before it (epoch
        seconds). Returns whether a value went.
        """
        *dirs, name = segments
        try:
            fds = self._walk(key, dirs, create=False)
        except (FileNotFoundError, _NotADir):
            return False
        try:
            dfd = fds[-1]
            if not holds_value_file(key, dfd, name):
                return False
            try:
                lock = key_lock(key, dfd, name, exclusive=True, create=True, deadline=deadline)
            except FileNotFoundError:
                return False  # its directory went with a concurrent delete of the key
            assert lock is not None  # created when missing
            try:
                value = ident_or_none(name, dir_fd=dfd)
                if written_since(dfd, name, value, cutoff):
                    return False  # written since: kept (and its lock file with it)
                self._unlink_key(key, dfd, name)
            finally:
                os.close(lock)
            prune_empty_dirs(dirs, fds)
            return value is not None
        finally:
            close_all(fds)

    def _unlink_key(self, key: str, dfd: int, name: str) -> None:
        """Remove the value ``name``, its log and its (held) lock file from ``dfd``."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
        drop_log_at(dfd, name)
        os.unlink(lock_name(name), dir_fd=dfd)  # held: a waiter takes it again
        os.fsync(dfd)
        self._logs.pop(key, None)
        self._handles.drop(key)

    def _list_sync(self, prefix: str, dirs: builtins.list[str], tail: str) -> builtins.list[str]:
        key = prefix or "<root>"
        try:
            fds = self._walk(key, dirs, create=False)
        except (FileNotFoundError, _NotADir):
            return []
        except StorageKeyInvalidError:
            return []  # a symlinked directory on the way: nothing under it is listed
        try:
            base = "/".join(dirs)
            found = [
                k
                for k in self._walk_files(fds[-1], base, tail)
                if k.startswith(prefix) and is_valid_key(k)
            ]
        finally:
            close_all(fds)
        return sorted(found)

    @staticmethod
    def _walk_files(top: int, base: str, tail: str) -> builtins.list[str]:
        """Relative keys of regular files under ``top``; symlinks are never entered."""
        found: builtins.list[str] = []
        stack: builtins.list[tuple[int | None, str, str]] = [(None, base, tail)]
        try:
            while stack:
                owned, rel, name_prefix = stack.pop()
                dfd = top if owned is None else owned
                try:
                    with os.scandir(dfd) as entries:
                        items = [
                            (
                                e.name,
                                e.is_dir(follow_symlinks=False),
                                e.is_file(follow_symlinks=False),
                            )
                            for e in entries
                            if e.name.startswith(name_prefix)
                        ]
                    for name, is_dir, is_file in items:
                        child = f"{rel}/{name}" if rel else name
                        if is_file:
                            found.append(child)
                        elif is_dir and is_valid_segment(name):
                            try:
                                sub = os.open(name, DIR_FLAGS, dir_fd=dfd)
                            except OSError:
                                continue  # vanished, or swapped for a symlink since scandir
                            stack.append((sub, child, ""))
                finally:
                    if owned is not None:
                        os.close(owned)
        finally:
            for owned, _, _ in stack:  # only left over when something raised
                if owned is not None:
                    os.close(owned)
        return found

    # -- the Storage contract ----------------------------------------------------------

    async def put(self, key: str, data: bytes) -> None:
        """Atomically and durably store ``data`` at ``<dir>/<key>``."""
        segments = self._segments(key)
        value = as_bytes(data)
        deadline = Deadline.after(self.lock_timeout)
        await self._io("write", key, self._put_sync, key, segments, value, deadline)
        await self._after_write()
        logger.debug("stored %s (%d bytes) under %s", key, len(value), self._root)

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """Store ``data`` only if ``key`` still holds the value ``expected`` names.

        Under ``flock`` of a sidecar ``.<name>.lock`` beside the value (never a key), so
        it is atomic across processes; ``CHECKPOINT_CONFLICT`` otherwise, nothing written.
        """
        segments = self._segments(key)
        value = as_bytes(data)
        check_expected_tag(expected, optional=True)
        deadline = Deadline.after(self.lock_timeout)
        await self._io("write", key, self._put_sync, key, segments, value, deadline, expected)
        await self._after_write()
        logger.debug("stored %s (%d bytes, compare-and-swap) under %s", key, len(value), self._root)

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The value of ``key``, the records appended since it was stored, and its tag."""
        segments = self._segments(key)
        deadline = Deadline.after(self.lock_timeout)
        return await self._io("read", key, self._read_logged_sync, key, segments, deadline)

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Append ``record`` to the log of ``key`` if its tag is still ``expected``.

        ``CHECKPOINT_CONFLICT`` (nothing written) when another writer stored or appended
        since; returns the new tag.
        """
        segments = self._segments(key)
        data = as_bytes(record)
        check_expected_tag(expected, optional=False)
        deadline = Deadline.after(self.lock_timeout)
        tag = await self._io(
            "write", key, self._append_logged_sync, key, segments, data, expected, deadline
        )
        await self._after_write()
        logger.debug("stored %s (a %d-byte delta) under %s", key, len(data), self._root)
        return tag

    def _locked_dir(
        self,
        key: str,
        segments: builtins.list[str],
        *,
        exclusive: bool,
        deadline: Deadline | None,
    ) -> tuple[builtins.list[int], int | None] | None:
        """The directory fds of ``key`` and its sidecar lock held (``None``: no directory)."""
        *dirs, name = segments
        try:
            fds = self._walk(key, dirs, create=False)
        except (FileNotFoundError, _NotADir):
            return None
        try:
            lock = key_lock(
                key, fds[-1], name, exclusive=exclusive, create=exclusive, deadline=deadline
            )
        except BaseException as exc:
            close_all(fds)
            if isinstance(exc, FileNotFoundError):
                return None  # the directory went with a concurrent delete
            raise
        return fds, lock

    def _read_logged_sync(
        self, key: str, segments: builtins.list[str], deadline: Deadline | None
    ) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        held = self._locked_dir(key, segments, exclusive=False, deadline=deadline)
        if held is None:
            return None, [], None
        fds, lock = held
        try:
            name = segments[-1]
            stored = self._read_stored(key, fds[-1], name)
            log = read_log_at(key, fds[-1], name, stored)
            value = None if stored is None else stored.data
            return value, log.records, tag_of(value, len(log.records), log.end)
        finally:
            if lock is not None:
                os.close(lock)
            close_all(fds)

    def _append_logged_sync(
        self,
        key: str,
        segments: builtins.list[str],
        record: bytes,
        expected: str,
        deadline: Deadline | None,
    ) -> str:
        *dirs, name = segments
        path = os.path.join(self._root, *dirs)
        dfd = self._handles.take(key, path)
        lock: int | None = None
        if dfd is not None:
            try:
                lock = key_lock(key, dfd, name, exclusive=True, create=True, deadline=deadline)
            except FileNotFoundError:
                os.close(dfd)  # removed with a delete of its last key: walk again
                dfd = None
            except BaseException:
                os.close(dfd)
                raise
        if dfd is None:
            held = self._locked_dir(key, segments, exclusive=True, deadline=deadline)
            if held is None:
                check_tag(key, None, expected)
                raise AssertionError("unreachable")  # pragma: no cover
            fds, lock = held
            dfd = fds.pop()
            close_all(fds)
        assert lock is not None  # created when missing
        try:
            tag = self._append_at(key, dfd, name, record, expected)
        except BaseException:
            os.close(dfd)
            raise
        finally:
            os.close(lock)
        self._handles.give(key, path, dfd)
        return tag

    def _append_at(self, key: str, dfd: int, name: str, record: bytes, expected: str) -> str:
        """Append ``record`` to the log of ``name`` in ``dfd``, its lock held; the new tag."""
        sigs = (ident_or_none(name, dir_fd=dfd), ident_or_none(log_name(name), dir_fd=dfd))
        known = self._logs.get(key)
        value_digest: str | None
        token = ""
        if known is not None and known[0] == sigs:
            # Both files are as this instance left them: read neither again.
            _, value_digest, token, log = known
            count = len(log.records)
        else:
            stored = self._read_stored(key, dfd, name)
            log = read_log_at(key, dfd, name, stored)
            value_digest = None if stored is None else digest(stored.data)
            token = "" if stored is None else stored.token
            count = len(log.records)
        found = None if value_digest is None else digest_tag(value_digest, count, log.end)
        check_tag(key, found, expected)
        assert value_digest is not None  # a tag names a value
        fresh = not log.exists or log.stale
        end = append_log_at(dfd, name, token, log, record)
        after = LogState(
            [b""] * (count + 1),  # only their number counts here
            end,
            exists=True,
            stale=False,
            token=token,
            version=JOURNAL_FORMAT_VERSION if fresh else log.version,
        )
        self._logs[key] = (
            (sigs[0], ident_or_none(log_name(name), dir_fd=dfd)),
            value_digest,
            token,
            after,
        )
        return digest_tag(value_digest, count + 1, end)

    async def _io(self, action: str, key: str, fn: Callable[..., _T], *args: object) -> _T:
        """Run ``fn`` in a thread; an ``OSError`` becomes ``STORAGE_IO`` naming key and root."""
        try:
            return await run_blocking(fn, *args)
        except OSError as exc:
            raise io_error(exc, action=action, key=key, root=self._root) from exc

    async def get(self, key: str) -> bytes | None:
        """The bytes of ``<dir>/<key>``, or ``None`` when it does not exist."""
        segments = self._segments(key)
        return await self._io("read", key, self._get_sync, key, segments)

    async def delete(self, key: str) -> None:
        """Remove ``<dir>/<key>`` (no-op when missing) and prune emptied directories."""
        segments = self._segments(key)
        deadline = Deadline.after(self.lock_timeout)
        await self._io("delete", key, self._delete_sync, key, segments, deadline)

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove values (and logs) not written for ``older_than`` (default: ``ttl``).

        Each under its key's lock, so a value written meanwhile is kept; a key whose
        lock stays busy past ``lock_timeout`` is kept too. Returns how many values went;
        directories left empty go too.
        """
        cutoff = time.time() - check_older_than(older_than, self.ttl)
        return await self._io("delete", "", self._prune_sync, cutoff)

    def _prune_sync(self, cutoff: float) -> int:
        removed = 0
        for key in self._list_sync("", [], ""):
            # Each key's wait bounded on its own; a key still locked past it is in use,
            # not stale: it is kept and the others go on.
            try:
                removed += self._delete_sync(
                    key, key.split("/"), Deadline.after(self.lock_timeout), cutoff
                )
            except LockTimeoutError:
                logger.info("prune kept %s: its lock stayed busy", key)
        return removed

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Keys under ``dir`` starting with ``prefix``, sorted; symlinks are skipped."""
        dirs, tail = validate_prefix(prefix)
        if dirs:
            self._check_contained(prefix, dirs)
        return await self._io("list", prefix, self._list_sync, prefix, dirs, tail)
