"""The blocking reads of a ``FileCheckpointer`` (each run in a worker thread).

:class:`FileReader` knows where a thread's files are, reads and validates them (any
layout, sealed or plain), and keeps what this instance last saw of them (``Known``): a
load from unchanged files costs no read, and a write never replaces a corrupt file.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from .._crypto import SEALED_JSON_PREFIX, Cipher, Place, sealed_without_cipher
from .._persist import (
    OddFileError,
    SealedReader,
    TooLargeError,
    file_ident,
    ident_or_none,
    read_document,
    sealed_payload,
)
from ..errors import AgentError, CheckpointCorruptError
from ._file_format import (
    OVERLAY_FIELDS,
    Enveloped,
    Progress,
    canonical,
    canonical_enveloped,
    corrupt,
    find_envelope,
    split_envelope,
    strict_json,
)
from ._file_records import (
    CHECKPOINT_FILE,
    JOURNAL_FILE,
    PROGRESS_FILE,
    Files,
    Known,
    Parsed,
    View,
    as_value,
    digest,
    not_a_file,
    unreadable,
)
from ._journal import apply_deltas, read_journal
from ._values import detached
from .model import CHECKPOINT_FORMAT_VERSION, ThreadCheckpoint, check_thread_id

__all__ = ["FileReader"]

#: How many threads' paths a checkpointer keeps made (``Files``).
_FILES_KEPT = 4096

#: How far into a ``checkpoint.json`` a sealed payload starts (after the v3 envelope's
#: header): a plain reader looks that far for one before parsing.
_SEALED_LOOK = 512


class FileReader:
    """The threads under ``root``: their paths, and their files read and validated.

    ``max_bytes`` bounds a stored checkpoint plus its journal, ``max_items`` the messages
    and tool calls in the checkpoint and in its journal, each (both checked before
    parsing: CHECKPOINT_CORRUPT). ``_cipher``: sealed values are opened with it.
    """

    def __init__(self, root: Path, *, stale_after: float, max_bytes: int, max_items: int) -> None:
        """The files under ``root`` (the arguments checked by the caller)."""
        self.root = root
        self.stale_after = stale_after
        self.max_bytes = max_bytes
        self.max_items = max_items
        self._known: dict[str, Known] = {}
        self._files_of: dict[str, Files] = {}
        self._files_root = root
        self._cipher: Cipher | None = None
        # Threads being rotated: how their reads open sealed values (migrating or not),
        # and whether one met a value not under the current key.
        self._rotating: dict[str, SealedReader] = {}

    # -- sealing -------------------------------------------------------------------------

    def _doc_place(self, thread_id: str, token: str) -> Place:
        return Place("checkpoint.file", thread_id, token, CHECKPOINT_FORMAT_VERSION)

    def _delta_place(self, thread_id: str, token: str, index: int) -> Place:
        return Place("checkpoint.delta", thread_id, f"{token}:{index}", CHECKPOINT_FORMAT_VERSION)

    def _sealed_reader(self, thread_id: str) -> SealedReader | None:
        """How a read of the thread opens sealed values (``None``: this instance has no cipher).

        While ``rotate`` reads the thread, its reader (plain values taken when migrating);
        else a plain value is STORE_INTEGRITY.
        """
        if self._cipher is None:
            return None
        reader = self._rotating.get(thread_id)
        return reader if reader is not None else SealedReader(self._cipher)

    # -- paths ---------------------------------------------------------------------------

    def thread_dir(self, thread_id: str) -> Path:
        """The directory of one thread (validates the id: THREAD_ID_INVALID)."""
        return self._files(thread_id).directory

    def path(self, thread_id: str) -> Path:
        """Where the thread's checkpoint is stored."""
        return self._files(thread_id).doc

    def _files(self, thread_id: str) -> Files:
        """The paths of a thread's files (validates the id), kept for the busiest threads."""
        files = self._files_of.get(thread_id) if self._files_root is self.root else None
        if files is None:
            files = Files.under(self.root / "threads" / check_thread_id(thread_id))
            if len(self._files_of) >= _FILES_KEPT or self._files_root is not self.root:
                self._files_of, self._files_root = {}, self.root
            self._files_of[thread_id] = files
        return files

    # -- reading -------------------------------------------------------------------------

    def _parse_file(
        self, thread_id: str, path: Path, data: bytes, sealed: SealedReader | None
    ) -> Parsed:
        """The checkpoint of a ``checkpoint.json`` of any layout and the tokens it names.

        A sealed one's checkpoint is read as the one inside a plain file's envelope (fast
        paths included), without the envelope rebuilt around it or its checksum computed
        twice: the authentication binds the token and is stronger. A plain file is taken
        while the thread is migrated, else STORE_INTEGRITY.
        """
        opened = None
        if sealed is not None:
            parts = split_envelope(data)
            version = CHECKPOINT_FORMAT_VERSION
            opened = sealed.open_document(parts, "checkpoint.file", thread_id, version)
        elif data.find(SEALED_JSON_PREFIX, 0, _SEALED_LOOK) != -1 and sealed_payload(
            split_envelope(data)
        ):
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
            return Parsed(self._parse(thread_id, path, data), digest(data), None)
        # Parsed from the file's bytes as they are: no copy of the checkpoint's.
        known = canonical_enveloped(data, found)
        if known is not None:
            checkpoint = self._parse(thread_id, path, b"", known)
        else:
            checkpoint = self._parse(thread_id, path, data[found.start : found.stop])
        return Parsed(checkpoint, found.token, found.folded)

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
        return as_value(checkpoint)

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

    def _read_progress(self, thread_id: str, sealed: SealedReader | None) -> Progress | None:
        path = self.thread_dir(thread_id) / PROGRESS_FILE
        try:
            found = read_document(path, max_bytes=self.max_bytes)
        except (OddFileError, TooLargeError) as exc:
            raise unreadable(path, exc) from None
        if found is not None and sealed is not None:
            sealed.plain_found(Place("checkpoint.progress", thread_id))
        return None if found is None else self._parse_progress(thread_id, path, found[0])

    def _read(self, thread_id: str) -> ThreadCheckpoint | None:
        path = self.path(thread_id)
        try:
            found = read_document(path, max_bytes=self.max_bytes)
        except OddFileError as exc:
            if exc.reason.startswith("a parent directory"):
                return None  # a file where a directory belongs holds no checkpoint
            if exc.reason.startswith("a directory"):
                raise not_a_file(path) from None
            raise unreadable(path, exc) from None
        except TooLargeError as exc:
            raise unreadable(path, exc) from None
        if found is None:
            self._known.pop(thread_id, None)
            return None
        data, st = found
        sealed = self._sealed_reader(thread_id)
        parsed = self._parse_file(thread_id, path, data, sealed)
        checkpoint = parsed.checkpoint
        progress = self._read_progress(thread_id, sealed)
        if progress is not None and progress.base == digest(data):
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
            if sealed is None
            else (
                lambda payload, i: sealed.open_record(
                    payload, self._delta_place(thread_id, token, i)
                )
            ),
        )
        checkpoint = apply_deltas(checkpoint, view.deltas, journal_path)
        self._known[thread_id] = Known(
            file_ident(st),
            parsed.token,
            list(checkpoint.messages),
            view,
            len(data),
            progress is not None,
            # The record holds the messages just read: the view counts them.
            View(checkpoint.model_copy(update={"messages": []}), len(checkpoint.messages)),
            exact=True,
            legacy=parsed.folded is None,
        )
        return detached(checkpoint)

    def _load_sync(self, thread_id: str) -> ThreadCheckpoint | None:
        """The checkpoint: from what this instance knows when the files are unchanged."""
        known = self._known.get(thread_id)
        if known is not None and known.view is not None and self._unchanged(thread_id):
            # The view before the record: a save extends the record, then replaces the view.
            # (A load never changes either: it takes no lock.)
            view = known.view
            return view.value(known.messages)
        return self._read(thread_id)

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

    # -- what this instance knows --------------------------------------------------------

    def _current(self, thread_id: str) -> Known | None:
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
