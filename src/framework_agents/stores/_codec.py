"""What every durable store shares: the stored forms of messages and checkpoints (internal).

A thread is stored as a *head* (the checkpoint's JSON without ``messages``: version,
state, pending approval and whatever field the model gains later) plus an append-only
log of message fragments. Loading concatenates them into the checkpoint's JSON and
parses it in one pass, so any field of :class:`ThreadCheckpoint` round-trips.

A save finds the part of the history that is already stored by comparing the messages
this instance last saved or loaded (copies) with the new ones: only the rest is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from .._crypto import Cipher, sealed_without_cipher
from .._persist import check_seconds, encode_message, overlong_int
from .._util import redact
from ..checkpoint.model import ThreadCheckpoint, to_json
from ..errors import (
    AgentError,
    BackendUnavailableError,
    CheckpointCorruptError,
    InvalidArgumentError,
    MemoryCorruptError,
)
from ..memory._base import (
    Appended,
    base_ids,
    bounded_view,
    check_max_messages,
    check_messages,
    new_revision,
    shape_of,
    window,
)
from ..messages import Message, MessageList
from ..sessions._base import validate_key
from ._sealed import MEMORY_MESSAGE, is_sealed_body, open_bodies, seal_body

__all__ = [
    "AsyncClosing",
    "ClosableStore",
    "DATABASE_FORMAT_VERSION",
    "MergingMemory",
    "SchemaTooNewError",
    "ThreadCache",
    "appended_by_others",
    "check_lease",
    "decode_checkpoint",
    "decode_messages",
    "encode_checked",
    "encode_head",
    "encode_messages",
    "log_tag",
    "memory_rows",
    "new_owner",
    "redact",
    "unavailable",
    "wall_clock",
]

logger = logging.getLogger(__name__)

#: Version of the tables/keys layout shared by the SQLite, PostgreSQL and Redis stores
#: (2 added the storages' value digests and value logs; a version-1 database is migrated
#: on first use, under the database's lock). Tables that only add to the layout and are
#: created on every open (``IF NOT EXISTS``; the memory bank's ``fa_bank_*``) need no new
#: version: an earlier release never reads them, and a database it wrote gains them.
DATABASE_FORMAT_VERSION = 2


def log_tag(value_digest: str, last_seq: int | None) -> str:
    """The tag of a stored value (see ``sessions._base.LoggedStorage``).

    Its digest while it has no log records, else the digest and the sequence number of
    its last record (numbers are never reused, so a tag never names two states).
    """
    return value_digest if last_seq is None else f"{value_digest}:{last_seq}"


class SchemaTooNewError(BackendUnavailableError):
    """The store was written by a newer framework-agents (``BACKEND_UNAVAILABLE``)."""


def unavailable(url: str, exc: BaseException) -> BackendUnavailableError:
    """``BACKEND_UNAVAILABLE`` naming the redacted ``url`` and the driver's reason."""
    reason = str(exc).replace(url, redact(url)).strip().splitlines()
    first = reason[0] if reason else type(exc).__name__
    return BackendUnavailableError(f"cannot reach {redact(url)}: {first}")


#: The bounds of a lease (seconds): PostgreSQL's ``idle_session_timeout``, which ends a
#: stopped holder's session, takes whole milliseconds up to 2**31 - 1 (~24.8 days); a
#: lease shorter than a millisecond would turn it off.
LEASE_MIN = 0.001
LEASE_MAX = (2**31 - 1) / 1000


def check_lease(value: object) -> float:
    """A lease in seconds (``LEASE_MIN`` to ``LEASE_MAX``)."""
    seconds = check_seconds("lease", value, optional=False, positive=True)
    assert seconds is not None
    if not LEASE_MIN <= seconds <= LEASE_MAX:
        raise InvalidArgumentError(
            f"lease must be between {LEASE_MIN} and {LEASE_MAX} seconds, got {seconds!r}"
        )
    return seconds


def new_owner() -> str:
    """A token naming one acquisition of a thread lock."""
    return uuid.uuid4().hex


def wall_clock() -> float:
    """Seconds since the epoch (leases and ages in SQLite, which has one machine's clock)."""
    return time.time()


def encode_head(checkpoint: ThreadCheckpoint) -> bytes:
    """The checkpoint's JSON without ``messages`` (every other field, present and future)."""
    head = to_json(checkpoint.model_copy(update={"messages": []}))
    marker = b',"messages":[]'
    if marker not in head:  # pragma: no cover - the field order is the model's
        raise InvalidArgumentError("checkpoint JSON has no messages field")
    return head.replace(marker, b"", 1)


def encode_messages(messages: Sequence[Message]) -> list[bytes]:
    """The JSON fragments of ``messages`` (INVALID_ARGUMENT for what JSON cannot hold)."""
    return [encode_message(m)[0] for m in messages]


_MESSAGE_JSON = Message.__pydantic_serializer__


def encode_checked(messages: Sequence[Message]) -> list[bytes]:
    """The JSON fragments of messages whose free-form values were checked plain JSON.

    For a checkpoint's new part after ``checkpoint._values.check_new_part``: only what
    that check does not cover is left (a ``Message`` subclass, text JSON cannot carry),
    so no read-back.
    """
    out = []
    for m in messages:
        if type(m) is not Message:
            raise InvalidArgumentError(
                f"message {m.id!r} is a {type(m).__name__}, not a Message: its own fields "
                "would not be stored"
            )
        try:
            out.append(_MESSAGE_JSON.to_json(m))
        except (PydanticSerializationError, ValueError) as exc:
            raise InvalidArgumentError(
                f"message {m.id!r} cannot be stored as JSON: {exc}"
            ) from None
    return out


def decode_checkpoint(
    thread_id: str, head: bytes, bodies: Sequence[bytes], *, source: str
) -> ThreadCheckpoint:
    """The checkpoint made of ``head`` and message ``bodies`` (CHECKPOINT_CORRUPT if not)."""
    if not head.startswith(b"{") or not head.endswith(b"}") or len(head) < 3:
        raise CheckpointCorruptError(f"{source}: the head row is not a JSON object")
    data = head[:-1] + b',"messages":[' + b",".join(bodies) + b"]}"
    overlong = overlong_int(data)
    if overlong is not None:
        raise CheckpointCorruptError(f"{source} is unreadable: it holds {overlong}")
    try:
        checkpoint = ThreadCheckpoint.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise CheckpointCorruptError(f"{source} is unreadable ({where}: {first['msg']})") from None
    except (AgentError, ValueError, RecursionError) as exc:
        raise CheckpointCorruptError(f"{source} is unreadable: {exc}") from None
    if checkpoint.thread_id != thread_id:
        raise CheckpointCorruptError(f"{source} belongs to thread {checkpoint.thread_id!r}")
    return checkpoint


def decode_messages(bodies: Sequence[bytes], *, source: str) -> list[Message]:
    """Messages from their stored fragments (MEMORY_CORRUPT naming the bad one)."""
    data = b"[" + b",".join(bodies) + b"]"
    if overlong_int(data) is None:
        try:
            return MessageList.validate_json(data)
        except (ValidationError, ValueError, RecursionError):
            pass
    for i, body in enumerate(bodies):
        try:
            problem = overlong_int(body)
            if problem is not None:
                raise ValueError(f"it holds {problem}")
            Message.model_validate_json(body)
        except (ValidationError, ValueError, RecursionError) as exc:
            raise MemoryCorruptError(f"{source}: message {i} is unreadable: {exc}") from None
    raise MemoryCorruptError(f"{source} is unreadable")  # pragma: no cover


def appended_by_others(
    stored: Sequence[object], base: Collection[str] | None, given: Collection[str]
) -> list[int]:
    """Which stored messages a commit keeps, by their ids: another writer's appends.

    ``stored`` is the stored messages' ids as the database reads them from the bodies
    (``None`` or another type for an unreadable body), ``base`` the ids of the history the
    committing instance last loaded or wrote (``None``: it has neither, so it replaces
    everything), ``given`` the ids it commits. A stored message outside both was appended
    by someone else since: it is kept (after the committed history, as
    ``FileMemory.commit`` keeps it), so a replace never drops another process's turn.
    Stored ones in ``base`` but not given are the removals the committer meant; an
    unreadable one is replaced, as before.
    """
    if base is None:
        return []
    return [
        i
        for i, found in enumerate(stored)
        if isinstance(found, str) and found not in base and found not in given
    ]


def memory_rows(messages: Sequence[Message]) -> list[tuple[int, bytes]]:
    """``(shape, JSON fragment)`` of each message: what a database memory stores."""
    return list(zip([shape_of(m) for m in messages], encode_messages(messages), strict=True))


class MergingMemory:
    """What the database memories share: a merging ``replace``, and revisions.

    ``replace`` merges with what others appended; the revisions let an agent append what
    a run added (``AppendableMemory``) instead of replacing the history. A subclass
    implements :meth:`commit` atomically and keeps ``_seen``: the ids of the history this
    instance last loaded or wrote (``None`` until it did either). It also keeps a
    *marker* per key in the database that every write moves forward (a sequence
    number): :meth:`_observe` is told the marker each read saw, :meth:`_wrote` the one
    each write of its own left; equal markers mean nothing was written between.
    """

    #: The stored marker as this instance last read or wrote it (``None``: not yet).
    _marker: int | None = None
    _revision: int = 0
    #: Seals the bodies at rest (``cipher=``; ``None``: plain).
    _cipher: Cipher | None = None

    def use_cipher(self, cipher: Cipher | None) -> None:
        """Seal every body this instance writes, and open every one it reads, with ``cipher``."""
        if cipher is not None and not isinstance(cipher, Cipher):
            raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
        self._cipher = cipher

    def _rows(self, messages: Sequence[Message]) -> list[tuple[int, bytes]]:
        """The rows of ``messages`` as stored: ``memory_rows``, sealed with ``cipher=``."""
        rows = memory_rows(messages)
        cipher = self._cipher
        if cipher is None:
            return rows
        return [
            (shape, seal_body(cipher, MEMORY_MESSAGE, self.key, m.id, body))
            for (shape, body), m in zip(rows, messages, strict=True)
        ]

    def __init__(self, key: str, max_messages: int, cipher: Cipher | None) -> None:
        """The history under ``key``, windowed to ``max_messages``, sealed with ``cipher``.

        STORAGE_KEY_INVALID for a key outside the key rules; ``cipher`` ``None``: plain.
        """
        validate_key(key)
        self.key = key
        self.max_messages: int = check_max_messages(max_messages)
        # Ids of the history this instance last loaded or wrote (the base of a merge).
        self._seen: set[str] | None = None
        self.use_cipher(cipher)

    @property
    def revision(self) -> int:
        """Changes with every write this instance made and every change a load of it saw."""
        if not self._revision:
            self._revision = new_revision()
        return self._revision

    def _observe(self, marker: int) -> None:
        """A read saw ``marker``: a new revision if anyone wrote since this instance looked."""
        if marker != self._marker:
            if self._marker is not None:
                self._revision = new_revision()
            self._marker = marker

    def _wrote(self, marker: int | None) -> None:
        """A write of this instance left ``marker`` (``None``: unknown): a new revision."""
        self._revision = new_revision()
        self._marker = marker

    def _loaded(self, bodies: Sequence[bytes], marker: int, *, source: str) -> list[Message]:
        """The history a load read (``bodies`` and the ``marker`` with them), windowed."""
        if self._cipher is not None:
            bodies = open_bodies(self._cipher, MEMORY_MESSAGE, self.key, bodies, indexed=False)
            messages = decode_messages(bodies, source=source)
        else:
            try:
                messages = decode_messages(bodies, source=source)
            except MemoryCorruptError:
                if any(is_sealed_body(body) for body in bodies):
                    raise sealed_without_cipher(source) from None
                raise
        self._seen = {m.id for m in messages}
        self._observe(marker)
        return bounded_view(messages, self.max_messages)

    def _holds(self, revision: int) -> bool:
        """Whether ``revision`` is this instance's current one, with a marker known."""
        return revision == self._revision and self._marker is not None

    async def unchanged(self, revision: int) -> bool:
        """Whether nothing was written under the key since ``revision`` (one read)."""
        if not self._holds(revision):
            return False
        return await self._read_marker() == self._marker

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages``, then keep the newest ``max_messages`` (one atomic step).

        Idempotent by message id: a message whose id is stored already (or given twice) is
        not appended again, so a save retried after a dropped connection stores nothing
        twice.
        """
        given = check_messages(messages)
        await self._append_new(given)
        self._saved(given)

    async def _append_new(self, given: list[Message]) -> None:
        """:meth:`save`'s write: the messages of ``given`` not stored yet, windowed.

        One atomic step; it tells this instance where the marker went (:meth:`_wrote`, or
        :meth:`_observe` when it wrote nothing).
        """
        raise NotImplementedError

    async def save_if(self, messages: Sequence[Message], *, revision: int) -> Appended | None:
        """Append ``messages`` if nothing was written under the key since ``revision``.

        ``None`` (nothing written) when anyone wrote since, when a message's id is stored
        already or given twice, or when the key holds more messages than this window
        (then what a load gives is not all that is stored). The check and the append are
        one atomic step (:meth:`_append_if`). ``dropped`` is how many stored messages the
        window then cut.
        """
        given = check_messages(messages)
        expected = self._marker  # taken before any await: another task may write meanwhile
        if not self._holds(revision) or len({m.id for m in given}) != len(given):
            return None
        assert expected is not None  # _holds: a marker is known
        done = await self._append_if(given, self._rows(given), expected)
        if done is None:
            return None
        self._saved(given)
        self._wrote(done[0])
        return Appended(self.revision, done[1])

    async def _read_marker(self) -> int:
        """The key's marker as stored now (0: never written)."""
        raise NotImplementedError

    async def _append_if(
        self, given: list[Message], rows: list[tuple[int, bytes]], expected: int
    ) -> tuple[int, int] | None:
        """Append ``rows`` in one atomic step if the stored history allows it.

        It does when the marker is ``expected``, the key holds no more than the window and
        no id of ``given`` is stored: then ``(marker after, rows the window cut)``; else
        ``None``, nothing written.
        """
        raise NotImplementedError

    async def commit(
        self, messages: Sequence[Message], *, base: Collection[str] | None = None
    ) -> None:
        """Store ``messages`` (windowed), merged by ``FileMemory.commit``'s rule.

        A stored message that is neither given nor in ``base`` (the ids the caller started
        from; by default what this instance last loaded or wrote) is another writer's
        append: it stays, after ``messages``. One in ``base`` that is not given goes.
        """
        raise NotImplementedError

    async def replace(self, messages: Sequence[Message]) -> None:
        """Make ``messages`` (windowed) the history, keeping what others appended meanwhile.

        The same as :meth:`commit` with the history this instance last loaded or wrote
        as the base; an instance that has done neither replaces the whole history.
        """
        await self.commit(messages)

    def _commit_parts(
        self, messages: Sequence[Message], base: Collection[str] | None
    ) -> tuple[list[Message], set[str], set[str] | None]:
        """A commit's checked messages (windowed), the ids given, and its base."""
        given = check_messages(messages)
        base = self._seen if base is None else base_ids(base)
        return window(given, self.max_messages), {m.id for m in given}, base

    def _saved(self, messages: Sequence[Message]) -> None:
        """Note what a save stored: the next commit's default base includes it."""
        if self._seen is not None:
            self._seen.update(m.id for m in messages)


@dataclass(slots=True)
class ThreadCache:
    """What one store instance knows a thread holds: its version and stored history.

    It keeps the stored message objects (those saved or handed out by ``load``), so the
    next save of a history that extends them finds what is new without looking at the
    rest.
    """

    version: int
    messages: list[Message] = field(default_factory=list)
    #: Where each sealed message group of the stored log starts (``cipher=`` only).
    starts: list[int] = field(default_factory=list)

    @classmethod
    def of(
        cls, version: int, messages: Sequence[Message], starts: Sequence[int] = ()
    ) -> ThreadCache:
        """A cache entry remembering ``messages`` (and their groups' ``starts``)."""
        return cls(version, list(messages), list(starts))

    def advanced(
        self, version: int, keep: int, added: Sequence[Message], starts: Sequence[int] = ()
    ) -> ThreadCache:
        """The entry after a save that kept ``keep`` messages and appended ``added``.

        ``starts``: where the groups the save wrote start (all at ``keep`` or after).
        """
        del self.messages[keep:]
        self.messages.extend(added)
        kept = [s for s in self.starts if s < keep]
        return ThreadCache(version, self.messages, [*kept, *starts])


def dumps(value: Any) -> str:
    """Compact JSON text."""
    return json.dumps(value, separators=(",", ":"))


@contextlib.contextmanager
def corrupt_memory_guard(source: str) -> Iterator[None]:
    """Turn a decoding failure of a memory row into MEMORY_CORRUPT."""
    try:
        yield
    except (ValidationError, ValueError) as exc:
        raise MemoryCorruptError(f"{source} is unreadable: {exc}") from None


class _Connections(Protocol):
    async def close(self) -> None: ...


_Db = TypeVar("_Db", bound=_Connections)


class AsyncClosing:
    """``async with`` for an object that has an async ``close()``."""

    async def close(self) -> None:  # pragma: no cover - every subclass has its own
        """Close the object's connections (idempotent)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        """The store itself."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        await self.close()


class ClosableStore(AsyncClosing, Generic[_Db]):
    """``close()`` and ``async with`` for a store whose connections live in ``self._db``."""

    _db: _Db

    async def close(self) -> None:
        """Close the store's connections (idempotent)."""
        await self._db.close()
