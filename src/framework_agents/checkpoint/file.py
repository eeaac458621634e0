"""Checkpoints as files, safe across tasks, processes and crashes: :class:`FileCheckpointer`."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import EllipsisType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError

from .._fs import atomic_write, read_bytes_or_none, sweep_temp_files
from .._persist import strict_loads
from ..errors import (
    AgentError,
    CheckpointCorruptError,
    InvalidArgumentError,
    LockTimeoutError,
    ThreadBusyError,
)
from ..history import well_formed_problems
from ..messages import Message, ToolCall
from ._io import run_blocking
from .lock import check_seconds, with_file_lock
from .model import (
    ThreadCheckpoint,
    check_saved_at,
    check_storable,
    check_thread_id,
    to_json,
)

__all__ = ["FileCheckpointer"]

CHECKPOINT_FILE = "checkpoint.json"
PROGRESS_FILE = "progress.json"
WRITE_LOCK_FILE = "checkpoint.lock"
RUN_LOCK_FILE = "run.lock"

#: Version of the JSON shape of ``progress.json``.
PROGRESS_FORMAT_VERSION = 1

#: Fields a progress file carries (everything of a checkpoint but its history).
_OVERLAY = (
    "saved_at",
    "state",
    "pending",
    "turn",
    "results",
    "in_flight",
    "outcome_unknown",
    "decisions",
)

#: (device, inode, size, mtime, ctime) of a file as this instance last saw it.
_Signature = tuple[int, int, int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _ids(checkpoint: ThreadCheckpoint) -> tuple[str, ...]:
    return tuple(m.id for m in checkpoint.messages)


@dataclass(frozen=True, slots=True)
class _Known:
    """A checkpoint file as this instance last wrote or read it."""

    signature: _Signature
    digest: str
    ids: tuple[str, ...]


class _Progress(BaseModel):
    """``progress.json``: a checkpoint without its history, bound to one checkpoint.json."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(PROGRESS_FORMAT_VERSION, strict=True)
    thread_id: str
    base: str
    saved_at: datetime
    state: dict[str, Any]
    pending: ToolCall | None
    turn: Message | None
    results: list[Message]
    in_flight: list[ToolCall]
    outcome_unknown: bool
    decisions: dict[str, Any]

    @field_validator("saved_at", mode="before")
    @classmethod
    def _no_timestamp_numbers(cls, value: object) -> object:
        return check_saved_at(value)

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if not 1 <= value <= PROGRESS_FORMAT_VERSION:
            raise ValueError(
                f"progress format version {value} is not one this framework-agents "
                f"understands (1..{PROGRESS_FORMAT_VERSION})"
            )
        return value


def _strict_json(path: Path, data: bytes) -> Any:
    """Parse like ``memory.json``: what would not read back equal once saved is corrupt.

    A duplicate key, NaN/Infinity, an out-of-range number or an escaped lone surrogate
    would be accepted by a lenient parser and silently altered by the next save.
    """
    try:
        return strict_loads(data)
    except RecursionError:
        raise CheckpointCorruptError(f"checkpoint {str(path)!r} is nested too deeply") from None
    except ValueError as exc:
        raise CheckpointCorruptError(
            f"checkpoint {str(path)!r} is unreadable (document: invalid JSON: {exc})"
        ) from None


def _canonical(data: bytes) -> ThreadCheckpoint | None:
    """``data`` parsed in one pass when it is exactly what saving the result writes, else None.

    The strict reader (:func:`_strict_json`, then validation) is slow: a Python hook runs
    for every JSON object. But a document that is byte for byte the serialisation of the
    checkpoint it parses to cannot hold what the strict reader refuses: a duplicate key,
    a NaN, an out-of-range number or a surrogate escape would each serialise differently
    (or not at all). That is every file this checkpointer wrote; anything else (a file
    written by hand or by another writer, or a corrupt one) goes to the strict reader,
    which alone decides what is accepted and names the problem.
    """
    try:
        checkpoint = ThreadCheckpoint.model_validate_json(data)
        if checkpoint.__pydantic_serializer__.to_json(checkpoint) == data:
            return checkpoint
    except (ValidationError, PydanticSerializationError, AgentError, ValueError, RecursionError):
        pass
    return None


def _corrupt(path: Path, exc: ValidationError) -> CheckpointCorruptError:
    errors = exc.errors()
    first = next((e for e in errors if e["loc"] == ("version",)), errors[0])
    where = ".".join(str(p) for p in first["loc"]) or "document"
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is unreadable ({where}: {first['msg']})"
    )


class FileCheckpointer:
    """Thread checkpoints under ``root``, every write under :func:`with_file_lock`.

    Layout::

        <root>/threads/<thread_id>/checkpoint.json   the checkpoint (atomic publish)
        <root>/threads/<thread_id>/progress.json     optional delta: the checkpoint's
                                                     non-history fields (save_progress)
        <root>/threads/<thread_id>/checkpoint.lock   write lock: held for one write
        <root>/threads/<thread_id>/run.lock          thread lock: held for a whole run

    Two lock files, so a run that holds its thread (``thread_lock``) can save as often as it
    likes: saves take only the write lock, which nobody holds for longer than one write.
    The thread lock is not reentrant on purpose: a second run of the same thread, even from
    inside the first, waits and then fails with THREAD_BUSY instead of interleaving.

    ``save_progress`` writes only ``progress.json`` (size of one turn, not of the history)
    when the stored history is the one passed; the file names the blake2b digest of the
    ``checkpoint.json`` it completes, and ``load`` applies it only to that file. ``save``
    publishes a new ``checkpoint.json`` first and then removes ``progress.json``, so a
    crash in between leaves a progress file that no longer matches and is ignored.

    Reads take no lock (a published file is always complete). A write never replaces a
    corrupt file: when a file changed since this instance last read or wrote it, it is
    validated first and CHECKPOINT_CORRUPT leaves it untouched.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lock_timeout: float | None = 10.0,
        stale_after: float = 30.0,
    ) -> None:
        """``lock_timeout``: how long a save or a run waits for the thread (``None``: forever)."""
        if not isinstance(root, str | os.PathLike) or not isinstance(os.fspath(root), str):
            raise InvalidArgumentError(
                f"FileCheckpointer root must be a str or os.PathLike of str, not {root!r:.60}"
            )
        check_seconds("lock_timeout", lock_timeout, optional=True)
        check_seconds("stale_after", stale_after, optional=False, positive=True)
        self.root = Path(root)
        self.lock_timeout = lock_timeout
        self.stale_after = stale_after
        self._known: dict[str, _Known] = {}

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
        checkpoint = _canonical(data)
        versioned = True  # a canonical document has every key, version included
        try:
            if checkpoint is None:
                doc = _strict_json(path, data)
                checkpoint = ThreadCheckpoint.model_validate(doc)
                versioned = isinstance(doc, dict) and "version" in doc
        except ValidationError as exc:
            raise _corrupt(path, exc) from exc
        except AgentError as exc:
            raise CheckpointCorruptError(f"checkpoint {str(path)!r} is unreadable: {exc}") from exc
        if checkpoint.thread_id != thread_id:
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} belongs to thread {checkpoint.thread_id!r}"
            )
        if not versioned:
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} is unreadable (document: no version key)"
            )
        return checkpoint

    def _parse_progress(self, thread_id: str, path: Path, data: bytes) -> _Progress:
        try:
            progress = _Progress.model_validate(_strict_json(path, data))
        except ValidationError as exc:
            raise _corrupt(path, exc) from exc
        if progress.thread_id != thread_id:
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} belongs to thread {progress.thread_id!r}"
            )
        return progress

    def _read_progress(self, thread_id: str) -> _Progress | None:
        path = self.thread_dir(thread_id) / PROGRESS_FILE
        data = read_bytes_or_none(path)
        return None if data is None else self._parse_progress(thread_id, path, data)

    def _read(self, thread_id: str) -> ThreadCheckpoint | None:
        path = self.path(thread_id)
        try:
            with open(path, "rb") as fh:
                sig = _signature(os.fstat(fh.fileno()))
                data = fh.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            raise _not_a_file(path) from None
        checkpoint = self._parse(thread_id, path, data)
        digest = _digest(data)
        self._known[thread_id] = _Known(sig, digest, _ids(checkpoint))
        progress = self._read_progress(thread_id)
        if progress is None or progress.base != digest:
            return checkpoint  # no delta, or one left over from an older checkpoint
        fields = {name: getattr(checkpoint, name) for name in ThreadCheckpoint.model_fields}
        fields.update({name: getattr(progress, name) for name in _OVERLAY})
        try:
            return ThreadCheckpoint.model_validate(fields)
        except ValidationError as exc:
            raise _corrupt(path.with_name(PROGRESS_FILE), exc) from exc

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
                try:
                    await run_blocking(functools.partial(os.makedirs, directory, exist_ok=True))
                except (FileExistsError, NotADirectoryError):
                    raise CheckpointCorruptError(
                        f"{str(directory)!r} is not a directory (a file is in its way); "
                        "it was left untouched: remove it to continue"
                    ) from None
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

    def _check_replaceable(self, thread_id: str) -> os.stat_result | None:
        """Refuse (CHECKPOINT_CORRUPT) to replace files that changed and are unreadable."""
        path = self.path(thread_id)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        known = self._known.get(thread_id)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _not_a_file(path)
        if st is not None and (known is None or known.signature != _signature(st)):
            with open(path, "rb") as fh:
                self._parse(thread_id, path, fh.read())
        self._read_progress(thread_id)
        return st

    def _write(self, checkpoint: ThreadCheckpoint, payload: bytes) -> None:
        thread_id = checkpoint.thread_id
        path = self.path(thread_id)
        self._check_replaceable(thread_id)
        atomic_write(path, payload)
        self._known[thread_id] = _Known(
            _signature(os.stat(path)), _digest(payload), _ids(checkpoint)
        )
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.with_name(PROGRESS_FILE))  # bound to the replaced checkpoint
        grace = max(60.0, self.stale_after)
        sweep_temp_files(path, grace_seconds=grace)
        sweep_temp_files(path.with_name(PROGRESS_FILE), grace_seconds=grace)

    def _write_progress(self, checkpoint: ThreadCheckpoint) -> None:
        thread_id = checkpoint.thread_id
        st = self._check_replaceable(thread_id)
        known = self._known.get(thread_id)
        if (
            st is None
            or known is None
            or known.signature != _signature(st)
            or known.ids != _ids(checkpoint)
        ):
            # The stored history is not the one given: only a full save is right.
            _check_well_formed(checkpoint)
            check_storable(checkpoint)
            self._write(checkpoint, to_json(checkpoint))
            return
        fields = {name: getattr(checkpoint, name) for name in _OVERLAY}
        progress = _Progress(thread_id=thread_id, base=known.digest, **fields)
        target = self.thread_dir(thread_id) / PROGRESS_FILE
        atomic_write(target, to_json(progress))

    async def save(self, checkpoint: ThreadCheckpoint) -> None:
        """Atomically replace the thread's checkpoint, under the thread's write lock."""
        _check_checkpoint(checkpoint)
        _check_well_formed(checkpoint)
        check_storable(checkpoint)  # STATE_NOT_JSON rather than stored altered
        payload = to_json(checkpoint)
        async with self._locked(checkpoint.thread_id, WRITE_LOCK_FILE, self.lock_timeout):
            await run_blocking(self._write, checkpoint, payload)

    async def save_progress(self, checkpoint: ThreadCheckpoint) -> None:
        """Like :meth:`save`, writing only the non-history fields when the history is stored.

        When the stored ``checkpoint.json`` is the one this instance last wrote or read and
        holds the same messages (by id), only ``progress.json`` is written: the cost is the
        size of the turn, not of the history. Otherwise this is a full :meth:`save`.
        """
        _check_checkpoint(checkpoint)
        check_storable(checkpoint, history=False)  # the history is checked if it is written
        async with self._locked(checkpoint.thread_id, WRITE_LOCK_FILE, self.lock_timeout):
            await run_blocking(self._write_progress, checkpoint)

    def _unlink(self, thread_id: str) -> None:
        path = self.path(thread_id)
        for target in (path, path.with_name(PROGRESS_FILE)):
            try:
                os.unlink(target)
            except FileNotFoundError:
                pass
            except IsADirectoryError:  # a directory in the way (EISDIR on Linux)
                raise _not_a_file(target) from None
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

    @contextlib.asynccontextmanager
    async def thread_lock(
        self,
        thread_id: str,
        *,
        timeout: float | EllipsisType | None = ...,  # noqa: ASYNC109 - a lock wait
    ) -> AsyncIterator[None]:
        """Hold the thread for a whole run (``run.lock``); THREAD_BUSY after the wait.

        The wait is ``lock_timeout`` unless ``timeout`` is given (``None``: forever).
        """
        check_thread_id(thread_id)
        wait = self.lock_timeout if timeout is ... else timeout
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._locked(thread_id, RUN_LOCK_FILE, wait))
            except LockTimeoutError as exc:
                raise ThreadBusyError(
                    f"thread {thread_id!r} is busy: another run holds it ({exc.message})"
                ) from exc
            yield


def _not_a_file(path: Path) -> CheckpointCorruptError:
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is not a file (a directory is in its place); "
        "it was left untouched: remove it to continue"
    )


def _check_checkpoint(checkpoint: object) -> None:
    if not isinstance(checkpoint, ThreadCheckpoint):
        raise InvalidArgumentError(
            f"save() takes a ThreadCheckpoint, not {type(checkpoint).__name__}"
        )
    check_thread_id(checkpoint.thread_id)


def _check_well_formed(checkpoint: ThreadCheckpoint) -> None:
    problems = well_formed_problems(checkpoint.messages)
    if problems:
        raise InvalidArgumentError(
            f"checkpoint messages of thread {checkpoint.thread_id!r} are not well formed: "
            + "; ".join(problems[:3])
        )
