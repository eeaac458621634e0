"""What a memory bank stores: records, their revisions, and the rules every backend shares.

A record is stored as :class:`Row`: one revision of it, with the record's world clock
(``valid_from``/``valid_to``, in integer microseconds since the epoch, UTC, so every
backend compares the same numbers) and its expiry. The public form is
:class:`MemoryRecord`, with timezone-aware datetimes.

The rules every backend applies inside its own transaction live here, once:
:func:`place_on_timeline` (a record with a ``key`` closes the record it supersedes) and
:func:`row_from_json` / :func:`row_to_json` (the stored shape, checked on the way in:
``MEMORY_CORRUPT`` for anything else).
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import InvalidArgumentError, MemoryCorruptError

__all__ = [
    "MAX_K",
    "MAX_TEXT",
    "MemoryHit",
    "MemoryRecord",
    "Namespace",
    "Row",
    "check_namespace",
    "from_micros",
    "new_record_id",
    "place_on_timeline",
    "row_from_json",
    "row_to_json",
    "to_micros",
]

#: A namespace: a tuple of 1 to 8 non-empty strings, most general first.
Namespace = tuple[str, ...]

#: Most parts in a namespace, and characters in one part.
MAX_PARTS = 8
MAX_PART = 256
#: Most characters in a record's text, its kind and its key.
MAX_TEXT = 100_000
MAX_KIND = 64
MAX_KEY = 512
#: Largest ``k`` a search or a limit a list takes.
MAX_K = 1000


def check_namespace(namespace: object, name: str = "namespace") -> Namespace:
    """``namespace`` as a tuple of 1-8 non-empty strings, else ``INVALID_ARGUMENT``.

    A part may not hold NUL or ``/`` (the served form writes a namespace as ``a/b``, so a
    slash inside a part would be ambiguous), nor be longer than 256 characters.
    """
    if isinstance(namespace, list):
        namespace = tuple(namespace)
    if not isinstance(namespace, tuple) or not 1 <= len(namespace) <= MAX_PARTS:
        raise InvalidArgumentError(
            f"{name} must be a tuple of 1 to {MAX_PARTS} non-empty strings, not {namespace!r:.80}"
        )
    for part in namespace:
        if not isinstance(part, str) or not part or len(part) > MAX_PART:
            raise InvalidArgumentError(
                f"each part of {name} must be a non-empty string of at most {MAX_PART} "
                f"characters, not {part!r:.80}"
            )
        if "\x00" in part or "/" in part:
            raise InvalidArgumentError(f"a part of {name} may not hold NUL or '/': {part!r:.80}")
    return namespace


def to_micros(moment: datetime, name: str) -> int:
    """A timezone-aware datetime as integer microseconds since the epoch (naive: refused)."""
    if not isinstance(moment, datetime):
        raise InvalidArgumentError(f"{name} must be a datetime, not {moment!r:.60}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidArgumentError(f"{name} must be timezone-aware, not the naive {moment}")
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """Integer microseconds since the epoch as a timezone-aware UTC datetime."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def new_record_id() -> str:
    """A fresh record id (a UUID's 32 hex digits)."""
    return uuid.uuid4().hex


def derived_id(*parts: str) -> str:
    """A record id fixed by ``parts`` (a message's episode, an extraction's n-th record)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, "\x1f".join(("fa-bank", *parts))).hex


@dataclass(frozen=True, slots=True)
class Row:
    """One revision of a record as backends store it (times in microseconds, UTC)."""

    id: str
    revision: int
    namespace: Namespace
    kind: str
    key: str | None
    text: str
    metadata: dict[str, Any]
    valid_from: int
    valid_to: int | None
    recorded_at: int
    expires_at: int | None = None
    #: The embedder's vector of ``text`` (float32, little-endian), if it had one.
    vector: bytes | None = field(default=None, repr=False)

    def holds_at(self, moment: int) -> bool:
        """Whether the record is valid in the world at ``moment`` (microseconds)."""
        return self.valid_from <= moment and (self.valid_to is None or moment < self.valid_to)

    def expired(self, now: int) -> bool:
        """Whether the record's time to live has run out at ``now``."""
        return self.expires_at is not None and self.expires_at <= now

    def record(self) -> MemoryRecord:
        """The public form of this revision."""
        return MemoryRecord(
            id=self.id,
            namespace=self.namespace,
            text=self.text,
            kind=self.kind,
            key=self.key,
            metadata=json.loads(json.dumps(self.metadata)),
            valid_from=from_micros(self.valid_from),
            valid_to=None if self.valid_to is None else from_micros(self.valid_to),
            recorded_at=from_micros(self.recorded_at),
            revision=self.revision,
        )


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One record of a memory bank (one revision of it).

    ``valid_from``/``valid_to`` are when it holds in the world (``valid_to`` is ``None``
    while it holds); ``recorded_at``/``revision`` are when the bank learnt this revision
    and which one it is (1 for the first). Times are timezone-aware UTC datetimes.
    """

    id: str
    namespace: Namespace
    text: str
    kind: str
    key: str | None
    metadata: dict[str, Any]
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    revision: int

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON values (times as ISO 8601 strings, the namespace a list)."""
        return {
            "id": self.id,
            "namespace": list(self.namespace),
            "text": self.text,
            "kind": self.kind,
            "key": self.key,
            "metadata": self.metadata,
            "valid_from": self.valid_from.isoformat(),
            "valid_to": None if self.valid_to is None else self.valid_to.isoformat(),
            "recorded_at": self.recorded_at.isoformat(),
            "revision": self.revision,
        }


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A search result: the record and its relevance (higher is more relevant)."""

    record: MemoryRecord
    score: float

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON values."""
        return {"record": self.record.to_dict(), "score": self.score}


# -- the key timeline -----------------------------------------------------------------


def place_on_timeline(
    siblings: Iterable[Row], new: Row
) -> tuple[Row, list[tuple[str, int | None]]]:
    """Put ``new`` on the timeline of its key; the new row and the closings it causes.

    The records of one key in one namespace follow each other in the world: ordered by
    ``valid_from`` (then by id, so every backend agrees), each holds until the next one
    starts. ``new`` is placed among ``siblings`` (the other records of its key, latest
    revisions): the one before it, if it still holds when ``new`` starts, now ends there,
    and ``new`` ends where the one after it starts (``None``: it holds now). A record
    closed earlier (by a record forgotten since) stays closed where it was: a closing is
    never moved later, so remembering never makes a past record hold where it did not.
    The closings are ``(id, valid_to)`` for each sibling whose ``valid_to`` changes.
    """
    ordered = sorted((s for s in siblings if s.id != new.id), key=_timeline_order)
    before = [s for s in ordered if _timeline_order(s) < _timeline_order(new)]
    after = [s for s in ordered if _timeline_order(s) > _timeline_order(new)]
    closings: list[tuple[str, int | None]] = []
    last = before[-1] if before else None
    if last is not None and (last.valid_to is None or last.valid_to > new.valid_from):
        closings.append((last.id, new.valid_from))
    valid_to = after[0].valid_from if after else None
    return replace(new, valid_to=valid_to), closings


def _timeline_order(row: Row) -> tuple[int, str]:
    return (row.valid_from, row.id)


# -- the stored shape ------------------------------------------------------------------


def row_to_json(row: Row) -> dict[str, Any]:
    """The stored JSON form of ``row`` without its vector (backends keep that as bytes)."""
    return {
        "id": row.id,
        "revision": row.revision,
        "namespace": list(row.namespace),
        "kind": row.kind,
        "key": row.key,
        "text": row.text,
        "metadata": row.metadata,
        "valid_from": row.valid_from,
        "valid_to": row.valid_to,
        "recorded_at": row.recorded_at,
        "expires_at": row.expires_at,
    }


_FIELDS = frozenset(
    (
        "id",
        "revision",
        "namespace",
        "kind",
        "key",
        "text",
        "metadata",
        "valid_from",
        "valid_to",
        "recorded_at",
        "expires_at",
    )
)


def _int(value: object, *, optional: bool = False) -> bool:
    if value is None:
        return optional
    return isinstance(value, int) and not isinstance(value, bool)


def _content_ok(data: Mapping[str, Any]) -> bool:
    """Whether a stored record's id, revision, kind, key, text and metadata have their types."""
    return (
        isinstance(data["id"], str)
        and bool(data["id"])
        and _int(data["revision"])
        and data["revision"] >= 1
        and isinstance(data["kind"], str)
        and (data["key"] is None or isinstance(data["key"], str))
        and isinstance(data["text"], str)
        and isinstance(data["metadata"], dict)
    )


def _times_ok(data: Mapping[str, Any]) -> bool:
    """Whether a stored record's four times are integers (the two ends may be null)."""
    return (
        _int(data["valid_from"])
        and _int(data["valid_to"], optional=True)
        and _int(data["recorded_at"])
        and _int(data["expires_at"], optional=True)
    )


def row_from_json(data: object, vector: bytes | None = None, *, where: str = "bank") -> Row:
    """The :class:`Row` stored as ``data``; ``MEMORY_CORRUPT`` for any other shape."""
    if not isinstance(data, Mapping) or set(data) != _FIELDS:
        raise MemoryCorruptError(f"{where}: a stored memory record has the wrong shape")
    try:
        namespace = check_namespace(data["namespace"])
    except InvalidArgumentError:
        raise MemoryCorruptError(f"{where}: a stored record's namespace is invalid") from None
    well_formed = (
        _content_ok(data)
        and _times_ok(data)
        and (vector is None or isinstance(vector, bytes | bytearray | memoryview))
    )
    if not well_formed:
        raise MemoryCorruptError(f"{where}: stored memory record {data.get('id')!r:.40} is invalid")
    return Row(
        id=data["id"],
        revision=data["revision"],
        namespace=namespace,
        kind=data["kind"],
        key=data["key"],
        text=data["text"],
        metadata=data["metadata"],
        valid_from=data["valid_from"],
        valid_to=data["valid_to"],
        recorded_at=data["recorded_at"],
        expires_at=data["expires_at"],
        vector=None if vector is None else bytes(vector),
    )


def namespace_text(namespace: Namespace) -> str:
    """The canonical text of a namespace (a JSON list), as the database backends store it."""
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def key_digest(row: Row) -> str:
    """The name of a keyed row's timeline: SHA-256 (hex) of its namespace's text, NUL, its key."""
    assert row.key is not None
    return hashlib.sha256(f"{namespace_text(row.namespace)}\x00{row.key}".encode()).hexdigest()


# -- argument checks -------------------------------------------------------------------


def check_text(text: object, name: str = "text") -> str:
    """A record's text: a non-blank string of at most :data:`MAX_TEXT` characters."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"{name} must be a non-blank string, not {text!r:.60}")
    if len(text) > MAX_TEXT:
        raise InvalidArgumentError(f"{name} is {len(text)} characters; at most {MAX_TEXT}")
    return text


def check_short(value: object, name: str, limit: int, *, optional: bool = False) -> str | None:
    """A kind or a key: a non-empty string of at most ``limit`` characters."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > limit or "\x00" in value:
        raise InvalidArgumentError(
            f"{name} must be a non-empty string of at most {limit} characters, not {value!r:.60}"
        )
    return value


def check_metadata(metadata: object, name: str = "metadata") -> dict[str, Any]:
    """A JSON object (a dict of string keys and JSON values), copied; ``None`` is ``{}``."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"{name} must be a JSON object, not {metadata!r:.60}")
    try:
        text = json.dumps(dict(metadata), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{name} must be a JSON object: {exc}") from None
    copied: dict[str, Any] = json.loads(text)
    return copied


def check_kinds(kinds: object) -> frozenset[str] | None:
    """``kinds`` as a set of kind strings (``None``: every kind)."""
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = (kinds,)
    if not isinstance(kinds, Iterable):
        raise InvalidArgumentError(f"kinds must be a list of strings, not {kinds!r:.60}")
    items = list(kinds)
    for kind in items:
        check_short(kind, "each of kinds", MAX_KIND)
    return frozenset(items)


def check_count(value: object, name: str) -> int:
    """``k`` or ``limit``: an int from 1 to :data:`MAX_K`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise InvalidArgumentError(f"{name} must be an int from 1 to {MAX_K}, not {value!r:.40}")
    return value


def check_ttl_seconds(ttl: object) -> float | None:
    """A record's time to live: seconds > 0 (finite), or ``None``."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        ttl = ttl.total_seconds()
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvalidArgumentError(f"ttl must be a number of seconds > 0, not {ttl!r:.40}")
    if ttl <= 0:
        raise InvalidArgumentError(f"ttl must be a number of seconds > 0, not {ttl!r}")
    return float(ttl)


def check_new_record_id(record_id: object) -> str:
    """The id of a record to store: 32 lowercase hex digits, like :func:`new_record_id`'s.

    Backends rely on it (the directory backend's change log has fixed-width entries).
    """
    if (
        not isinstance(record_id, str)
        or len(record_id) != 32
        or any(c not in "0123456789abcdef" for c in record_id)
    ):
        raise InvalidArgumentError(
            f"a new record id is 32 lowercase hex digits, not {record_id!r:.60}"
        )
    return record_id


def check_record_id(record_id: object) -> str:
    """A record id: a non-empty string of at most 128 characters."""
    if not isinstance(record_id, str) or not record_id or len(record_id) > 128:
        raise InvalidArgumentError(f"a record id is a non-empty string, not {record_id!r:.60}")
    return record_id
