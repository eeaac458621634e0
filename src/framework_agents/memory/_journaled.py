"""The files of one ``FileMemory`` and the blocking steps on them (run in a worker thread).

:class:`MemoryFiles` knows the layout and the format; :class:`State` is what one instance
knows the files hold, as reusable JSON fragments, so a save parses nothing it already
knows: it checks that ``memory.json`` is the same document (same inode identity and the
same journal token in its first bytes: a publish always draws a new token) and reads only
the journal bytes past the end it already scanned. Every step here runs with the
memory's ``flock`` held by the caller (exclusive to write, shared to read).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from .._crypto import Place, is_sealed, sealed_without_cipher
from .._persist import (
    JOURNAL_FORMAT_VERSION,
    FileIdent,
    JournalCorruptError,
    SealedReader,
    TooLargeError,
    append_record,
    atomic_publish,
    bound,
    file_ident,
    frame,
    header_payload,
    mark_landed,
    parse_header,
    parse_items,
    read_bounded,
    scan,
    sealed_payload,
)
from ..errors import MemoryCorruptError
from ..messages import Message
from ._document import (
    FOOTER,
    MEMORY_FORMAT_VERSION,
    SEP,
    Document,
    document_head,
    encode_stored,
    header,
    parse_document,
    parse_record,
    split_v3,
)
from ._window import shape_of, slide, window_start

__all__ = ["Entries", "MemoryFiles", "State", "messages_of"]

logger = logging.getLogger(__name__)


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC


@dataclass(slots=True)
class Entries:
    """Stored messages as JSON fragments, in order, with their ids and window shapes.

    The entries before ``start`` were cut by the window (they stay in the files until the
    next fold); ``idset`` holds the ids of the others, the history a load returns.
    """

    frags: list[bytes] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    shapes: bytearray = field(default_factory=bytearray)
    idset: set[str] = field(default_factory=set)
    start: int = 0

    @classmethod
    def of_messages(cls, messages: Iterable[Message]) -> Entries:
        """Entries of messages read from a file (each serialised once)."""
        out = cls()
        out.add_messages(messages)
        return out

    def add_messages(self, messages: Iterable[Message]) -> None:
        """Append messages read from a file, skipping ids the window holds already."""
        for msg in messages:
            if msg.id not in self.idset:
                self.add(msg.id, encode_stored(msg), shape_of(msg))

    def add(self, msg_id: str, frag: bytes, shape: int) -> None:
        """Append one entry (the caller made sure the id is new)."""
        self.frags.append(frag)
        self.ids.append(msg_id)
        self.shapes.append(shape)
        self.idset.add(msg_id)

    def cut(self, max_messages: int) -> None:
        """Window after one save (``memory._window.slide``): ``start`` moves past the cut."""
        self.start = slide(self.shapes, self.ids, self.idset, self.start, max_messages)

    def copy(self) -> Entries:
        """An independent copy (the lists are new; fragments are immutable)."""
        return Entries(
            list(self.frags), list(self.ids), bytearray(self.shapes), set(self.idset), self.start
        )

    def kept(self) -> Entries:
        """The entries the window holds (``self`` when it cut none)."""
        return self.tail(self.start) if self.start else self

    def head(self, stop: int) -> Entries:
        """The entries before ``stop``, none of them cut (the caller windows them)."""
        ids = self.ids[:stop]
        return Entries(self.frags[:stop], ids, self.shapes[:stop], set(ids))

    def tail(self, start: int) -> Entries:
        """The entries from ``start`` on."""
        ids = self.ids[start:]
        return Entries(self.frags[start:], ids, self.shapes[start:], set(ids))


@dataclass(slots=True)
class State:
    """What the files hold, as one instance last saw them under the lock."""

    doc_ident: FileIdent | None
    token: str | None
    doc_bytes: int
    doc_count: int
    entries: Entries
    journal_key: tuple[int, int] | None = None
    journal_end: int = 0
    stale: bool = False
    head: bytes = b""  # the document's header (token and checksum): proof it is unchanged
    version: int = 0  # the document's layout version (0: no document)
    folded: str | None = None  # the journal the document folded (None: it names none)
    journal_token: str | None = None  # the token of the journal on disk, when known
    journal_version: int = JOURNAL_FORMAT_VERSION  # its framing
    journal_count: int = 0  # the records after its header (what a sealed record binds)

    def appendable(self) -> bool:
        """Whether a save may append to the journal (else it folds: no or an older document)."""
        return self.token is not None and self.version == MEMORY_FORMAT_VERSION


class MemoryFiles(SealedReader):
    """``<dir>/memory.json``, ``memory.json.journal`` and ``memory.json.lock``.

    ``max_bytes`` bounds the document plus its journal and ``max_items`` the messages
    and tool calls in the document; both are checked before parsing (``MEMORY_CORRUPT``).
    ``max_messages`` is the window, applied after the document and after each journal
    record (one record is one save), as every memory windows after each save.

    Encryption at rest (``cipher=``, :class:`SealedReader`): ``where`` is what the sealed
    values are bound to; ``migrating`` lets a read take plain values, and ``stale_key``
    says one it made was not sealed under the current key (what ``rotate`` rewrites).
    """

    def __init__(
        self, directory: Path, *, max_messages: int, max_bytes: int, max_items: int
    ) -> None:
        self.dir = directory
        self.max_messages = max_messages
        self.doc = directory / "memory.json"
        self.journal = directory / "memory.json.journal"
        self.lock = directory / "memory.json.lock"
        self.max_bytes = max_bytes
        self.max_items = max_items
        self.reparses = 0  # documents parsed again although already known (tests, benchmarks)
        super().__init__()
        self.where = ""

    # -- sealing -----------------------------------------------------------------------

    def _parse_document(self, data: bytes) -> Document:
        """:func:`parse_document` of ``data``, opened first when sealed (``cipher=``)."""
        if self.cipher is not None:
            parts = split_v3(data)
            opened = self.open_document(parts, "memory.document", self.where, MEMORY_FORMAT_VERSION)
            if opened is not None:
                plain, token, folded = opened
                data = header(token, folded, plain) + plain + FOOTER
            return parse_document(data, self.doc, max_items=self.max_items)
        try:
            return parse_document(data, self.doc, max_items=self.max_items)
        except MemoryCorruptError:
            if sealed_payload(split_v3(data)):
                raise sealed_without_cipher(f"memory {str(self.doc)!r}") from None
            raise

    def _record_place(self, token: str | None, index: int) -> Place:
        return Place("memory.record", self.where, f"{token}:{index}", MEMORY_FORMAT_VERSION)

    def _parse_record(self, payload: bytes, token: str | None, index: int) -> list[Message]:
        """:func:`parse_record` of journal record ``index``, opened first when sealed."""
        if self.cipher is not None:
            payload = self.open_record(payload, self._record_place(token, index))
        elif is_sealed(payload):
            raise sealed_without_cipher(f"memory journal {str(self.journal)!r}")
        return parse_record(payload, self.journal, max_items=self.max_items)

    # -- errors ------------------------------------------------------------------------

    def corrupt(self, path: Path, reason: str) -> MemoryCorruptError:
        """``MEMORY_CORRUPT`` for ``path``, left untouched."""
        return MemoryCorruptError(
            f"{path} is not a valid memory file ({reason}); it was left untouched — "
            "inspect or remove it to continue"
        )

    def _open(self, path: Path) -> tuple[int, os.stat_result] | None:
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            reason = {
                errno.EISDIR: "a directory is in its place",
                errno.ELOOP: "it is a symlink, which is never followed",
            }.get(exc.errno or 0)
            if reason is None:
                raise
            raise self.corrupt(path, reason) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise self.corrupt(path, "it is not a regular file (a FIFO, device or socket)")
        return fd, st

    def _read(self, fd: int, st: os.stat_result, path: Path, offset: int, budget: int) -> bytes:
        if st.st_size > budget:
            raise self.corrupt(path, f"{st.st_size} bytes, more than the bound of {budget}")
        try:
            return read_bounded(fd, st.st_size, budget, path, offset)
        except TooLargeError as exc:
            raise self.corrupt(path, f"more than the bound of {exc.bound} bytes") from None

    # -- reading -----------------------------------------------------------------------

    def read_messages(self) -> tuple[list[Message], set[str]]:
        """The stored messages the window holds (document, then journal), and their ids.

        Windowed after the document and after each journal record, as the writes were.
        """
        opened = self._open(self.doc)
        if opened is None:
            return [], set()
        fd, st = opened
        try:
            data = self._read(fd, st, self.doc, 0, self.max_bytes)
        finally:
            os.close(fd)
        doc = self._parse_document(data)
        size = len(data)
        del data  # freed before the journal is read: the messages hold none of its bytes
        # One pass over the parsed messages for their ids; their shapes are taken only
        # once a window may cut (most loads never window), and the cut is made in place.
        messages = doc.messages
        kept = {m.id for m in messages}
        shapes = bytearray()  # the shapes of messages[: len(shapes)]
        start = self._slide(messages, shapes, kept, 0)
        payloads = self._journal_payloads(doc, size) if doc.token is not None else []
        for index, payload in enumerate(payloads):
            for msg in self._parse_record(payload, doc.token, index):
                if msg.id not in kept:
                    kept.add(msg.id)
                    messages.append(msg)
            start = self._slide(messages, shapes, kept, start)
        del messages[:start]
        return messages, kept

    def _slide(self, messages: list[Message], shapes: bytearray, kept: set[str], start: int) -> int:
        """:func:`~._window.slide` over ``messages``, taking the shapes it needs as it goes."""
        if len(messages) - start <= self.max_messages:
            return start  # what slide returns then, without looking at a shape
        shapes.extend(shape_of(m) for m in islice(messages, len(shapes), None))
        new = window_start(shapes, self.max_messages, start)
        if new > start:
            kept.difference_update(m.id for m in islice(messages, start, new))
        return new

    def _journal_payloads(self, doc: Document, doc_bytes: int) -> list[bytes]:
        opened = self._open(self.journal)
        if opened is None:
            return []
        fd, st = opened
        try:
            data = self._read(fd, st, self.journal, 0, self.max_bytes - doc_bytes)
        finally:
            os.close(fd)
        found = self._scan(data, 0, None)
        assert doc.token is not None
        if not found.payloads or not self._bound(found.payloads[0], doc.token, doc.folded):
            return []  # stale: bound to the journal this document folded
        return found.payloads[1:]

    def _scan(self, data: bytes, start: int, version: int | None) -> _Scanned:
        try:
            result = scan(data, version=version)
        except JournalCorruptError as exc:
            raise self.corrupt(self.journal, str(exc)) from None
        return _Scanned(result.payloads, start + result.end, result.version)

    def _header_token(self, payload: bytes) -> str:
        try:
            return parse_header(payload)
        except JournalCorruptError as exc:
            raise self.corrupt(self.journal, str(exc)) from None

    def _bound(self, header: bytes, token: str, folded: str | None) -> bool:
        """Whether the journal whose header is ``header`` extends the document (see ``bound``)."""
        try:
            return bound(parse_header(header), token, folded)
        except JournalCorruptError as exc:
            raise self.corrupt(self.journal, str(exc)) from None

    def _journal_token_or_none(self) -> str | None:
        """The token in the header of the journal on disk (``None``: none, or unreadable)."""
        try:
            opened = self._open(self.journal)
        except MemoryCorruptError:
            return None
        if opened is None:
            return None
        fd = opened[0]
        try:
            data = os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        try:
            return parse_header(scan(data[: _header_end(data)]).payloads[0])
        except (JournalCorruptError, IndexError):
            return None

    def refresh(self, known: State | None) -> State:
        """What the files hold now, reusing ``known`` where the files did not change."""
        opened = self._open(self.doc)
        if opened is None:
            state = State(None, None, 0, 0, Entries())
        else:
            state = self._doc_state(opened, known)
        if state.token is None:
            state.stale = self._exists(self.journal)
            if state.stale:
                state.journal_token = self._journal_token_or_none()
            return state
        return self._journal_state(state, known)

    def _exists(self, path: Path) -> bool:
        try:
            os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def _doc_state(self, opened: tuple[int, os.stat_result], known: State | None) -> State:
        """The document part; ``entries`` is ``known.entries`` itself when it is unchanged."""
        fd, st = opened
        try:
            ident = file_ident(st)
            if (
                known is not None
                and known.doc_ident == ident
                and known.head
                and os.pread(fd, len(known.head), 0) == known.head
            ):
                return State(
                    ident,
                    known.token,
                    known.doc_bytes,
                    known.doc_count,
                    known.entries,
                    head=known.head,
                    version=known.version,
                    folded=known.folded,
                )
            data = self._read(fd, st, self.doc, 0, self.max_bytes)
        finally:
            os.close(fd)
        if known is not None:
            self.reparses += 1  # another writer published a new document
        doc = self._parse_document(data)
        entries = Entries.of_messages(doc.messages)
        entries.cut(self.max_messages)  # a document another window size published
        return State(
            ident,
            doc.token,
            len(data),
            len(entries.ids),
            entries,
            head=document_head(data),
            version=doc.version,
            folded=doc.folded,
        )

    def _journal_state(self, state: State, known: State | None) -> State:
        """``state`` (its document part read) with the journal's records added.

        A journal ``known`` read already (same document, same file) is read on from
        where it stopped; any other from the top, where its header must bind it to the
        document (else it is stale: a writer that died before removing it).
        """
        assert state.token is not None
        opened = self._open(self.journal)
        key = None if opened is None else (opened[1].st_dev, opened[1].st_ino)
        warm = _continued_from(state, known, key)
        if warm is None and known is not None and state.entries is known.entries:
            self._keep_document_part(state)
        if opened is None or key is None:
            return state
        found = self._read_journal(opened, state, warm)
        if warm is None:
            payloads = self._bound_records(state, found.payloads)
            if payloads is None:
                state.journal_key = key
                state.stale = True
                return state
            entries = state.entries
        else:
            payloads = found.payloads
            state.journal_token = warm.journal_token
            entries = warm.entries
        state.journal_version = found.version
        first = 0 if warm is None else warm.journal_count
        state.entries = self._add_records(entries, payloads, state.token, first)
        state.journal_count = first + len(payloads)
        state.journal_key = key
        state.journal_end = found.end
        return state

    def _read_journal(
        self, opened: tuple[int, os.stat_result], state: State, warm: State | None
    ) -> _Scanned:
        """The journal's records after ``warm``'s end (``None``: all of them); closes it."""
        fd, st = opened
        start = 0 if warm is None else warm.journal_end
        try:
            data = self._read(fd, st, self.journal, start, self.max_bytes - state.doc_bytes)
        finally:
            os.close(fd)
        return self._scan(data, start, None if warm is None else warm.journal_version)

    def _bound_records(self, state: State, payloads: list[bytes]) -> list[bytes] | None:
        """The records after a whole journal's header, noting its token in ``state``.

        ``None``: the journal is stale (an empty file, where nothing was ever acknowledged,
        or a header that does not bind it to ``state``'s document).
        """
        assert state.token is not None
        if not payloads:
            return None
        state.journal_token = self._header_token(payloads[0])
        if not self._bound(payloads[0], state.token, state.folded):
            return None
        return payloads[1:]

    def _keep_document_part(self, state: State) -> None:
        """Cut ``state``'s entries back to the document's (journal records dropped)."""
        if len(state.entries.ids) != state.doc_count:
            state.entries = state.entries.head(state.doc_count)
            state.entries.cut(self.max_messages)

    def _add_records(
        self, entries: Entries, payloads: list[bytes], token: str | None, first: int
    ) -> Entries:
        """``entries`` with the messages of journal records ``payloads`` added, in order.

        ``first`` is the index of the first of them in the journal (after its header).
        """
        batches = [self._parse_record(p, token, first + i) for i, p in enumerate(payloads)]
        for batch in batches:
            entries.add_messages(batch)
            entries.cut(self.max_messages)
        return entries

    # -- writing -----------------------------------------------------------------------

    def append(self, state: State, new: Entries) -> State:
        """Append ``new`` to the journal (one record, one ``fdatasync``); the new state."""
        assert state.token is not None
        fresh = state.journal_key is None or state.stale
        version = JOURNAL_FORMAT_VERSION if fresh else state.journal_version
        index = 0 if fresh else state.journal_count
        payload = b"[" + SEP.join(new.frags) + b"]"
        if self.cipher is not None:
            payload = self.cipher.seal(payload, self._record_place(state.token, index))
        record = frame(payload, version)
        if fresh:
            head = frame(header_payload(state.token))
            atomic_publish(self.journal, [head, record])
            try:
                st = os.stat(self.journal, follow_symlinks=False)
            except OSError as exc:
                raise mark_landed(exc) from None
            key = (st.st_dev, st.st_ino)
            end = len(head) + len(record)
        else:
            fd = os.open(self.journal, os.O_RDWR | os.O_NOFOLLOW | _CLOEXEC)
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != state.journal_key:
                    raise self.corrupt(self.journal, "it was replaced while its lock was held")
                append_record(fd, state.journal_end, record)
            finally:
                os.close(fd)
            key = state.journal_key
            end = state.journal_end + len(record)
        entries = state.entries
        for i, msg_id in enumerate(new.ids):
            entries.add(msg_id, new.frags[i], new.shapes[i])
        entries.cut(self.max_messages)
        return State(
            state.doc_ident,
            state.token,
            state.doc_bytes,
            state.doc_count,
            entries,
            key,
            end,
            head=state.head,
            version=state.version,
            folded=state.folded,
            journal_token=state.token,
            journal_version=version,
            journal_count=index + 1,
        )

    def publish(self, entries: Entries, folded: str | None) -> State:
        """Publish ``entries`` (windowed) as a new document; the journal becomes stale.

        ``folded`` is the token of the journal on disk (``None``: there is none), which
        the document names: a writer that dies before removing it leaves the one journal
        a reader may ignore.
        """
        kept = entries.kept().copy()
        kept.cut(self.max_messages)
        kept = kept.kept()
        token = uuid.uuid4().hex
        body = SEP.join(kept.frags)
        if self.cipher is not None:
            place = Place("memory.document", self.where, token, MEMORY_FORMAT_VERSION)
            body = b'"%s"' % self.cipher.seal_text(body, place).encode("ascii")
        folded = folded if folded is not None and _TOKEN.fullmatch(folded) else ""
        head = header(token, folded, body)
        atomic_publish(self.doc, [head, body, FOOTER])
        try:
            st = os.stat(self.doc, follow_symlinks=False)
        except OSError as exc:
            raise mark_landed(exc) from None
        try:
            os.unlink(self.journal)
        except FileNotFoundError:
            pass
        except OSError as exc:  # harmless: its token no longer matches the document
            logger.warning("could not remove the stale journal %s: %s", self.journal, exc)
        size = len(head) + len(body) + len(FOOTER)
        return State(
            file_ident(st),
            token,
            size,
            len(kept.ids),
            kept,
            head=head,
            version=MEMORY_FORMAT_VERSION,
            folded=folded,
        )


_TOKEN = re.compile("[0-9a-f]{32}")


def _header_end(data: bytes) -> int:
    """Where the header record of journal bytes ``data`` ends (a bound: its frame's length)."""
    if len(data) < 4:
        return len(data)
    return min(len(data), 12 + int.from_bytes(data[:4], "big") + 4)


@dataclass(frozen=True, slots=True)
class _Scanned:
    payloads: list[bytes]
    end: int
    version: int


def messages_of(entries: Entries) -> list[Message]:
    """The messages of ``entries`` (one parse of canonical fragments)."""
    data = b"[" + SEP.join(entries.frags) + b"]"
    return parse_items(data, 1, len(data) - 1)


def _continued_from(state: State, known: State | None, key: tuple[int, int] | None) -> State | None:
    """``known`` when ``state`` holds its entries and its journal (``key``) is unchanged.

    The journal is then read on from ``known.journal_end``; else (``None``) from the top.
    """
    if known is None or state.entries is not known.entries:
        return None
    if known.journal_key != key or known.stale:
        return None
    return known
