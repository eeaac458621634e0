"""``FileMemory``: a history persisted to ``<dir>/memory.json``, safe across processes.

Every flush publishes a whole new file atomically (``_fs.atomic_write``), so readers never
see a torn file and a crash leaves the previous good state. Each read-modify-write
(``save``, ``replace``, ``clear``) runs under an in-process ``asyncio.Lock`` per path and an
``flock`` on a sidecar lock file, so concurrent tasks and processes never lose an append.
POSIX only (``fcntl.flock``); on network file systems, ``flock`` is only as good as the
server's locking.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._fs import atomic_write, fsync_dir, sweep_temp_files
from .._platform import posix_fcntl
from ..errors import InvalidArgumentError, MemoryCorruptError
from ..messages import Message
from ._document import (
    FOOTER,
    HEADER,
    SEP,
    encode_message,
    encode_stored,
    parse_document,
    same_json_message,
)
from ._window import (
    LoopLocks,
    bounded_view,
    check_max_messages,
    check_messages,
    shape_of,
    window_start,
)

__all__ = ["FileMemory"]

logger = logging.getLogger(__name__)

#: In-process serialisation of read-modify-writes, by resolved ``memory.json`` path.
_PATH_LOCKS = LoopLocks()

#: ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of a file, ``None`` if absent.
_Ident = tuple[int, int, int, int, int] | None


@dataclass(frozen=True, slots=True)
class _Known:
    """What one instance knows ``memory.json`` holds, as reusable JSON fragments.

    ``body`` is the messages' fragments joined by ``SEP`` (the document minus ``HEADER``
    and ``FOOTER``); ``lengths`` and ``shapes`` give each fragment's length and window
    shape, so the next save can window and extend the body without parsing it.
    """

    body: bytes
    lengths: list[int]
    shapes: bytes
    ident: _Ident

    @classmethod
    def of(cls, messages: Sequence[Message], ident: _Ident) -> _Known:
        """Fragments for messages read from the file (re-serialised once)."""
        fragments = [encode_stored(m) for m in messages]
        return cls(
            SEP.join(fragments),
            [len(f) for f in fragments],
            bytes(shape_of(m) for m in messages),
            ident,
        )

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is exactly the document these fragments make."""
        head, foot = len(HEADER), len(FOOTER)
        return (
            len(data) == head + len(self.body) + foot
            and data.startswith(HEADER)
            and data.endswith(FOOTER)
            and memoryview(data)[head : head + len(self.body)] == self.body
        )

    def extended(self, fragments: list[bytes], shapes: bytes, max_messages: int) -> _Known:
        """These messages plus ``fragments``, windowed to ``max_messages``."""
        all_shapes = self.shapes + shapes
        start = window_start(all_shapes, max_messages)
        old = len(self.lengths)
        if not fragments and start == 0:
            return self
        parts: list[bytes | memoryview] = []
        if start < old:
            offset = sum(self.lengths[:start]) + start * len(SEP)
            parts.append(memoryview(self.body)[offset:])
        parts.extend(fragments[max(0, start - old) :])
        return _Known(
            SEP.join(parts),
            (self.lengths + [len(f) for f in fragments])[start:],
            all_shapes[start:],
            self.ident,
        )

    def chunks(self) -> list[bytes]:
        """The document, as chunks for one write."""
        return [HEADER, self.body, FOOTER]


_EMPTY = _Known(b"", [], b"", None)


class FileMemory:
    """A history in ``<dir>/memory.json`` keeping the newest ``max_messages``; ``save()`` appends.

    Layout of ``dir`` (created on the first save if missing)::

        <dir>/
          memory.json                {"version": 1, "messages": [<message>, ...]}
          memory.json.lock           sidecar locked with flock(); never deleted
          .memory.json.<uuid>.tmp    a writer's temp file, renamed over memory.json

    A missing ``memory.json`` is a fresh memory. A corrupt or wrongly shaped one (bad
    JSON, truncation, wrong types, unknown keys, NaN, deep nesting, a newer version)
    raises ``MemoryCorruptError`` (``MEMORY_CORRUPT``) from ``load()``, ``save()`` and
    ``clear()`` alike and is never overwritten: remove it yourself to start over.

    ``save()`` reuses the JSON of the messages it already stored: the instance keeps the
    fragments of the file it last wrote or read with that file's identity, and while the
    file is unchanged (same identity and same bytes) a save only serialises the new
    messages. A file changed by another writer is re-read and re-validated.

    Temp files left by crashed writers are removed by a later save once they are older
    than ``stale_temp_seconds`` (each instance scans for them at most once a second,
    every save when the grace is 0). If the awaiting task is cancelled, a save already handed
    to its worker thread still completes (or publishes nothing); it is never torn.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        max_messages: int = 50,
        *,
        stale_temp_seconds: float = 60.0,
    ) -> None:
        if not isinstance(dir, str | os.PathLike) or not isinstance(os.fspath(dir), str):
            raise InvalidArgumentError(f"dir must be a path, got {type(dir).__name__}")
        if not os.fspath(dir):
            raise InvalidArgumentError("dir is empty (use '.' for the working directory)")
        if (
            isinstance(stale_temp_seconds, bool)
            or not isinstance(stale_temp_seconds, int | float)
            or not math.isfinite(stale_temp_seconds)
            or stale_temp_seconds < 0
        ):
            raise InvalidArgumentError(
                f"stale_temp_seconds must be a number >= 0, got {stale_temp_seconds!r}"
            )
        self.max_messages: int = check_max_messages(max_messages)
        self.stale_temp_seconds: float = float(stale_temp_seconds)
        self.dir: Path = Path(dir).resolve()
        self.path: Path = self.dir / "memory.json"
        self.lock_path: Path = self.dir / "memory.json.lock"
        self._known: _Known | None = None
        # Fragments this instance encoded, by message id, with the message read back from
        # each: replace() (the agent's commit) re-encodes only messages that changed.
        self._memo: dict[str, tuple[Message, bytes]] = {}
        self._next_sweep = 0.0  # monotonic time of the next temp-file sweep
        self._reparses = 0  # how often save() had to parse the file (for tests/benchmarks)

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages``."""
        return await asyncio.to_thread(self._load_sync)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages``, keep the newest ``max_messages``, publish atomically."""
        fragments, shapes = self._encode(messages)
        async with _PATH_LOCKS.get(self.path):
            await asyncio.to_thread(self._update_sync, fragments, shapes, append=True, create=True)
        logger.debug("%s: saved %d messages", self.path, len(messages))

    async def replace(self, messages: Sequence[Message]) -> None:
        """Replace the stored history with ``messages`` (windowed) in one atomic publish."""
        fragments, shapes = self._encode(messages)
        async with _PATH_LOCKS.get(self.path):
            await asyncio.to_thread(self._update_sync, fragments, shapes, append=False, create=True)

    async def clear(self) -> None:
        """Forget the stored history (publishes an empty document; a corrupt file raises)."""
        async with _PATH_LOCKS.get(self.path):
            await asyncio.to_thread(self._update_sync, [], b"", append=False, create=False)

    def __repr__(self) -> str:
        return f"FileMemory({str(self.dir)!r}, max_messages={self.max_messages})"

    def _encode(self, messages: Sequence[Message]) -> tuple[list[bytes], bytes]:
        """JSON fragments and window shapes of messages to store (checked, no I/O).

        Done on the caller's thread before any file work: it is CPU work on messages the
        caller just made (cheaper there than in a cold worker thread), and bad input fails
        before the disk is touched or the lock taken. A message this instance encoded
        before reuses its fragment when it is still exactly what was encoded (compared
        with the read-back copy, never with an object the caller holds, so changes made
        in place are seen); only the others are serialised and checked.
        """
        new = check_messages(messages)
        memo = self._memo
        fresh: dict[str, tuple[Message, bytes]] = {}
        fragments: list[bytes] = []
        for msg in new:
            known = memo.get(msg.id)
            if known is not None and same_json_message(known[0], msg):
                fragments.append(known[1])
                continue
            fragment, back = encode_message(msg)
            fresh[msg.id] = (back, fragment)
            fragments.append(fragment)
        if fresh:
            memo = {**memo, **fresh}
            limit = 2 * self.max_messages
            if len(memo) > limit:  # keep the newest entries: a window's worth and more
                memo = dict(list(memo.items())[-limit:])
            self._memo = memo
        return fragments, bytes(shape_of(m) for m in new)

    # -- blocking parts, run in a worker thread ---------------------------------------

    def _load_sync(self) -> list[Message]:
        found = _read_document(self.path)
        if found is None:
            return []
        return bounded_view(parse_document(found[0], self.path), self.max_messages)

    def _update_sync(
        self, fragments: list[bytes], shapes: bytes, *, append: bool, create: bool
    ) -> None:
        fd = self._open_lock(create=create)
        if fd is None:
            return  # clear() of a memory whose directory does not exist
        try:
            fcntl = posix_fcntl()
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = self._read_current()
            base = current if append else _Known(b"", [], b"", current.ident)
            updated = base.extended(fragments, shapes, self.max_messages)
            exists = current.ident is not None
            if (exists and updated.body != current.body) or (not exists and updated.lengths):
                atomic_write(self.path, updated.chunks())
                st = os.stat(self.path)
                updated = _Known(updated.body, updated.lengths, updated.shapes, _ident_of(st))
            else:
                updated = current
            self._known = updated
            self._sweep()
        finally:
            os.close(fd)  # releases the flock

    def _open_lock(self, *, create: bool) -> int | None:
        # O_NOFOLLOW: a symlink planted as the lock file must not make us create (or lock)
        # a file outside ``dir``.
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            try:
                return os.open(self.lock_path, flags, 0o644)
            except FileNotFoundError:
                if not create:
                    return None
            _make_dirs(self.dir)
            return os.open(self.lock_path, flags, 0o644)
        except NotADirectoryError:
            raise _not_a_directory(self.dir) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _symlink(self.lock_path) from None
            raise

    def _read_current(self) -> _Known:
        found = _read_document(self.path)
        if found is None:
            return _EMPTY
        data, st = found
        ident = _ident_of(st)
        known = self._known
        # The identity alone is not proof: inode numbers are reused and timestamps are
        # coarse, so a file rewritten twice by another process can look unchanged. The
        # bytes are compared too (a memcmp, far cheaper than parsing and serialising).
        if known is not None and known.ident == ident and known.matches(data):
            return known
        self._reparses += 1
        logger.debug("%s changed since this instance last saw it; re-reading", self.path)
        return _Known.of(parse_document(data, self.path), ident)

    def _sweep(self) -> None:
        # A temp file only becomes removable once it is older than the grace period, so
        # scanning the directory more than about once a second gains nothing; with a
        # grace of 0 every save sweeps.
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(1.0, self.stale_temp_seconds)
        try:
            sweep_temp_files(self.path, grace_seconds=self.stale_temp_seconds)
        except OSError as exc:
            # The save itself succeeded; a temp file we may not delete is not its failure.
            logger.warning("could not sweep temp files next to %s: %s", self.path, exc)


def _not_a_directory(directory: Path) -> InvalidArgumentError:
    return InvalidArgumentError(f"FileMemory dir {str(directory)!r} is not a directory")


def _not_a_file(path: Path) -> MemoryCorruptError:
    return MemoryCorruptError(
        f"{path} is not a regular file; it was left untouched — inspect or remove it to continue"
    )


def _symlink(path: Path) -> MemoryCorruptError:
    return MemoryCorruptError(
        f"{path} is a symlink; it is not followed and was left untouched — replace it with "
        "the file itself (or point FileMemory at the directory it lives in)"
    )


def _read_document(path: Path) -> tuple[bytes, os.stat_result] | None:
    """The bytes and ``fstat`` of ``memory.json``, or ``None`` when it does not exist.

    Anything but a regular file there (a directory, a FIFO that would block the reader
    forever, a device) is ``MEMORY_CORRUPT`` and left alone.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (no effect on a file).
        # O_NOFOLLOW: a symlink would be read through but replaced (not followed) by the
        # next write, silently detaching it; refuse it instead.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise _not_a_directory(path.parent) from None
    except IsADirectoryError:
        raise _not_a_file(path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink(path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_file(path)
        return _read_all(fd, st.st_size), st
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    """Everything readable from ``fd``, whose size was ``size`` (usually one read).

    A published ``memory.json`` is never written in place (only replaced), so a short
    first read means the end of the file.
    """
    first = os.read(fd, size + 1)
    if len(first) <= size:
        return first
    parts = [first]
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def _ident_of(st: os.stat_result) -> _Ident:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _make_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents, durably."""
    missing: list[Path] = []
    path = directory
    while not path.exists():
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
        fsync_dir(path.parent)
