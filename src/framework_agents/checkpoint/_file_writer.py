"""The blocking writes of a ``FileCheckpointer``: deltas appended, checkpoints folded.

A save whose history extends the stored one appends a delta to ``checkpoint.journal``
(``_journal``); otherwise, or once the journal outgrows its document, the whole checkpoint
is published (a fold, ``_file_format``) and the journal goes stale. Each step runs in a
worker thread with the thread's write lock held by the caller.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import uuid

from .._fs import atomic_write, sweep_temp_files
from .._persist import (
    SealedReader,
    file_ident,
    header_token_at,
    mark_landed,
    plain_messages,
    stored_prefix,
)
from ._file_format import envelope
from ._file_reader import FileReader
from ._file_records import Known, View, counted_view, own_view
from ._journal import OVERLAY, Delta, append_delta
from ._values import check_new_part, kept_fields, messages_read_back_as_is
from .model import CHECKPOINT_FORMAT_VERSION, ThreadCheckpoint, to_json

__all__ = ["FileWriter"]

logger = logging.getLogger(__name__)

#: The journal is folded once it outgrows this fraction of checkpoint.json...
FOLD_RATIO = 0.5
#: ...and this many bytes.
FOLD_MIN_BYTES = 64 << 10


class FileWriter(FileReader):
    """The writes of a thread's files, each under its write lock (held by the caller)."""

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
            folded = header_token_at(journal)
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
        self._known[thread_id] = Known(
            file_ident(st),
            token,
            list(checkpoint.messages),
            doc_bytes=len(head) + len(payload) + len(tail),
            view=counted_view(checkpoint, fields, len(messages))
            if exact
            else own_view(checkpoint, fields, messages),
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

    def _delta_base(self, checkpoint: ThreadCheckpoint) -> tuple[Known, int] | None:
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

    def _folded_if_room(self, checkpoint: ThreadCheckpoint, known: Known) -> bool:
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
        self, checkpoint: ThreadCheckpoint, known: Known, keep: int, payload: bytes
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
        checkpoint: ThreadCheckpoint, known: Known, view: View, keep: int, payload: bytes
    ) -> None:
        """Bring ``known``'s ``view`` (what a read would give) past the appended delta."""
        read = functools.partial(Delta.model_validate_json, payload)
        fields, tail, exact = kept_fields(checkpoint, keep, read)
        known.exact = known.exact and exact
        if known.exact:
            known.view = counted_view(checkpoint, fields, len(known.messages))
        else:
            kept = view.messages(known.messages)[:keep]
            kept += tail
            known.view = own_view(checkpoint, fields, kept)

    def _fold(self, checkpoint: ThreadCheckpoint) -> None:
        check_new_part(checkpoint, 0)
        # Published as version 2: a journal may follow it, which a release that cannot
        # apply one must not ignore (it refuses the document instead).
        published = checkpoint.model_copy(update={"version": CHECKPOINT_FORMAT_VERSION})
        self._write(checkpoint, to_json(published))

    def _rotate_sync(self, thread_id: str, migrate: bool) -> int:
        self._rotating[thread_id] = state = SealedReader(self._cipher, migrating=migrate)
        try:
            self._known.pop(thread_id, None)
            checkpoint = self._read(thread_id)
        finally:
            del self._rotating[thread_id]
        if checkpoint is None or not state.stale_key:
            return 0
        self._fold(checkpoint)
        return 1
