"""``SessionManager``: an agent's latest and immutable snapshots inside one storage.

Key layout (``<sid>`` the session id, ``<aid>`` the agent id)::

    session/<sid>/scopes/agent/<aid>/snapshots/snapshot_latest.json   # overwritten each run
    session/<sid>/scopes/agent/<aid>/snapshots/<snapshot_id>.json     # immutable, UUIDv7 ids

Session and agent ids become key segments, so they obey the storage segment rules
(ASCII letters, digits, ``._-``, no dot at either end, ...) and a bad one raises
``STORAGE_KEY_INVALID`` at construction.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from .._persist import plain_messages, shared_prefix, stored_prefix
from ..errors import (
    AgentError,
    InvalidArgumentError,
    SnapshotCorruptError,
    SnapshotMissingError,
)
from ..messages import Message
from ..timeline import TimelineEntry
from ._base import ArgumentTypeError, Storage, as_logged, digest, swap
from ._keys import validate_segment
from .snapshot import (
    PLAIN_SNAPSHOT_FORMAT_VERSION,
    SNAPSHOT_FORMAT_VERSION,
    Snapshot,
    SnapshotData,
    is_snapshot_id,
    stored_messages,
)

__all__ = ["LATEST_NAME", "SessionManager"]

#: File name of the latest snapshot inside an agent's ``snapshots`` directory.
LATEST_NAME = "snapshot_latest.json"
_SUFFIX = ".json"


#: The log is folded into the stored snapshot once it outgrows this fraction of it...
FOLD_RATIO = 0.5
#: ...and this many bytes.
FOLD_MIN_BYTES = 64 << 10

_ID = operator.attrgetter("id")
_Item = TypeVar("_Item")

#: Serialises timeline entries as a snapshot stores them (to weigh a stored timeline).
_ENTRIES: TypeAdapter[list[TimelineEntry]] = TypeAdapter(list[TimelineEntry])


def _apply(snapshot: Snapshot, record: bytes, source: str) -> Snapshot:
    """``snapshot`` with one log record applied: keep N messages, then the record's.

    A record opens with ``N``, the stored messages it keeps from the front, or, when it
    holds a timeline, also ``D:N``: it keeps stored messages D to N (a window that slid).
    Its other fields replace the snapshot's, but for ``timeline``: present, it holds the
    entries appended to the snapshot's (revs growing on); absent, there is none.
    """
    drop, keep, slid, body = _split_record(record, source)
    delta = Snapshot.from_json(body, source=f"{source} (log record)")
    base = snapshot.data.messages or []
    if keep > len(base) or drop > keep or delta.data.messages is None:
        raise SnapshotCorruptError(f"{source}: a log record keeps {keep} of {len(base)} messages")
    appended = delta.data.timeline
    if slid and appended is None:
        raise SnapshotCorruptError(f"{source}: a log record drops messages but has no timeline")
    update: dict[str, Any] = {"messages": [*base[drop:keep], *delta.data.messages]}
    if appended is not None:
        update["timeline"] = _grown_timeline(snapshot.data.timeline or [], appended, source)
    return delta.model_copy(update={"data": delta.data.model_copy(update=update)})


def _split_record(record: bytes, source: str) -> tuple[int, int, bool, bytes]:
    """A log record's front it drops, stored messages it keeps, whether ``D:N``, and body."""
    head, sep, body = record.partition(b"\n")
    drop_head, colon, keep_head = head.rpartition(b":")
    if not sep or not keep_head.isdigit() or (colon and not drop_head.isdigit()):
        raise SnapshotCorruptError(f"{source}: a log record has no message count")
    return int(drop_head or b"0"), int(keep_head), bool(colon), body


def _grown_timeline(
    stored: list[TimelineEntry], appended: list[TimelineEntry], source: str
) -> list[TimelineEntry]:
    """``stored`` followed by a record's ``appended`` entries, whose revs must grow on."""
    if stored and appended and appended[0].rev <= stored[-1].rev:
        raise SnapshotCorruptError(
            f"{source}: a log record's timeline goes back to rev {appended[0].rev} "
            f"after {stored[-1].rev}"
        )
    return [*stored, *appended]


def _slid(stored: list[Message], messages: Sequence[Message]) -> int:
    """How many stored messages a window dropped from the front (0: none, or not a window).

    That is, when ``messages`` goes on with all the stored messages after those.
    """
    if len(stored) < 2 or not messages:
        return 0
    try:
        drop = list(map(_ID, stored)).index(messages[0].id, 1)
    except ValueError:
        return 0
    rest = stored[drop:]
    return drop if shared_prefix(rest, messages) == len(rest) else 0


def _kept_entries(
    stored: list[TimelineEntry] | None, timeline: list[TimelineEntry] | None
) -> int | None:
    """How many leading entries of ``timeline`` are ``stored`` (all of them), else ``None``.

    ``None`` also when ``timeline`` is absent but ``stored`` is not: a record cannot say
    the timeline is gone. ``stored`` (the manager's own list) is compared extended by the
    new entries, in place and cut back: entries the agent restored or saved are the stored
    objects, so two lists of pointers are compared and no entry is touched (a slice
    would touch every one, a cache miss each on a long timeline).
    """
    if timeline is None:
        return 0 if stored is None else None
    if stored is None:
        return 0
    n = len(stored)
    if len(timeline) < n:
        return None
    stored += timeline[n:]
    try:
        same = stored == timeline
    finally:
        del stored[n:]
    return n if same else None


def _kept_list(
    stored: list[TimelineEntry] | None, timeline: list[TimelineEntry], kept: int
) -> list[TimelineEntry]:
    """``stored`` (the manager's own list) extended by what ``timeline`` adds past ``kept``.

    Where ``timeline`` holds equal copies of the stored entries, the list takes its
    objects, so the next comparison is by pointer again.
    """
    if stored is None:
        return list(timeline)
    if kept and timeline[kept - 1] is not stored[-1]:
        stored[:] = timeline[:kept]
    stored += timeline[kept:]
    return stored


def _tails(
    items: list[Message] | None,
    keep: int,
    entries: list[TimelineEntry] | None,
    kept: int,
    state: dict[str, Any] | None,
    system_prompt: str | None,
) -> SnapshotData | None:
    """``SnapshotData`` validating only past the ``keep`` / ``kept`` stored list items.

    ``items`` and ``entries`` become the data's lists as they are (never changed): when
    validating the new items kept their objects (the usual case: pydantic keeps a
    model instance as it is), the whole list needs no copy; otherwise a list of the
    stored items and the validated new ones is made.

    ``None`` when what is new does not validate, or the timeline's revs do not grow past
    the stored ones: the caller validates the whole, which names the problem.
    """
    try:
        data = SnapshotData(
            items if items is None else items[keep:],
            state,
            system_prompt,
            timeline=entries if entries is None else entries[kept:],
        )
    except (ValidationError, AgentError):
        return None
    if keep:
        assert items is not None
        data.messages = _whole(items, keep, data.messages or [])
    if kept:
        assert entries is not None
        added = data.timeline or []
        if added and added[0].rev <= entries[kept - 1].rev:
            return None
        data.timeline = _whole(entries, kept, added)
    return data


def _whole(given: list[Any], keep: int, validated: list[Any]) -> list[Any]:
    """``given`` when its items past ``keep`` are the ``validated`` objects, else a new list."""
    if len(validated) == len(given) - keep and all(map(operator.is_, validated, given[keep:])):
        return given
    return [*given[:keep], *validated]


def _delta_record(
    snapshot: Snapshot,
    added: Sequence[Message],
    timeline: list[TimelineEntry] | None,
    kept: int,
    keep: int,
    drop: int,
) -> bytes:
    """The log record of ``snapshot`` keeping stored messages ``drop:keep`` and entries."""
    update: dict[str, Any] = {"messages": list(added)}
    if timeline is not None:
        update["timeline"] = timeline[kept:]
    delta = Snapshot(
        snapshot.data.model_copy(update=update),
        app_data=snapshot.app_data,
        snapshot_id=snapshot.snapshot_id,
        created_at=snapshot.created_at,
    )
    head = b"%d:%d\n" % (drop, keep) if drop else b"%d\n" % keep
    return head + delta.to_json()


def _own_list(given: list[_Item] | None, owned: bool) -> list[_Item] | None:
    """``given`` when a list (itself when ``owned``, else a copy); ``None`` for anything else."""
    if type(given) is not list:
        return None
    return given if owned else list(given)


def _kept_messages(stored: list[Message] | None, items: list[Message] | None) -> int:
    """How many leading ``items`` are the ``stored`` messages (all of them), else 0."""
    if (
        items is not None
        and stored
        and len(stored) <= len(items)
        and stored_prefix(stored, items) == len(stored)
    ):
        return len(stored)
    return 0


class _Unread:
    """Sentinel: this manager has not read or written the latest snapshot yet."""


_UNREAD = _Unread()


class SessionManager:
    """Saves and restores one agent's snapshots of one session in a :class:`Storage`."""

    def __init__(
        self, session_id: str, storage: Storage, agent_id: str = "default", *, append: bool = True
    ) -> None:
        """Create it; ``append`` (the default) lets ``save_latest`` append deltas (see there)."""
        if not isinstance(append, bool):
            raise ArgumentTypeError(f"append must be a bool, not {type(append).__name__}")
        self.append: bool = append
        self.session_id: str = validate_segment(session_id, what="session_id")
        self.agent_id: str = validate_segment(agent_id, what="agent_id")
        if not isinstance(storage, Storage):
            raise ArgumentTypeError(
                f"storage must be a Storage (put/get/delete/list), not {type(storage).__name__}"
            )
        self.storage: Storage = storage
        # The storage's log capability, used only when appending is on.
        self._logged = as_logged(storage) if append else None
        self._prefix = f"session/{session_id}/scopes/agent/{agent_id}/snapshots/"
        # Digest of the latest snapshot as this manager last read or wrote it (None: there
        # was none); _UNREAD until then (the first write is then a plain put).
        self._latest: str | _Unread | None = _UNREAD
        # The messages and timeline of the latest snapshot as this manager last read or
        # wrote them (what a delta keeps), and the bytes of its stored value and of its log.
        self._messages: list[Message] | None = None
        self._timeline: list[TimelineEntry] | None = None
        # The bytes of ``_timeline`` stored, once a save needed them (None: not yet weighed).
        self._timeline_bytes: int | None = None
        # Whether ``_messages`` are all plain (``plain_messages``): only then may a prefix
        # check trust them (a message class with an ``==`` of its own decides it).
        self._plain = True
        self._base_bytes = 0
        self._log_bytes = 0
        # An owned list (never changed) whose first messages snapshot_data found to be
        # all of ``_messages``, with that very list: the save then needs no second look.
        self._extends: tuple[list[Message], list[Message]] | None = None

    def __repr__(self) -> str:
        """A developer-facing description."""
        return (
            f"SessionManager(session_id={self.session_id!r}, storage={self.storage!r}, "
            f"agent_id={self.agent_id!r})"
        )

    @property
    def latest_key(self) -> str:
        """The storage key of the latest snapshot."""
        return self._prefix + LATEST_NAME

    def snapshot_key(self, snapshot_id: str) -> str:
        """The storage key of the immutable snapshot ``snapshot_id`` (a UUID string)."""
        if not is_snapshot_id(snapshot_id):
            raise SnapshotMissingError(
                f"no snapshot {snapshot_id!r}: snapshot ids are canonical UUID strings"
            )
        return f"{self._prefix}{snapshot_id}{_SUFFIX}"

    async def save_latest(self, snapshot: Snapshot) -> None:
        """Atomically replace the latest snapshot with ``snapshot``.

        Once this manager has read or written the latest snapshot, the write is a
        compare-and-swap (when the storage can, see ``Storage``): if another writer
        replaced it since, nothing is written and ``CHECKPOINT_CONFLICT`` is raised, so an
        acknowledged update is never overwritten by a writer that did not see it. Call
        :meth:`load_latest` again, apply the change, and save.

        With ``SessionManager(..., append=True)``, a storage that keeps logs
        (:class:`~framework_agents.sessions._base.LoggedStorage`: every shipped storage
        is), and ``snapshot``'s
        messages extending the ones this manager last read or wrote, only the new messages
        and the other fields are appended (one record, one ``fdatasync`` on disk); the
        whole snapshot is stored again once the log outgrows half of it. A ``timeline``
        is appended the same way: the record holds the entries added since, and when
        the messages do not extend (a window cut them) the record holds the messages
        whole but still only the new entries, so a save never writes the whole timeline
        again but when the log is folded. On by default
        (``append=False`` turns it off): ``snapshot_latest.json`` alone then no longer
        holds the latest state (readers must go through :meth:`load_latest`, which always
        applies a log it finds), so it is stored with ``schema_version`` 2 on such a
        storage, which a release that cannot apply a log refuses (``SNAPSHOT_CORRUPT``)
        instead of reading a stale state; every other snapshot is version 1.
        """
        if not isinstance(snapshot, Snapshot):
            raise ArgumentTypeError(
                f"save_latest() takes a Snapshot, not {type(snapshot).__name__}"
            )
        if isinstance(self._latest, _Unread):
            # Never read (or the read failed): read it now, so that a corrupt value is
            # refused (SNAPSHOT_CORRUPT, left untouched) and the write is a compare-and-swap
            # against what is there, never a blind put over another writer's update.
            await self.load_latest()
        if await self._append_latest(snapshot):
            return
        if self._logged is not None:
            # A log may follow it: a release that cannot apply one refuses it.
            snapshot = snapshot.model_copy(update={"schema_version": SNAPSHOT_FORMAT_VERSION})
        data = snapshot.to_json()
        known = self._latest
        if isinstance(known, _Unread):
            await self.storage.put(self.latest_key, data)
        else:
            await swap(self.storage, self.latest_key, data, known)
        self._latest = digest(data)
        self._remember(snapshot, len(data), 0)

    async def _append_latest(self, snapshot: Snapshot) -> bool:
        """Append a delta record when the storage can and it keeps what is stored; else False.

        The record keeps the stored messages: all of them (the history extends), or, to
        keep a stored timeline, those after the front a window dropped, else the prefix
        they share; and the stored timeline entries.
        """
        logged = self._logged
        known, messages, new = self._latest, self._messages, snapshot.data.messages
        if logged is None or not isinstance(known, str) or messages is None or new is None:
            return False
        if not self._plain:  # its record cannot be trusted by a prefix check
            return False
        timeline = snapshot.data.timeline
        kept = _kept_entries(self._timeline, timeline)
        if kept is None:
            return False
        span = self._kept_span(messages, new, kept)
        if span is None:
            return False  # nothing stored is kept: publishing costs no more
        keep, drop = span
        cut = drop > 0 or keep < len(messages)  # the history does not extend the stored one
        added = new[keep - drop :]
        record = _delta_record(snapshot, added, timeline, kept, keep, drop)
        if self._log_bytes + len(record) > max(FOLD_RATIO * self._base_bytes, FOLD_MIN_BYTES):
            return False
        if cut and 2 * len(record) >= self._stored_timeline_bytes():
            # Each byte appended costs about two more at the next fold: a record instead
            # of the whole snapshot pays once the timeline it keeps outweighs that.
            return False
        self._latest = await logged.append_logged(self.latest_key, record, known)
        self._appended(messages, keep, drop, added, timeline, kept)
        self._log_bytes += len(record)
        return True

    def _kept_span(
        self, messages: list[Message], new: list[Message], kept: int
    ) -> tuple[int, int] | None:
        """The stored messages a record keeps, as ``(keep, drop)``; ``None``: none worth it."""
        proof, self._extends = self._extends, None
        if proof is not None and proof[0] is new and proof[1] is messages:
            return len(messages), 0  # found by snapshot_data; nothing changed since
        keep = stored_prefix(messages, new)
        if keep == len(messages):
            return keep, 0
        if not kept:
            return None
        drop = _slid(messages, new)
        return (len(messages) if drop else keep), drop

    def _appended(
        self,
        messages: list[Message],
        keep: int,
        drop: int,
        added: Sequence[Message],
        timeline: list[TimelineEntry] | None,
        kept: int,
    ) -> None:
        """Bring the stored messages and timeline up to an appended record."""
        del messages[keep:]
        del messages[:drop]
        messages += added  # its own list: extended, never copied (the history's size)
        self._plain = plain_messages(added)
        if timeline is not None:
            if self._timeline_bytes is not None and kept:
                self._timeline_bytes += len(_ENTRIES.dump_json(timeline[kept:]))
            else:
                self._timeline_bytes = None
            self._timeline = _kept_list(self._timeline, timeline, kept)

    def _stored_timeline_bytes(self) -> int:
        """The bytes the stored timeline takes in a snapshot (weighed once, then kept up)."""
        if self._timeline_bytes is None:
            self._timeline_bytes = len(_ENTRIES.dump_json(self._timeline or []))
        return self._timeline_bytes

    def _remember(
        self, snapshot: Snapshot, base_bytes: int, log_bytes: int, *, parsed: bool = False
    ) -> None:
        """Keep ``snapshot``'s messages and timeline as the stored ones.

        ``parsed``: read from JSON, so plain by construction (no look at each of them).
        """
        messages, timeline = snapshot.data.messages, snapshot.data.timeline
        self._extends = None
        self._messages = None if messages is None else list(messages)
        self._timeline = None if timeline is None else list(timeline)
        self._timeline_bytes = None
        self._plain = parsed or messages is None or plain_messages(messages)
        self._base_bytes = base_bytes
        self._log_bytes = log_bytes

    def snapshot_data(
        self,
        messages: list[Message] | None = None,
        state: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        *,
        timeline: list[TimelineEntry] | None = None,
        owned: bool = False,
    ) -> SnapshotData:
        """``SnapshotData(messages, state, system_prompt, timeline=...)``, checking what is new.

        The messages and timeline entries this manager last read or wrote are known
        valid: when ``messages`` (``timeline``) starts with those same objects, only the
        rest is checked, so building the next latest snapshot costs what the run added
        (what ``Agent`` does each run). Same errors as the constructor (``STATE_NOT_JSON``).

        ``owned=True``: the caller never changes these lists again (an agent's save
        passes its history and timeline, lists it replaces rather than changes, but for
        a timeline's entries recorded after the save): the data then holds those very
        lists, so a save makes no list of the history's size (a copy touches every
        message object, a cache miss each on a long history, and hands the collector a
        list it traverses). Otherwise the data holds copies, so that changing a list
        afterwards cannot change what was checked.
        """
        stored = self._messages if self._plain else None
        # The manager's own copies (unless ``owned``): user code the comparison runs (a
        # value's ``__eq__``) cannot change what was compared.
        items = _own_list(messages, owned)
        keep = _kept_messages(stored, items)
        # Only a list never changed may skip the save's own check (``_append_latest``).
        self._extends = (
            (items, stored) if owned and keep and items is not None and stored is not None else None
        )
        entries = _own_list(timeline, owned)
        kept = _kept_entries(self._timeline, entries) or 0  # 0 without a timeline
        lists = (items is not None or messages is None) and (
            entries is not None or timeline is None
        )
        if (keep or kept) and lists:
            # Validated when stored: pydantic would look at every one of them again (a
            # cache miss each on a long history), a copy of the list only counts
            # references. (Not a wrap validator: in a JSON parse that would build every
            # message as a dict first.)
            data = _tails(items, keep, entries, kept, state, system_prompt)
            if data is not None:
                return data  # else raised again below, naming the index in the whole list
        with stored_messages(stored):
            return SnapshotData(messages, state, system_prompt, timeline=timeline)

    async def load_latest(self) -> Snapshot | None:
        """The latest snapshot, or ``None`` when the session has none (``SNAPSHOT_CORRUPT``)."""
        logged = as_logged(self.storage)
        if logged is not None:
            raw, records, tag = await logged.read_logged(self.latest_key)
        else:
            raw = await self.storage.get(self.latest_key)
            records, tag = [], None if raw is None else digest(raw)
        if raw is None:
            self._latest = None
            self._extends = None
            self._messages = None
            self._timeline = None
            self._timeline_bytes = None
            return None
        source = f"snapshot {self.latest_key!r}"
        snapshot = Snapshot.from_json(raw, source=source)
        if snapshot.schema_version != PLAIN_SNAPSHOT_FORMAT_VERSION:
            # Version 2 describes the stored form (a log may follow), not the snapshot:
            # with its log applied, the snapshot is a plain one again.
            snapshot = snapshot.model_copy(update={"schema_version": PLAIN_SNAPSHOT_FORMAT_VERSION})
        for record in records:
            snapshot = _apply(snapshot, record, source)
        self._latest = tag
        self._remember(snapshot, len(raw), sum(len(r) for r in records), parsed=True)
        return snapshot

    async def save_snapshot(
        self, data: SnapshotData | Mapping[str, Any], app_data: Any = None
    ) -> str:
        """Store a new immutable snapshot of ``data``; return its id."""
        if not isinstance(data, SnapshotData):
            if not isinstance(data, Mapping):
                raise ArgumentTypeError(
                    f"save_snapshot() takes SnapshotData or a mapping, not {type(data).__name__}"
                )
            try:
                data = SnapshotData.model_validate(data)
            except ValidationError as exc:
                raise InvalidArgumentError(
                    f"save_snapshot() data is wrongly shaped: {exc}"
                ) from None
        snapshot = Snapshot(data, app_data=app_data)
        await self.storage.put(self.snapshot_key(snapshot.snapshot_id), snapshot.to_json())
        return snapshot.snapshot_id

    async def list_snapshot_ids(self) -> list[str]:
        """Ids of the immutable snapshots, oldest first (UUIDv7 ids sort by time)."""
        ids = []
        for key in await self.storage.list(self._prefix):
            name = key[len(self._prefix) :]
            if name.endswith(_SUFFIX) and is_snapshot_id(name[: -len(_SUFFIX)]):
                ids.append(name[: -len(_SUFFIX)])
        return sorted(ids)

    async def restore_snapshot(self, snapshot_id: str) -> Snapshot:
        """The immutable snapshot ``snapshot_id`` (``SNAPSHOT_MISSING`` when unknown)."""
        key = self.snapshot_key(snapshot_id)
        raw = await self.storage.get(key)
        if raw is None:
            raise SnapshotMissingError(
                f"no snapshot {snapshot_id!r} in session {self.session_id!r}"
            )
        snapshot = Snapshot.from_json(raw, source=f"snapshot {key!r}")
        if snapshot.snapshot_id != snapshot_id:
            raise SnapshotCorruptError(
                f"snapshot {key!r} holds id {snapshot.snapshot_id!r}, not {snapshot_id!r}"
            )
        return snapshot

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """Remove the immutable snapshot ``snapshot_id`` (no-op when it does not exist)."""
        await self.storage.delete(self.snapshot_key(snapshot_id))

    async def forget(self) -> None:
        """Forget the whole session (every agent's snapshots in it).

        On an encrypted storage (``cipher=``) the session's data key is destroyed first,
        so every copy of its data (log records not yet folded, database pages not yet
        vacuumed, backups) is unreadable at once; then its values are deleted. On a
        plain storage its values are deleted.
        """
        scope = f"session/{self.session_id}"
        forget_scope = getattr(self.storage, "forget_scope", None)
        if callable(forget_scope):
            await forget_scope(scope)
        for key in await self.storage.list(scope + "/"):
            await self.storage.delete(key)
        self._latest = _UNREAD
        self._messages = None
        self._timeline = None
        self._timeline_bytes = None
        self._extends = None
