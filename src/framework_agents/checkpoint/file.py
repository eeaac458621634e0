"""Checkpoints as files, safe across tasks, processes and crashes: :class:`FileCheckpointer`."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import stat
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from .._crypto import (
    SEALED_JSON_PREFIX,
    Cipher,
    Place,
    is_sealed,
    is_sealed_json_string,
    sealed_json_envelope,
    sealed_without_cipher,
)
from .._fs import atomic_write, sweep_temp_files
from .._persist import (
    FileIdent,
    OddFileError,
    TooLargeError,
    check_seconds,
    file_ident,
    ident_or_none,
    io_error,
    mark_landed,
    plain_messages,
    read_document,
    run_blocking,
    stored_prefix,
)
from .._retention import check_older_than, check_ttl, waits_for_approval
from ..errors import (
    AgentError,
    CheckpointCorruptError,
    InvalidArgumentError,
    LockTimeoutError,
    ThreadBusyError,
)
from ..messages import Message
from ._base import HeldThread, ThreadLockBase, held_then_loaded
from ._file_format import (
    OVERLAY_FIELDS,
    Enveloped,
    Progress,
    canonical,
    canonical_enveloped,
    corrupt,
    envelope,
    find_envelope,
    split_envelope,
    strict_json,
)
from ._journal import (
    OVERLAY,
    Delta,
    JournalView,
    append_delta,
    apply_deltas,
    journal_token,
    read_journal,
)
from ._values import (
    check_checkpoint,
    check_new_part,
    detached,
    kept_fields,
    messages_read_back_as_is,
)
from .lock import (
    FileLockHold,
    LockDirectoryMissingError,
    call_with_file_lock,
    hold_file_lock,
)
from .model import (
    BASE_CHECKPOINT_FORMAT_VERSION,
    CHECKPOINT_FORMAT_VERSION,
    ThreadCheckpoint,
    check_thread_id,
    to_json,
)

__all__ = ["FileCheckpointer"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

CHECKPOINT_FILE = "checkpoint.json"
JOURNAL_FILE = "checkpoint.journal"
#: Default bound on the bytes of a thread's checkpoint plus its journal.
DEFAULT_MAX_BYTES = 256 << 20
#: Default bound on the messages and tool calls (objects with an ``"id"``) of a thread's
#: checkpoint, and of its journal, each (counted before parsing).
DEFAULT_MAX_ITEMS = 200_000
#: The journal is folded once it outgrows this fraction of checkpoint.json...
FOLD_RATIO = 0.5
#: ...and this many bytes.
FOLD_MIN_BYTES = 64 << 10
PROGRESS_FILE = "progress.json"
WRITE_LOCK_FILE = "checkpoint.lock"
RUN_LOCK_FILE = "run.lock"
#: The steps ``hold_thread`` fuses: a subclass overriding one gets them one by one.
_FUSED = ("load", "save", "thread_lock")

#: How many threads' paths a checkpointer keeps made (``_Files``).
_FILES_KEPT = 4096


@dataclass(frozen=True, slots=True)
class _Files:
    """The paths of one thread's files."""

    directory: Path
    doc: Path
    journal: Path
    progress: Path
    write_lock: Path


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class _View:
    """What the files hold, as :meth:`FileCheckpointer.load` gives it.

    One value, which a save replaces whole (loads take no lock, so they must never see
    half of a save). ``count >= 0``: the messages are the first ``count`` of the record
    (``_Known.messages``, which only ever grows past them, or is replaced) and
    ``checkpoint.messages`` is empty; a save then costs no copy of the history. ``-1``:
    they are ``checkpoint.messages`` (the record holds objects a read would not give).
    """

    checkpoint: ThreadCheckpoint
    count: int = -1

    def messages(self, record: list[Message]) -> list[Message]:
        """A new list of its messages (``record``: the ``_Known.messages`` it counts)."""
        return list(self.checkpoint.messages) if self.count < 0 else record[: self.count]

    def value(self, record: list[Message]) -> ThreadCheckpoint:
        """A detached copy of the checkpoint (``record``: the ``_Known.messages`` it counts)."""
        return detached(self.checkpoint, self.messages(record))


@dataclass(slots=True)
class _Known:
    """A thread's files as this instance last wrote or read them (under the write lock)."""

    signature: FileIdent
    digest: str  # the token the journal binds to (version 3) or the file's digest (older)
    messages: list[Message] = field(default_factory=list)  # the objects last saved or loaded
    journal: JournalView = field(default_factory=lambda: JournalView([], None, 0))
    doc_bytes: int = 0
    progress: bool = False  # a progress.json (written by an earlier release) is there
    view: _View | None = None  # what the files hold, for load()
    # Whether ``messages`` are the very objects a read gives (a save's ``_View`` may then
    # take them from there instead of a copy of the history).
    exact: bool = False
    # Whether ``messages`` are all plain (``plain_messages``): only then may a save's
    # prefix check trust them (a message class with an ``==`` of its own decides it).
    plain: bool = True
    # A file of a layout before v3 (no checksum, no folded journal): the next save folds.
    legacy: bool = False


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A ``checkpoint.json`` as read: the checkpoint and the journal tokens it names."""

    checkpoint: ThreadCheckpoint
    token: str
    folded: str | None  # None: a layout before v3, which named no folded journal


#: How far into a ``checkpoint.json`` a sealed payload starts (after the v3 envelope's
#: header): a plain reader looks that far for one before parsing.
_SEALED_LOOK = 512


def _sealed_file(data: bytes) -> bool:
    """Whether a ``checkpoint.json`` holds a sealed payload (a plain one is an object)."""
    parts = split_envelope(data)
    return parts is not None and is_sealed_json_string(parts[2])


class FileCheckpointer(ThreadLockBase):
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
        self.root = Path(root)
        self.lock_timeout = lock_timeout
        self.stale_after = stale_after
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise InvalidArgumentError(f"max_bytes must be a positive int, not {max_bytes!r}")
        self.max_bytes = max_bytes
        if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
            raise InvalidArgumentError(f"max_items must be a positive int, not {max_items!r}")
        self.max_items = max_items
        self.ttl = check_ttl(ttl)
        self._known: dict[str, _Known] = {}
        self._files_of: dict[str, _Files] = {}
        self._files_root = self.root
        self._cipher: Cipher | None = None
        # Threads being rotated: [may take plain values, met a value not under current].
        self._rotating: dict[str, list[bool]] = {}
        self.use_cipher(cipher)

    def use_cipher(self, cipher: Cipher | None) -> None:
        """Seal every checkpoint this instance writes, and open those it reads."""
        if cipher is not None and not isinstance(cipher, Cipher):
            raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
        self._cipher = cipher
        self._known = {}

    # -- sealing -------------------------------------------------------------------------

    def _doc_place(self, thread_id: str, token: str) -> Place:
        return Place("checkpoint.file", thread_id, token, CHECKPOINT_FORMAT_VERSION)

    def _delta_place(self, thread_id: str, token: str, index: int) -> Place:
        return Place("checkpoint.delta", thread_id, f"{token}:{index}", CHECKPOINT_FORMAT_VERSION)

    def _plain_found(self, thread_id: str, place: Place) -> None:
        """A plain value: taken while migrating the thread, else STORE_INTEGRITY."""
        rotating = self._rotating.get(thread_id)
        if rotating is None or not rotating[0]:
            assert self._cipher is not None
            self._cipher.open(b"{", place)  # raises: plain in an encrypted store
        else:
            rotating[1] = True

    def _note_key(self, thread_id: str, envelope: bytes) -> None:
        rotating = self._rotating.get(thread_id)
        cipher = self._cipher
        if rotating is not None and cipher is not None and not cipher.is_current(envelope):
            rotating[1] = True

    def _open_delta(self, thread_id: str, token: str, payload: bytes, index: int) -> bytes:
        assert self._cipher is not None
        place = self._delta_place(thread_id, token, index)
        if not is_sealed(payload):
            self._plain_found(thread_id, place)
            return payload
        self._note_key(thread_id, payload)
        return self._cipher.open(payload, place)

    def _unsealed(self, thread_id: str, data: bytes) -> tuple[bytes, str, str] | None:
        """A sealed ``checkpoint.json``'s checkpoint JSON, token and folded token.

        The plain reader then reads the checkpoint as it reads the one inside a plain
        file's envelope (fast paths included), without the envelope rebuilt around it or
        its checksum computed twice: the authentication binds the token and is stronger.
        A plain file gives ``None`` while the thread is migrated, else STORE_INTEGRITY.
        """
        cipher = self._cipher
        assert cipher is not None
        parts = split_envelope(data)
        payload = parts[2] if parts is not None else b""
        if parts is None or not is_sealed_json_string(payload):
            self._plain_found(thread_id, Place("checkpoint.file", thread_id))
            return None
        token, folded, _ = parts
        place = self._doc_place(thread_id, token)
        sealed = sealed_json_envelope(payload, place)  # decoded once, with no copy
        self._note_key(thread_id, sealed)
        return cipher.open(sealed, place), token, folded

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"FileCheckpointer({str(self.root)!r})"

    def thread_dir(self, thread_id: str) -> Path:
        """The directory of one thread (validates the id: THREAD_ID_INVALID)."""
        return self._files(thread_id).directory

    def path(self, thread_id: str) -> Path:
        """Where the thread's checkpoint is stored."""
        return self._files(thread_id).doc

    def _files(self, thread_id: str) -> _Files:
        """The paths of a thread's files (validates the id), kept for the busiest threads."""
        files = self._files_of.get(thread_id) if self._files_root is self.root else None
        if files is None:
            directory = self.root / "threads" / check_thread_id(thread_id)
            files = _Files(
                directory,
                directory / CHECKPOINT_FILE,
                directory / JOURNAL_FILE,
                directory / PROGRESS_FILE,
                directory / WRITE_LOCK_FILE,
            )
            if len(self._files_of) >= _FILES_KEPT or self._files_root is not self.root:
                self._files_of, self._files_root = {}, self.root
            self._files_of[thread_id] = files
        return files

    # -- reading -------------------------------------------------------------------------

    def _parse_file(self, thread_id: str, path: Path, data: bytes) -> _Parsed:
        """The checkpoint of a ``checkpoint.json`` of any layout and the tokens it names."""
        opened = None
        if self._cipher is not None:
            opened = self._unsealed(thread_id, data)
        elif data.find(SEALED_JSON_PREFIX, 0, _SEALED_LOOK) != -1 and _sealed_file(data):
            raise sealed_without_cipher(f"checkpoint {str(path)!r}")
        if opened is not None:  # the checkpoint alone, as if cut out of its envelope
            data = opened[0]
        items = data.count(b'"id":')
        if items > self.max_items:
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} holds {items} messages and tool calls, more than "
                f"the bound of {self.max_items} (FileCheckpointer(max_items=...)); "
                "it was left untouched"
            )
        if opened is not None:
            found: Enveloped | None = Enveloped(0, len(data), opened[1], opened[2])
        else:
            found = find_envelope(path, data)
        if found is None:
            return _Parsed(self._parse(thread_id, path, data), _digest(data), None)
        # Parsed from the file's bytes as they are: no copy of the checkpoint's.
        known = canonical_enveloped(data, found)
        if known is not None:
            checkpoint = self._parse(thread_id, path, b"", known)
        else:
            checkpoint = self._parse(thread_id, path, data[found.start : found.stop])
        return _Parsed(checkpoint, found.token, found.folded)

    def _parse(
        self,
        thread_id: str,
        path: Path,
        data: bytes,
        known: ThreadCheckpoint | None = None,
    ) -> ThreadCheckpoint:
        """The checkpoint ``data`` holds (``known``: already read in its canonical form)."""
        checkpoint = known if known is not None else canonical(data)
        versioned = True  # a canonical document has every key, version included
        try:
            if checkpoint is None:
                doc = strict_json(path, data)
                checkpoint = ThreadCheckpoint.model_validate(doc)
                versioned = isinstance(doc, dict) and "version" in doc
        except ValidationError as exc:
            raise corrupt(path, exc) from exc
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
        return _as_value(checkpoint)

    def _parse_progress(self, thread_id: str, path: Path, data: bytes) -> Progress:
        try:
            progress = Progress.model_validate(strict_json(path, data))
        except ValidationError as exc:
            raise corrupt(path, exc) from exc
        if progress.thread_id != thread_id:
            raise CheckpointCorruptError(
                f"checkpoint {str(path)!r} belongs to thread {progress.thread_id!r}"
            )
        return progress

    def _read_progress(self, thread_id: str) -> Progress | None:
        path = self.thread_dir(thread_id) / PROGRESS_FILE
        try:
            found = read_document(path, max_bytes=self.max_bytes)
        except (OddFileError, TooLargeError) as exc:
            raise _unreadable(path, exc) from None
        if found is not None and self._cipher is not None:
            self._plain_found(thread_id, Place("checkpoint.progress", thread_id))
        return None if found is None else self._parse_progress(thread_id, path, found[0])

    def _read(self, thread_id: str) -> ThreadCheckpoint | None:
        path = self.path(thread_id)
        try:
            found = read_document(path, max_bytes=self.max_bytes)
        except OddFileError as exc:
            if exc.reason.startswith("a parent directory"):
                return None  # a file where a directory belongs holds no checkpoint
            if exc.reason.startswith("a directory"):
                raise _not_a_file(path) from None
            raise _unreadable(path, exc) from None
        except TooLargeError as exc:
            raise _unreadable(path, exc) from None
        if found is None:
            self._known.pop(thread_id, None)
            return None
        data, st = found
        parsed = self._parse_file(thread_id, path, data)
        checkpoint = parsed.checkpoint
        progress = self._read_progress(thread_id)
        if progress is not None and progress.base == _digest(data):
            fields = {name: getattr(checkpoint, name) for name in ThreadCheckpoint.model_fields}
            fields.update({name: getattr(progress, name) for name in OVERLAY_FIELDS})
            try:
                checkpoint = ThreadCheckpoint.model_validate(fields)
            except ValidationError as exc:
                raise corrupt(path.with_name(PROGRESS_FILE), exc) from exc
        journal_path = path.with_name(JOURNAL_FILE)
        token = parsed.token
        view = read_journal(
            journal_path,
            token,
            parsed.folded,
            max_bytes=self.max_bytes - len(data),
            max_items=self.max_items,
            opener=None
            if self._cipher is None
            else (lambda payload, i: self._open_delta(thread_id, token, payload, i)),
        )
        checkpoint = apply_deltas(checkpoint, view.deltas, journal_path)
        self._known[thread_id] = _Known(
            file_ident(st),
            parsed.token,
            list(checkpoint.messages),
            view,
            len(data),
            progress is not None,
            # The record holds the messages just read: the view counts them.
            _View(checkpoint.model_copy(update={"messages": []}), len(checkpoint.messages)),
            exact=True,
            legacy=parsed.folded is None,
        )
        return detached(checkpoint)

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

    def _load_sync(self, thread_id: str) -> ThreadCheckpoint | None:
        """The checkpoint: from what this instance knows when the files are unchanged."""
        known = self._known.get(thread_id)
        if known is not None and known.view is not None and self._unchanged(thread_id):
            # The view before the record: a save extends the record, then replaces the view.
            # (A load never changes either: it takes no lock.)
            view = known.view
            return view.value(known.messages)
        return self._read(thread_id)

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

    def _current(self, thread_id: str) -> _Known | None:
        """What is stored, re-read (and validated) unless the files are as last seen.

        Refuses (CHECKPOINT_CORRUPT) files that changed and are unreadable, so a write
        never replaces a corrupt document, progress file or journal.
        """
        if self._unchanged(thread_id):
            return self._known.get(thread_id)
        self._read(thread_id)
        return self._known.get(thread_id)

    def _unchanged(self, thread_id: str) -> bool:
        """Whether the thread's files are exactly as this instance last read or wrote them."""
        known = self._known.get(thread_id)
        files = self._files(thread_id)
        if (
            known is None
            or known.progress
            or ident_or_none(files.doc) != known.signature
            or os.path.lexists(files.progress)
        ):
            return False
        jsig = ident_or_none(files.journal)
        view = known.journal
        if jsig is None:
            return view.key is None
        return view.key == jsig[:2] and view.stamp == jsig[2:]

    def _write(self, checkpoint: ThreadCheckpoint, payload: bytes) -> None:
        """Publish the whole checkpoint (a fold): the journal and progress.json go stale."""
        thread_id = checkpoint.thread_id
        files = self._files(thread_id)
        path, journal = files.doc, files.journal
        known = self._current(thread_id)
        # The journal on disk (if any) is the one this document folds: named in it, it is
        # the only journal a reader may take for stale if removing it below fails.
        folded = known.journal.token if known is not None and known.journal.key else None
        if folded is None:
            folded = journal_token(journal)
        token = uuid.uuid4().hex
        plain = payload
        if self._cipher is not None:
            sealed = self._cipher.seal_text(payload, self._doc_place(thread_id, token))
            payload = b'"%s"' % sealed.encode("ascii")
        head, tail = envelope(token, folded or "", payload)
        atomic_write(path, [head, payload, tail])
        try:
            st = os.stat(path)
        except OSError as exc:
            raise mark_landed(exc) from None
        read = functools.partial(ThreadCheckpoint.model_validate_json, plain)
        fields, messages, exact = kept_fields(checkpoint, 0, read)
        self._known[thread_id] = _Known(
            file_ident(st),
            token,
            list(checkpoint.messages),
            doc_bytes=len(head) + len(payload) + len(tail),
            view=_counted_view(checkpoint, fields, len(messages))
            if exact
            else _own_view(checkpoint, fields, messages),
            exact=exact,
            plain=exact or plain_messages(checkpoint.messages),
        )
        for stale in (journal, files.progress):
            try:
                os.unlink(stale)  # bound to the replaced checkpoint
            except FileNotFoundError:
                pass
            except OSError as exc:  # harmless: its digest no longer matches
                logger.warning("could not remove the stale %s: %s", stale, exc)
        grace = max(60.0, self.stale_after)
        sweep_temp_files(path, grace_seconds=grace)
        sweep_temp_files(journal, grace_seconds=grace)
        sweep_temp_files(files.progress, grace_seconds=grace)

    def _save_sync(self, checkpoint: ThreadCheckpoint) -> None:
        """Append a delta when the stored history is a prefix of the new one, else fold."""
        base = self._delta_base(checkpoint)
        if base is None:
            self._fold(checkpoint)
            return
        known, keep = base
        check_new_part(checkpoint, keep)
        fields = {name: getattr(checkpoint, name) for name in OVERLAY}
        payload = to_json(Delta(keep=keep, messages=list(checkpoint.messages[keep:]), **fields))
        outgrown = max(FOLD_RATIO * known.doc_bytes, FOLD_MIN_BYTES)
        if known.journal.end + len(payload) > outgrown and self._folded_if_room(checkpoint, known):
            return
        self._append(checkpoint, known, keep, payload)

    def _delta_base(self, checkpoint: ThreadCheckpoint) -> tuple[_Known, int] | None:
        """What this instance knows of the stored thread and how many messages a delta keeps.

        ``None``: the checkpoint must be folded (nothing known, a ``progress.json``, a
        history a delta cannot carry, an older layout, or a stored history that is not a
        prefix of the new one).
        """
        known = self._current(checkpoint.thread_id)
        if known is None or known.progress or not known.plain or known.legacy:
            return None
        keep = len(known.messages)
        # An exact record takes only copies a read would give as they are (a lazy view
        # hands its objects out).
        may_adopt = messages_read_back_as_is if known.exact else None
        if stored_prefix(known.messages, checkpoint.messages, may_adopt) != keep:
            return None
        return known, keep

    def _folded_if_room(self, checkpoint: ThreadCheckpoint, known: _Known) -> bool:
        """Fold a checkpoint whose journal outgrew its document; ``False``: no room for it.

        With no room for the whole checkpoint (nothing published) the delta needs only its
        own bytes: the caller appends it, and a later save folds once there is room.
        """
        try:
            self._fold(checkpoint)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or getattr(
                exc, "may_have_landed", False
            ):
                raise
            logger.warning("thread %s: no room to fold (%s); appending", checkpoint.thread_id, exc)
            self._known[checkpoint.thread_id] = known
            return False
        return True

    def _append(
        self, checkpoint: ThreadCheckpoint, known: _Known, keep: int, payload: bytes
    ) -> None:
        """Append the delta ``payload`` (messages after ``keep``) to the thread's journal."""
        thread_id = checkpoint.thread_id
        added = checkpoint.messages[keep:]
        journal = self._files(thread_id).journal
        view = known.journal
        plain = payload
        if self._cipher is not None:
            index = 0 if view.key is None or view.end < 0 else view.count
            place = self._delta_place(thread_id, known.digest, index)
            payload = self._cipher.seal(payload, place)
        self._known.pop(thread_id, None)  # unknown until the append returns
        known.journal = append_delta(journal, known.digest, view, payload)
        known.messages += added  # its own list: extended, never copied (the history's size)
        known.plain = plain_messages(added)
        if known.view is not None:  # what a read would give
            self._extend_view(checkpoint, known, known.view, keep, plain)
        self._known[thread_id] = known

    @staticmethod
    def _extend_view(
        checkpoint: ThreadCheckpoint, known: _Known, view: _View, keep: int, payload: bytes
    ) -> None:
        """Bring ``known``'s ``view`` (what a read would give) past the appended delta."""
        read = functools.partial(Delta.model_validate_json, payload)
        fields, tail, exact = kept_fields(checkpoint, keep, read)
        known.exact = known.exact and exact
        if known.exact:
            known.view = _counted_view(checkpoint, fields, len(known.messages))
        else:
            kept = view.messages(known.messages)[:keep]
            kept += tail
            known.view = _own_view(checkpoint, fields, kept)

    def _fold(self, checkpoint: ThreadCheckpoint) -> None:
        check_new_part(checkpoint, 0)
        # Published as version 2: a journal may follow it, which a release that cannot
        # apply one must not ignore (it refuses the document instead).
        published = checkpoint.model_copy(update={"version": CHECKPOINT_FORMAT_VERSION})
        self._write(checkpoint, to_json(published))

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

    def _rotate_sync(self, thread_id: str, migrate: bool) -> int:
        self._rotating[thread_id] = state = [migrate, False]
        try:
            self._known.pop(thread_id, None)
            checkpoint = self._read(thread_id)
        finally:
            del self._rotating[thread_id]
        if checkpoint is None or not state[1]:
            return 0
        self._fold(checkpoint)
        return 1

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
                raise _not_a_file(target)
        for target in targets:
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


def _unreadable(path: Path, exc: OddFileError | TooLargeError) -> CheckpointCorruptError:
    """The error of a thread file that is not a readable file, or is over ``max_bytes``."""
    if isinstance(exc, TooLargeError):
        return CheckpointCorruptError(
            f"checkpoint {str(path)!r} holds {exc.size} bytes, more than the bound of "
            f"{exc.bound} (FileCheckpointer(max_bytes=...))"
        )
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is unreadable ({exc.reason}); it was left untouched"
    )


def _not_a_file(path: Path) -> CheckpointCorruptError:
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is not a file (a directory is in its place); "
        "it was left untouched: remove it to continue"
    )


def _counted_view(checkpoint: ThreadCheckpoint, fields: dict[str, Any], count: int) -> _View:
    """The ``_View`` of a save of ``checkpoint``: its messages the record's first ``count``.

    For ``fields`` as ``kept_fields`` gives them when it says the messages are exact.
    """
    return _View(_as_value(checkpoint.model_copy(update={**fields, "messages": []})), count)


def _own_view(
    checkpoint: ThreadCheckpoint, fields: dict[str, Any], messages: list[Message]
) -> _View:
    """The ``_View`` of a save of ``checkpoint`` holding ``messages`` (as a read gives them)."""
    return _View(_as_value(checkpoint.model_copy(update={**fields, "messages": messages})))


def _as_value(checkpoint: ThreadCheckpoint) -> ThreadCheckpoint:
    """The checkpoint as a value, version 1 like every other store's.

    The stored form's version (2: a journal may follow) is the file's business.
    """
    if checkpoint.version == BASE_CHECKPOINT_FORMAT_VERSION:
        return checkpoint
    return checkpoint.model_copy(update={"version": BASE_CHECKPOINT_FORMAT_VERSION})
