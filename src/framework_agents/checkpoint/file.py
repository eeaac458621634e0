"""Checkpoints as files, safe across tasks, processes and crashes: :class:`FileCheckpointer`."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import ValidationError

from .._fs import atomic_write, sweep_temp_files
from ..errors import (
    AgentError,
    CheckpointCorruptError,
    InvalidArgumentError,
    LockTimeoutError,
    ThreadBusyError,
)
from ..history import well_formed_problems
from ._io import run_blocking
from .lock import with_file_lock
from .model import ThreadCheckpoint, check_thread_id

__all__ = ["FileCheckpointer"]

CHECKPOINT_FILE = "checkpoint.json"
WRITE_LOCK_FILE = "checkpoint.lock"
RUN_LOCK_FILE = "run.lock"

#: (device, inode, size, mtime, ctime) of a checkpoint file as this instance last saw it.
_Signature = tuple[int, int, int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileCheckpointer:
    """Thread checkpoints under ``root``, every write under :func:`with_file_lock`.

    Layout::

        <root>/threads/<thread_id>/checkpoint.json   the checkpoint (atomic publish)
        <root>/threads/<thread_id>/checkpoint.lock   write lock: held for one save/delete
        <root>/threads/<thread_id>/run.lock          thread lock: held for a whole run

    Two lock files, so a run that holds its thread (``thread_lock``) can save as often as it
    likes: saves take only the write lock, which nobody holds for longer than one write.
    The thread lock is not reentrant on purpose: a second run of the same thread, even from
    inside the first, waits and then fails with THREAD_BUSY instead of interleaving.

    Reads take no lock (a published file is always complete). A save never overwrites a
    corrupt checkpoint: when the file changed since this instance last read or wrote it,
    it is validated first and CHECKPOINT_CORRUPT leaves it untouched.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float | None = 10.0,
        stale_after: float = 30.0,
    ) -> None:
        if lock_timeout is not None and not lock_timeout >= 0:
            raise InvalidArgumentError(f"lock_timeout must be >= 0 or None, not {lock_timeout!r}")
        if not stale_after > 0:
            raise InvalidArgumentError(f"stale_after must be > 0, not {stale_after!r}")
        self.root = Path(root)
        self.lock_timeout = lock_timeout
        self.stale_after = stale_after
        self._seen: dict[str, _Signature] = {}

    def __repr__(self) -> str:
        return f"FileCheckpointer({str(self.root)!r})"

    def thread_dir(self, thread_id: str) -> Path:
        """The directory of one thread (validates the id: THREAD_ID_INVALID)."""
        return self.root / "threads" / check_thread_id(thread_id)

    def path(self, thread_id: str) -> Path:
        """Where the thread's checkpoint is stored."""
        return self.thread_dir(thread_id) / CHECKPOINT_FILE

    # -- reading -------------------------------------------------------------------------

    def _parse(self, thread_id: str, path: Path, data: bytes) -> ThreadCheckpoint:
        try:
            checkpoint = ThreadCheckpoint.model_validate_json(data)
        except ValidationError as exc:
            errors = exc.errors()
            first = next((e for e in errors if e["loc"] == ("version",)), errors[0])
            where = ".".join(str(p) for p in first["loc"]) or "document"
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} is unreadable ({where}: {first['msg']})"
            ) from exc
        except AgentError as exc:
            raise CheckpointCorruptError(f"checkpoint {str(path)!r} is unreadable: {exc}") from exc
        if checkpoint.thread_id != thread_id:
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} belongs to thread {checkpoint.thread_id!r}"
            )
        return checkpoint

    def _read(self, thread_id: str) -> ThreadCheckpoint | None:
        path = self.path(thread_id)
        try:
            with open(path, "rb") as fh:
                sig = _signature(os.fstat(fh.fileno()))
                data = fh.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        checkpoint = self._parse(thread_id, path, data)
        self._seen[thread_id] = sig
        return checkpoint

    async def load(self, thread_id: str) -> ThreadCheckpoint | None:
        """The thread's checkpoint, or ``None`` (CHECKPOINT_CORRUPT when unreadable)."""
        check_thread_id(thread_id)
        return await run_blocking(self._read, thread_id)

    async def list_threads(self) -> list[str]:
        """The ids of the threads that have a checkpoint, sorted."""
        return await run_blocking(self._list)

    def _list(self) -> list[str]:
        base = self.root / "threads"
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            try:
                check_thread_id(entry.name)
            except AgentError:
                continue
            if os.path.isfile(os.path.join(entry.path, CHECKPOINT_FILE)):
                found.append(entry.name)
        return sorted(found)

    # -- writing -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _locked(self, thread_id: str, name: str, wait: float | None) -> AsyncIterator[None]:
        directory = self.thread_dir(thread_id)
        async with contextlib.AsyncExitStack() as stack:
            for attempt in range(3):
                await run_blocking(functools.partial(os.makedirs, directory, exist_ok=True))
                try:
                    await stack.enter_async_context(
                        with_file_lock(directory / name, wait, self.stale_after)
                    )
                    break
                except FileNotFoundError:
                    # A delete removed the empty directory between our mkdir and the lock.
                    if attempt == 2:
                        raise
            yield

    def _write(self, checkpoint: ThreadCheckpoint, payload: bytes) -> None:
        thread_id = checkpoint.thread_id
        path = self.path(thread_id)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if st is not None and self._seen.get(thread_id) != _signature(st):
            with open(path, "rb") as fh:
                self._parse(thread_id, path, fh.read())  # refuse to overwrite a corrupt file
        atomic_write(path, payload)
        self._seen[thread_id] = _signature(os.stat(path))
        sweep_temp_files(path, grace_seconds=max(60.0, self.stale_after))

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Atomically replace the thread's checkpoint, under the thread's write lock."""
        if not isinstance(checkpoint, ThreadCheckpoint):
            raise InvalidArgumentError(
                f"save() takes a ThreadCheckpoint, not {type(checkpoint).__name__}"
            )
        check_thread_id(checkpoint.thread_id)
        problems = well_formed_problems(checkpoint.messages)
        if problems:
            raise InvalidArgumentError(
                f"checkpoint messages of thread {checkpoint.thread_id!r} are not well formed: "
                + "; ".join(problems[:3])
            )
        payload = ThreadCheckpoint.__pydantic_serializer__.to_json(checkpoint)
        async with self._locked(checkpoint.thread_id, WRITE_LOCK_FILE, self.lock_timeout):
            await run_blocking(self._write, checkpoint, payload)

    def _unlink(self, thread_id: str) -> None:
        path = self.path(thread_id)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._seen.pop(thread_id, None)
        # We hold the write lock, so no writer of ours is mid-flight: sweep every temp.
        sweep_temp_files(path, grace_seconds=0.0)

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

    @contextlib.asynccontextmanager
    async def thread_lock(
        self,
        thread_id: str,
        *,
        timeout: float | None = 10.0,  # noqa: ASYNC109 - a lock wait, not an I/O deadline
    ) -> AsyncIterator[None]:
        """Hold the thread for a whole run (``run.lock``); THREAD_BUSY after ``timeout``."""
        check_thread_id(thread_id)
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._locked(thread_id, RUN_LOCK_FILE, timeout))
            except LockTimeoutError as exc:
                raise ThreadBusyError(
                    f"thread {thread_id!r} is busy: another run holds it ({exc.message})"
                ) from exc
            yield
