"""``FileMemory``: a history in ``<dir>/memory.json`` plus a journal, safe across processes.

A save appends only its new messages to the journal beside the document (one framed,
checksummed record, one ``fdatasync``); when the journal has grown past a fraction of the
document, the whole history is folded into a new ``memory.json`` (windowed, published
atomically), so the bytes written stay linear in what is saved. Every write runs under
an in-process ``asyncio.Lock`` per path and ``flock`` on a sidecar lock file; a load holds
the ``flock`` shared, so it sees a document and its journal from the same moment. The
blocking work runs in a worker thread that a cancel waits for (``run_blocking``): a
cancelled save still finishes or fails whole before the lock is let go. POSIX only
(``fcntl.flock``); on network file systems ``flock`` is only as good as the server.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from itertools import islice
from pathlib import Path
from typing import ParamSpec, TypeVar

from .._crypto import Cipher
from .._persist import (
    Deadline,
    FileIdent,
    LoopLocks,
    OddFileError,
    check_seconds,
    encode_message,
    flock,
    holding,
    ident_or_none,
    io_error,
    make_private_dirs,
    open_lock_file,
    run_blocking,
    same_json_message,
    sweep_temp_files,
)
from ..errors import AgentError, InvalidArgumentError
from ..history import repair_history
from ..messages import Message
from ._base import Appended, base_ids, new_revision
from ._document import DEFAULT_MAX_BYTES, DEFAULT_MAX_ITEMS
from ._journaled import Entries, MemoryFiles, State, messages_of
from ._window import (
    check_max_messages,
    check_messages,
    shape_of,
    window,
    window_start,
)

__all__ = ["FOLD_MIN_BYTES", "FOLD_RATIO", "FileMemory"]

logger = logging.getLogger(__name__)

#: In-process serialisation of writes, by resolved ``memory.json`` path.
_PATH_LOCKS = LoopLocks()

#: The journal is folded into the document once it outgrows this fraction of it...
FOLD_RATIO = 0.5
#: ...and this many bytes (small memories fold rarely).
FOLD_MIN_BYTES = 64 << 10

_P = ParamSpec("_P")
_T = TypeVar("_T")
_Update = Callable[[list[Message]], Awaitable[Sequence[Message]]]


def _close(fd: int | None) -> None:
    """Close a lock file taken for a task that was cancelled meanwhile."""
    if fd is not None:
        os.close(fd)


class FileMemory:
    """A history in ``<dir>`` keeping the newest ``max_messages``; ``save()`` appends.

    Layout of ``dir`` (created ``0700`` on the first save if missing; files ``0600``)::

        <dir>/
          memory.json             {"version": 3, "journal": "<token>", "folded": "<token>",
                                  "check": "<crc32>", "messages": [...]}
          memory.json.journal     header record {"journal": 1, "token": "<token>"}, then
                                  one record per save: a JSON array of the new messages
          memory.json.lock        sidecar locked with flock(); never deleted
          .memory.json.<uuid>.tmp a writer's temp file, renamed over its target

    The memory is ``memory.json`` plus the records of a journal whose token matches it.
    A journal with the token ``memory.json`` names as ``folded`` is stale (left by a writer
    that died before removing it) and ignored; one bound to neither is ``MEMORY_CORRUPT``
    (a damaged document or journal: its saves are never dropped in silence). The
    document's ``check`` covers every other byte of it, tokens included. A torn last
    record (the file ends inside it, or its commit marker was never written) is a save
    that was never acknowledged: it is ignored, and cut by the next save; a complete
    record that fails its checks is ``MEMORY_CORRUPT``. A version-1 or version-2
    ``memory.json`` (layouts before v3) is read and folded into version 3 by the first
    write.

    Saves are idempotent by message id: a message whose id is stored already is not
    appended again, so a retried save (after ``STORAGE_IO`` with ``may_have_landed``)
    never duplicates. :meth:`replace` (the agent's clear-then-save) and :meth:`commit`
    merge under the lock: messages another writer appended since this instance loaded
    (or wrote) are kept after the new history instead of being dropped. :meth:`transact`
    runs a read-modify-write under the lock (what ``CompactedMemory`` uses).

    A corrupt or wrongly shaped file (bad JSON, a damaged record before the journal's
    end, wrong types, unknown keys, NaN, deep nesting, a newer version, more than
    ``max_bytes`` bytes or ``max_items`` messages and tool calls, a symlink, FIFO or
    device in place of a file) raises ``MemoryCorruptError`` (``MEMORY_CORRUPT``) from
    ``load()``, ``save()`` and ``clear()`` alike and is never overwritten. An operating
    system failure raises ``StorageIOError`` (``STORAGE_IO``; ``may_have_landed`` says
    whether the write may have reached the disk anyway).

    The lock: tasks of one event loop take turns; across processes, ``flock`` of
    ``memory.json.lock``, waited for in a way a cancel of the caller ends at once
    (nothing written). ``lock_timeout`` (seconds; ``None``, the default,
    waits as long as it takes) bounds the wait of each call (``LOCK_TIMEOUT``). A load
    takes it shared, so it waits only for a writer. ``transact`` holds it while its
    ``update`` runs, so a bound shorter than a summary takes can fail other writers.
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        max_messages: int = 50,
        *,
        stale_temp_seconds: float = 60.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_items: int = DEFAULT_MAX_ITEMS,
        lock_timeout: float | None = None,
        cipher: Cipher | None = None,
    ) -> None:
        """Create it; arguments are described in the class docstring.

        ``cipher``: seal the document and every journal record at rest, bound to the
        directory's name (``open_store`` binds them to the memory's key instead; see
        ``docs/security.md``).
        """
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
        self.max_bytes: int = check_max_messages(max_bytes, name="max_bytes")
        self.max_items: int = check_max_messages(max_items, name="max_items")
        self.lock_timeout: float | None = check_seconds("lock_timeout", lock_timeout, optional=True)
        self.dir: Path = Path(dir).resolve()
        self.path: Path = self.dir / "memory.json"
        self.journal_path: Path = self.dir / "memory.json.journal"
        self.lock_path: Path = self.dir / "memory.json.lock"
        self._files = MemoryFiles(
            self.dir,
            max_messages=self.max_messages,
            max_bytes=self.max_bytes,
            max_items=self.max_items,
        )
        self._state: State | None = None
        # Ids of the history this instance last loaded or wrote (the base of a merge);
        # None until it loaded or wrote anything.
        self._seen: set[str] | None = None
        # Fragments this instance encoded, by message id, with the message read back from
        # each: a commit re-encodes only messages that changed.
        self._memo: dict[str, tuple[Message, bytes]] = {}
        # The files (document, journal) as this instance last loaded or wrote them, and
        # the revision that stands for them (see ``unchanged``); None: not looked yet.
        self._idents: _Idents | None = None
        self._revision = new_revision()
        self._next_sweep = 0.0  # monotonic time of the next temp-file sweep
        self._folds = 0  # how often a write published a new document
        self.use_cipher(cipher)

    def use_cipher(self, cipher: Cipher | None, where: str | None = None) -> None:
        """Seal what this instance writes and open what it reads with ``cipher``.

        ``where``: the name the sealed values are bound to (default: the directory's
        name; ``open_store`` gives the memory's key).
        """
        if cipher is not None and not isinstance(cipher, Cipher):
            raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
        self._files.cipher = cipher
        self._files.where = self.dir.name if where is None else where
        self._state = None

    async def rotate(self, *, migrate: bool = False) -> int:
        """Publish the history again under ``cipher.current`` if any of it is not; 1 if so.

        Under the write lock, so other writers wait for one fold at most. ``migrate``:
        a plain document or journal (written without ``cipher=``) is sealed too; else it
        is STORE_INTEGRITY.
        """
        if self._files.cipher is None:
            raise InvalidArgumentError("rotate() needs a FileMemory with cipher=")
        async with self._turn() as deadline:
            return await run_blocking(self._guard, "rotate", self._rotate_sync, migrate, deadline)

    def _rotate_sync(self, migrate: bool, deadline: Deadline | None) -> int:
        fd = self._lock_sync(False, exclusive=True, deadline=deadline)
        if fd is None:
            return 0
        files = self._files
        try:
            files.migrating, files.stale_key = migrate, False
            try:
                state = files.refresh(None)
            finally:
                files.migrating = False
            self._state = state
            if not files.stale_key:
                return 0
            self._fold(state.entries)
            self._observe(self._idents_now())
            return 1
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        """A developer-facing description."""
        return f"FileMemory({str(self.dir)!r}, max_messages={self.max_messages})"

    @property
    def _reparses(self) -> int:
        """How often a write parsed a document it already knew (tests, benchmarks)."""
        return self._files.reparses

    # -- the contract ------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """Changes with every write this instance made and every change a load of it saw."""
        return self._revision

    async def unchanged(self, revision: int) -> bool:
        """Whether the files are as this instance left them at ``revision`` (two ``stat``s).

        Any write, by this instance or another writer in any process, replaces the
        document or grows the journal, which changes their size, inode or times.
        """
        known = self._idents
        if revision != self._revision or known is None:
            return False
        now: _Idents = await run_blocking(self._guard, "read", self._idents_now)
        return now == known

    async def save_if(self, messages: Sequence[Message], *, revision: int) -> Appended | None:
        """Append ``messages`` if the files are as this instance left them at ``revision``.

        ``None`` (nothing written) when anyone wrote since, or when a message's id is
        stored already or given twice (an append would then not extend the history as
        given). ``dropped`` is how many of the oldest messages a load no longer returns.
        """
        new = self._encode(messages)
        if len(new.ids) != len(messages):  # an id twice: the store would differ from them
            return None
        async with self._turn() as deadline:
            return await run_blocking(
                self._guard, "save", self._save_if_sync, new, revision, deadline
            )

    async def load(self) -> list[Message]:
        """The stored history, repaired and within ``max_messages``."""
        deadline = Deadline.after(self.lock_timeout)
        stored, self._seen = await run_blocking(self._guard, "read", self._load_sync, deadline)
        return self._view(stored)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append the messages whose ids are not stored yet (one journal record)."""
        new = self._encode(messages)
        async with self._turn() as deadline:
            await run_blocking(self._guard, "save", self._write_sync, new, None, False, deadline)
        logger.debug("%s: saved %d messages", self.path, len(messages))

    async def replace(self, messages: Sequence[Message]) -> None:
        """Make ``messages`` the history, keeping what others appended since this instance read.

        The base of the merge is the history this instance last loaded or wrote; an
        instance that has done neither replaces the whole history.
        """
        await self.commit(messages, base=None)

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """Make ``messages`` the history, merged with what others appended since ``base``.

        ``base`` is the ids of the history the caller started from (default: what this
        instance last loaded or wrote). Stored messages outside ``base`` and outside
        ``messages`` were appended by another writer meanwhile: they are kept, after
        ``messages``. Stored messages in ``base`` but not in ``messages`` are removed.
        """
        new = self._encode(messages)
        ids = None if base is None else base_ids(base)
        async with self._turn() as deadline:
            await run_blocking(self._guard, "save", self._write_sync, new, ids, True, deadline)

    async def clear(self) -> None:
        """Forget the stored history (publishes an empty document; a corrupt file raises)."""
        async with self._turn() as deadline:
            await run_blocking(self._guard, "clear", self._clear_sync, deadline)

    async def transact(self, update: _Update) -> None:
        """Run ``update(history)`` and store its result, holding the lock throughout.

        ``history`` is what :meth:`load` would return; the result replaces it (merged
        like :meth:`commit`, though nothing can be appended meanwhile). Other writers,
        in any process, wait until the result is stored.
        """
        async with self._turn() as deadline:
            fd = await run_blocking(
                self._guard, "lock", self._lock_sync, True, None, deadline, undo=_close
            )
            assert fd is not None
            try:
                stored = await run_blocking(self._guard, "read", self._stored_sync)
                result = await update(self._view(stored))
                new = self._encode(result)
                base = {m.id for m in stored}
                await run_blocking(self._guard, "save", self._commit_transacted, new, base)
            finally:
                os.close(fd)

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[Deadline | None]:
        """This loop's turn at the file, for a writer; yields the call's deadline.

        The same deadline then bounds the wait for other processes (the flock).
        """
        deadline = Deadline.after(self.lock_timeout)
        async with holding(_PATH_LOCKS.get(self.path), deadline, self.lock_path):
            yield deadline

    def _view(self, stored: list[Message]) -> list[Message]:
        """What a load returns: the stored history windowed (as a fold would), repaired.

        ``bounded_view(window(stored))`` without its copies: ``stored`` is this call's own
        list, and a window that cuts nothing would only copy it.
        """
        bound = self.max_messages
        if len(stored) > bound:
            stored = window(stored, bound)
        repaired = repair_history(stored)
        return repaired if len(repaired) <= bound else window(repaired, bound)

    # -- encoding (caller's thread, before any I/O) --------------------------------------

    def _encode(self, messages: Sequence[Message]) -> Entries:
        """Fragments, ids and shapes of messages to store (checked, deduplicated, no I/O).

        A message this instance encoded before reuses its fragment when it is still
        exactly what was encoded (compared with the read-back copy, so changes made in
        place are seen); only the others are serialised and checked.
        """
        new = check_messages(messages)
        memo = self._memo
        fresh: dict[str, tuple[Message, bytes]] = {}
        out = Entries()
        for msg in new:
            if msg.id in out.idset:
                continue  # the first of two messages with one id wins
            known = memo.get(msg.id)
            if known is not None and same_json_message(known[0], msg):
                fragment = known[1]
            else:
                fragment, back = encode_message(msg)
                fresh[msg.id] = (back, fragment)
            out.add(msg.id, fragment, shape_of(msg))
        if fresh:  # only once every message encoded: a refused one leaves the memo as it was
            memo.update(fresh)
            # Keep the newest entries, a window's worth and more; cut in batches, so a save
            # costs what it adds, not the memo's size.
            limit = 2 * self.max_messages
            if len(memo) > limit + max(limit // 2, 64):
                self._memo = dict(islice(memo.items(), len(memo) - limit, None))
        return out

    # -- blocking parts, run in a worker thread ------------------------------------------

    def _guard(self, action: str, fn: Callable[_P, _T], *args: _P.args, **kw: _P.kwargs) -> _T:
        """Run ``fn``; an ``OSError`` becomes ``STORAGE_IO``, odd files ``MEMORY_CORRUPT``."""
        try:
            return fn(*args, **kw)
        except AgentError:
            raise
        except NotADirectoryError:
            raise InvalidArgumentError(
                f"FileMemory dir {str(self.dir)!r} is not a directory"
            ) from None
        except OddFileError as exc:
            raise self._files.corrupt(exc.path, exc.reason) from None
        except OSError as exc:
            if action != "read":
                self._state = None  # what is on disk is unknown now: re-read next time
                self._idents, self._revision = None, new_revision()
            raise io_error(exc, action=action, key="memory.json", root=self.dir) from exc

    def _lock_sync(
        self, create: bool, exclusive: bool | None = None, deadline: Deadline | None = None
    ) -> int | None:
        """The lock file held (``None``: there is none and ``create`` is false).

        Exclusive for a writer, shared for a reader; ``exclusive`` defaults to ``create``
        (a writer makes the file when it is missing, a reader does not need to). A wait
        past ``deadline`` is ``LOCK_TIMEOUT``; a cancel of the caller ends it.
        """
        exclusive = create if exclusive is None else exclusive
        fd = open_lock_file(self.lock_path, create=False, shared=not exclusive)
        if fd is None and create:
            make_private_dirs(self.dir)
            fd = open_lock_file(self.lock_path, create=True)
        if fd is not None:
            try:
                flock(fd, exclusive=exclusive, deadline=deadline, name=self.lock_path)
            except BaseException:
                os.close(fd)
                raise
        return fd

    def _load_sync(self, deadline: Deadline | None) -> tuple[list[Message], set[str]]:
        fd = self._lock_sync(False, deadline=deadline)
        try:
            idents = self._idents_now()  # writers wait for the shared lock we hold
            messages = self._files.read_messages()
            self._observe(idents)  # under the lock: save_if checks under it too
        finally:
            if fd is not None:
                os.close(fd)
        return messages

    def _idents_now(self) -> _Idents:
        return (ident_or_none(self.path), ident_or_none(self.journal_path))

    def _observe(self, idents: _Idents) -> None:
        """The files are ``idents`` now, as this instance knows: a new revision if changed.

        The first look keeps the revision: until then it stood for no files at all (no
        ``unchanged`` holds for it), so nobody can hold a history under it.
        """
        if idents != self._idents:
            if self._idents is not None:
                self._revision = new_revision()
            self._idents = idents

    def _save_if_sync(
        self, new: Entries, revision: int, deadline: Deadline | None
    ) -> Appended | None:
        if revision != self._revision or self._idents is None:
            return None
        fd = self._lock_sync(True, deadline=deadline)
        assert fd is not None  # created when missing
        try:
            # Again under the lock: a load may have seen another writer meanwhile.
            if revision != self._revision or self._idents_now() != self._idents:
                return None  # another writer: the caller's history is not what is stored
            state = self._refresh()
            stored = state.entries
            if any(msg_id in stored.idset for msg_id in new.ids):
                return None
            before = stored.start
            after = window_start(stored.shapes + new.shapes, self.max_messages, before)
            if new.ids:
                if self._seen is not None:
                    self._seen.update(new.ids)
                self._extend(state, new)
                self._observe(self._idents_now())
        finally:
            os.close(fd)
        self._sweep()
        return Appended(self._revision, after - before)

    def _stored_sync(self) -> list[Message]:
        state = self._refresh()
        return messages_of(state.entries.kept())

    def _refresh(self) -> State:
        state = self._files.refresh(self._state)
        self._state = state
        return state

    def _write_sync(
        self, new: Entries, base: set[str] | None, merge: bool, deadline: Deadline | None
    ) -> None:
        fd = self._lock_sync(True, deadline=deadline)
        try:
            if merge:
                self._commit_locked(new, base)
            else:
                self._append_locked(new)
            self._observe(self._idents_now())
        finally:
            if fd is not None:
                os.close(fd)
        self._sweep()

    def _append_locked(self, new: Entries) -> None:
        state = self._refresh()
        fresh = Entries()
        for i, msg_id in enumerate(new.ids):
            if msg_id not in state.entries.idset:
                fresh.add(msg_id, new.frags[i], new.shapes[i])
        if self._seen is not None:
            self._seen.update(new.ids)
        if fresh.ids:
            self._extend(state, fresh)

    def _commit_locked(self, new: Entries, base: set[str] | None) -> None:
        state = self._refresh()
        stored = state.entries
        if base is None:
            base = self._seen if self._seen is not None else stored.idset
        result = new.copy()
        # Only what a load can see is kept: entries the window already cut (they stay in
        # the file until a fold) were nobody's to merge.
        for i in range(stored.start, len(stored.ids)):
            msg_id = stored.ids[i]
            if msg_id not in base and msg_id not in result.idset:
                result.add(msg_id, stored.frags[i], stored.shapes[i])
        self._seen = set(result.ids)
        n = len(stored.ids) - stored.start
        if state.doc_ident is not None and _extends(result, stored):
            if len(result.ids) > n:
                self._extend(state, result.tail(n))
            return
        self._fold(result)

    def _commit_transacted(self, new: Entries, base: set[str]) -> None:
        self._commit_locked(new, base)
        self._observe(self._idents_now())

    def _extend(self, state: State, fresh: Entries) -> None:
        """Append ``fresh`` to the journal, or fold when the journal has grown enough.

        A fold the disk has no room for (``ENOSPC``, ``EDQUOT``: nothing published) is
        not retried at every save: the journal takes the record instead, which needs
        only its own bytes, and a later save folds once there is room.
        """
        size = sum(len(f) for f in fresh.frags) + len(fresh.frags) + 17
        count = len(state.entries.ids) + len(fresh.ids)
        if (
            not state.appendable()
            or state.journal_end + size > max(FOLD_RATIO * state.doc_bytes, FOLD_MIN_BYTES)
            or count > 2 * self.max_messages + 64
        ):
            entries = state.entries.copy()
            for i, msg_id in enumerate(fresh.ids):
                entries.add(msg_id, fresh.frags[i], fresh.shapes[i])
            try:
                self._fold(entries)
                return
            except OSError as exc:
                if not (_no_room(exc) and state.appendable()):
                    raise
                logger.warning("%s: no room to fold (%s); appending instead", self.path, exc)
        self._state = None  # unknown until the append returns
        self._state = self._files.append(state, fresh)

    def _fold(self, entries: Entries) -> None:
        state = self._state
        folded = None if state is None else state.journal_token
        self._state = None  # unknown until the publish returns
        self._state = self._files.publish(entries, folded)
        self._folds += 1

    def _clear_sync(self, deadline: Deadline | None) -> None:
        # A writer: exclusive, or a load (shared) could read the old document, then find
        # the journal it needs removed by this fold (a state older than acknowledged).
        fd = self._lock_sync(False, exclusive=True, deadline=deadline)
        if fd is None:
            if not self._files.doc.exists():
                self._seen = set()
                return  # clear() of a memory that was never written
            fd = self._lock_sync(True, deadline=deadline)
        try:
            state = self._refresh()
            if state.doc_ident is not None or state.stale or state.journal_key is not None:
                self._fold(Entries())
            self._seen = set()
            self._observe(self._idents_now())
        finally:
            if fd is not None:
                os.close(fd)

    def _sweep(self) -> None:
        # A temp file only becomes removable once it is older than the grace period, so
        # scanning the directory more than about once a second gains nothing; with a
        # grace of 0 every save sweeps.
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(1.0, self.stale_temp_seconds)
        for target in (self.path, self.journal_path):
            try:
                sweep_temp_files(target, grace_seconds=self.stale_temp_seconds)
            except OSError as exc:
                # The save itself succeeded; a temp file we may not delete is not its failure.
                logger.warning("could not sweep temp files next to %s: %s", target, exc)


#: The idents of the document and the journal (``None``: the file does not exist).
_Idents = tuple[FileIdent | None, FileIdent | None]


def _no_room(exc: OSError) -> bool:
    """Whether ``exc`` says the disk (or quota) is full, and nothing was published."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return full and not getattr(exc, "may_have_landed", False)


def _extends(result: Entries, stored: Entries) -> bool:
    """Whether ``result`` is what ``stored`` holds (same ids, same bytes) followed by more."""
    start = stored.start
    n = len(stored.ids) - start
    if len(result.ids) < n or result.ids[:n] != stored.ids[start:]:
        return False
    return all(a is b or a == b for a, b in zip(result.frags, stored.frags[start:], strict=False))
