"""Snapshots: a versioned, JSON-serialisable picture of an agent's messages, state and prompt.

Stored form (one JSON document)::

    {"schema_version": 1,
     "snapshot_id": "0190f6c2-...",           # UUIDv7: time-ordered
     "created_at": "2024-07-01T12:00:00Z",    # timezone-aware UTC
     "data": {"messages": [...], "state": {...}, "system_prompt": "...",
              "timeline": [...]},             # present fields only
     "app_data": <any JSON value or null>}

``timeline`` (the agent's :class:`~framework_agents.timeline.TimelineEntry` list, revs
growing) is what an agent's session save adds; no preset selects it and a snapshot
without it (every one stored before it existed) reads as before.

Schema-version policy: a reader accepts every version up to :data:`SNAPSHOT_FORMAT_VERSION`
and refuses a newer one with ``SNAPSHOT_CORRUPT`` instead of guessing; unknown keys are an
error too (never silently dropped). Any unreadable or wrongly shaped document raises
:class:`~framework_agents.errors.SnapshotCorruptError`.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import operator
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticSerializationError

from .._crypto import is_sealed, sealed_without_cipher
from .._persist import (
    PARSE_SLICE,
    json_problem,
    overlong_int,
    split_messages,
    stored_prefix,
    strict_loads,
)
from .._pydantic_fast import share_fields_set
from .._util import as_utc
from ..errors import AgentError, SnapshotCorruptError, SnapshotFieldError, StateNotJsonError
from ..messages import (
    REQUIRED,
    Message,
    Unset,
    constructor_only,
    show_required,
    summary_repr_args,
    validate_into,
)
from ..timeline import TimelineEntry

__all__ = [
    "PLAIN_SNAPSHOT_FORMAT_VERSION",
    "SNAPSHOT_FIELDS",
    "SNAPSHOT_FORMAT_VERSION",
    "SNAPSHOT_PRESETS",
    "Snapshot",
    "SnapshotData",
    "is_snapshot_id",
    "new_snapshot_id",
    "select_snapshot_fields",
    "stored_messages",
]

#: The newest version of the stored snapshot document this release reads and writes.
#: 2: the latest snapshot of a ``SessionManager(..., append=True)``, which a log of
#: deltas may follow: a release that cannot apply the log refuses it instead of reading
#: a stale state.
SNAPSHOT_FORMAT_VERSION = 2
#: The version of every other snapshot (no log follows it): every release reads it.
PLAIN_SNAPSHOT_FORMAT_VERSION = 1
#: The fields a snapshot's owner selects (``select_snapshot_fields``); an agent's session
#: save adds its ``timeline`` besides.
SNAPSHOT_FIELDS = frozenset({"messages", "state", "system_prompt"})
#: Named bundles of fields for ``select_snapshot_fields``.
SNAPSHOT_PRESETS: dict[str, frozenset[str]] = {"session": frozenset({"messages", "state"})}


# -- ids ------------------------------------------------------------------------------

_uuid_lock = threading.Lock()
_uuid_last_ms = 0
_uuid_counter = 0
_COUNTER_BITS = 42  # 12 bits of rand_a + the top 30 bits of rand_b
_COUNTER_MAX = (1 << _COUNTER_BITS) - 1


def new_snapshot_id() -> str:
    """A fresh UUIDv7 string (RFC 9562): time-ordered, and strictly increasing per process.

    48 bits of Unix milliseconds, then a 42-bit counter (seeded randomly each millisecond,
    top bit clear so it has room to grow; RFC 9562 method 1), then 32 random bits. When the
    clock stands still or steps back the previous millisecond is reused and the counter
    incremented, so ids generated later in a process always sort after earlier ones.
    """
    global _uuid_last_ms, _uuid_counter
    with _uuid_lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _uuid_last_ms:
            _uuid_last_ms = now_ms
            _uuid_counter = int.from_bytes(os.urandom(6)) & (_COUNTER_MAX >> 1)
        else:
            _uuid_counter += 1
            if _uuid_counter > _COUNTER_MAX:  # 2**41 ids in one millisecond: borrow the next
                _uuid_last_ms += 1
                _uuid_counter = 0
        ms, counter = _uuid_last_ms, _uuid_counter
    rand_a = counter >> 30
    rand_b = ((counter & ((1 << 30) - 1)) << 32) | int.from_bytes(os.urandom(4))
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def is_snapshot_id(value: object) -> bool:
    """Whether ``value`` is a UUID in canonical form (lowercase, hyphenated)."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


# -- JSON values ----------------------------------------------------------------------


def _json_problem(value: Any, path: str) -> str | None:
    """Where ``value`` stops being plain JSON (the persistence layer's one rule), or ``None``."""
    return json_problem(value, path)


def _require_json(value: Any, what: str) -> Any:
    problem = _json_problem(value, what)
    if problem is not None:
        raise StateNotJsonError(f"snapshot {problem}")
    return value


#: Messages (and timeline entries) whose metadata and tool-call arguments were found plain
#: JSON, by ``id()`` (weakly: an entry goes with its object, so an id reused later is never
#: mistaken). Both are immutable once made (docs/agent.md), so one checked once stays
#: checked: a session's next snapshot checks what the run added, not the history again.
_JSON_CHECKED: dict[int, weakref.ref[BaseModel]] = {}


#: Messages known stored, while ``stored_messages`` holds them: a prefix of a new
#: ``SnapshotData``'s messages made of these same objects is not checked again.
_STORED: contextvars.ContextVar[Sequence[Message] | None] = contextvars.ContextVar(
    "framework_agents_stored_messages", default=None
)


@contextlib.contextmanager
def stored_messages(messages: Sequence[Message] | None) -> Iterator[None]:
    """Within it, ``SnapshotData`` skips a leading run of these same (stored) messages."""
    token = _STORED.set(messages)
    try:
        yield
    finally:
        _STORED.reset(token)


#: A stored snapshot this large has its messages parsed in slices
#: (``Snapshot._canonical_sliced``); a smaller one is parsed whole, which is as fast.
_SLICED_BYTES = 4 * PARSE_SLICE
#: What can follow the messages array of a stored snapshot (``SnapshotData``'s fields
#: in order, absent ones left out): another field of the data, else the data's end. The
#: end is tried only when no field follows: a timeline, a list too, ends the same way,
#: and cutting from the messages to its end leaves a shell that reads back.
_MESSAGES_CLOSINGS = (b'],"state":', b'],"system_prompt":', b'],"timeline":')
_MESSAGES_END = (b']},"app_data":',)

#: The validation context of a parse of stored bytes (``Snapshot._canonical``).
_STORED_BYTES: dict[str, bool] = {"stored_bytes": True}

_METADATA = operator.attrgetter("metadata")
_TOOL_CALLS = operator.attrgetter("tool_calls")
_RAN = operator.attrgetter("ran")
_REV = operator.attrgetter("rev")


def _checked_before(item: BaseModel) -> bool:
    ref = _JSON_CHECKED.get(id(item))
    return ref is not None and ref() is item


def _mark_checked(item: BaseModel) -> None:
    key = id(item)

    def gone(ref: weakref.ref[BaseModel]) -> None:
        if _JSON_CHECKED.get(key) is ref:
            del _JSON_CHECKED[key]

    _JSON_CHECKED[key] = weakref.ref(item, gone)


# -- models ---------------------------------------------------------------------------


def _absent(value: object) -> bool:
    return value is None


class SnapshotData(BaseModel):
    """What a snapshot holds; a field left ``None`` is absent (and is not restored)."""

    model_config = ConfigDict(extra="forbid")

    # An absent field (None) is left out of the stored form. Per field, not a wrapping
    # model serialiser: one of those makes the JSON serialiser build every message as a
    # Python dict first (60 ms for 10,000 messages instead of 6).
    messages: list[Message] | None = Field(None, exclude_if=_absent)
    state: dict[str, Any] | None = Field(None, exclude_if=_absent)
    system_prompt: str | None = Field(None, exclude_if=_absent)
    timeline: list[TimelineEntry] | None = Field(None, exclude_if=_absent)

    @constructor_only  # parsing a stored snapshot need not go through Python
    def __init__(
        self,
        messages: list[Message] | None = None,
        state: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        *,
        timeline: list[TimelineEntry] | None = None,
        **extra: Any,
    ) -> None:
        """Create it; arguments are described in the class docstring."""
        # Positionally in API.md's order or by keyword; ``extra`` only exists so that an
        # unknown field is pydantic's ValidationError.
        extra.update(messages=messages, state=state, system_prompt=system_prompt, timeline=timeline)
        validate_into(self, extra)

    @field_validator("state")
    @classmethod
    def _state_is_json(
        cls, value: dict[str, Any] | None, info: ValidationInfo
    ) -> dict[str, Any] | None:
        if value is not None and info.context is not _STORED_BYTES:
            _require_json(value, "state")
        return value

    @field_validator("messages")
    @classmethod
    def _messages_are_json(
        cls, value: list[Message] | None, info: ValidationInfo
    ) -> list[Message] | None:
        # Metadata and tool-call args are free-form: a NaN, datetime or set there would
        # be stored altered (null, a string, a list) or crash the serialiser. Each message
        # is checked once (``_JSON_CHECKED``), and a prefix known stored
        # (``stored_messages``, set by ``SessionManager.snapshot_data``) not at all.
        if not value or info.context is _STORED_BYTES:
            return value
        start = 0
        stored = _STORED.get()
        if (
            type(stored) is list
            and 0 < len(stored) <= len(value)
            and stored_prefix(stored, value) == len(stored)
        ):
            start = len(stored)
        # Only messages with metadata or tool calls need a look; finding them runs in C.
        tail = value[start:] if start else value
        flagged = map(
            operator.or_,
            map(bool, map(_METADATA, tail)),
            map(bool, map(_TOOL_CALLS, tail)),
        )
        for k in itertools.compress(range(len(tail)), flagged):
            msg, i = tail[k], start + k
            if _checked_before(msg):
                continue
            if msg.metadata:
                _require_json(msg.metadata, f"messages[{i}].metadata")
            for j, call in enumerate(msg.tool_calls):
                _require_json(call.args, f"messages[{i}].tool_calls[{j}].args")
            _mark_checked(msg)
        return value

    @field_validator("timeline")
    @classmethod
    def _timeline_grows(
        cls, value: list[TimelineEntry] | None, info: ValidationInfo
    ) -> list[TimelineEntry] | None:
        # Revs grow (what ``Timeline.merge`` relies on), and the arguments of the calls an
        # entry says ran are plain JSON, each entry looked at once (``_JSON_CHECKED``).
        if not value:
            return value
        revs = list(map(_REV, value))
        if any(map(operator.ge, revs, revs[1:])):
            raise ValueError(f"timeline revs must grow, not {revs}")
        if info.context is _STORED_BYTES:
            return value
        for i in itertools.compress(range(len(value)), map(bool, map(_RAN, value))):
            entry = value[i]
            if _checked_before(entry):
                continue
            for j, call in enumerate(entry.ran):
                _require_json(call.args, f"timeline[{i}].ran[{j}].args")
            _mark_checked(entry)
        return value

    @property
    def fields(self) -> set[str]:
        """The names of the selectable fields (``SNAPSHOT_FIELDS``) this snapshot carries.

        A ``timeline`` is not one of them: it is the agent's, added by its session save.
        """
        return {name for name in SNAPSHOT_FIELDS if getattr(self, name) is not None}

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """pydantic's, with a long message list shown by its ends and length."""
        return summary_repr_args(super().__repr_args__(), ("messages", "timeline"))


#: ``Snapshot(...)`` arguments left out (an explicit ``None`` is invalid, as when stored).
_NEW_SNAPSHOT_ID: Any = Unset("<new uuid7>")
_NOW: Any = Unset("<now, UTC>")


def _now_utc() -> datetime:
    return datetime.now(UTC)


class Snapshot(BaseModel):
    """One saved picture of an agent (``data``) plus ``app_data`` that rides along untouched."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = PLAIN_SNAPSHOT_FORMAT_VERSION
    snapshot_id: str = Field(default_factory=new_snapshot_id)
    created_at: AwareDatetime = Field(default_factory=_now_utc)
    data: SnapshotData
    app_data: Any = None

    @constructor_only  # parsing a stored snapshot need not go through Python
    def __init__(
        self,
        data: SnapshotData = REQUIRED,
        app_data: Any = None,
        snapshot_id: str = _NEW_SNAPSHOT_ID,
        created_at: datetime = _NOW,
        **extra: Any,
    ) -> None:
        """Create it; arguments are described in the class docstring."""
        # Positionally in API.md's order or by keyword; ``None`` draws a fresh UUIDv7 id /
        # the current UTC time. ``extra`` carries ``schema_version`` (and makes an unknown
        # field pydantic's ValidationError).
        if data is not REQUIRED:
            extra["data"] = data
        extra["app_data"] = app_data
        if snapshot_id is not _NEW_SNAPSHOT_ID:
            extra["snapshot_id"] = snapshot_id
        if created_at is not _NOW:
            extra["created_at"] = created_at
        validate_into(self, extra)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if not 1 <= value <= SNAPSHOT_FORMAT_VERSION:
            raise ValueError(
                f"schema_version {value} is not supported (this framework reads 1 to "
                f"{SNAPSHOT_FORMAT_VERSION}); upgrade framework-agents to read it"
            )
        return value

    @field_validator("snapshot_id")
    @classmethod
    def _uuid_id(cls, value: str) -> str:
        if not is_snapshot_id(value):
            raise ValueError(f"snapshot_id {value!r} is not a canonical UUID string")
        return value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value, "created_at")

    @field_validator("app_data")
    @classmethod
    def _app_data_is_json(cls, value: Any, info: ValidationInfo) -> Any:
        return value if info.context is _STORED_BYTES else _require_json(value, "app_data")

    def to_json(self) -> bytes:
        """The stored form of this snapshot (UTF-8 JSON); ``STATE_NOT_JSON`` if it has none."""
        # The state and app data are checked when the snapshot is made, but they are
        # mutable: a NaN put in afterwards would be written as null (pydantic's default),
        # so they are checked again here (they are small; the messages are immutable).
        _require_json(self.app_data, "app_data")
        if self.data.state is not None:
            _require_json(self.data.state, "data.state")
        try:
            return self.model_dump_json().encode()
        except (PydanticSerializationError, UnicodeEncodeError) as exc:
            # A lone surrogate in a string, or a value mutated in place after validation.
            raise StateNotJsonError(f"snapshot cannot be stored as JSON: {exc}") from None

    @classmethod
    def _canonical(cls, raw: bytes) -> Snapshot | None:
        """The snapshot ``raw`` holds, parsed in one pass, if it is exactly its stored form.

        A document that is byte for byte the serialisation of the snapshot it parses to
        cannot hold what the strict reader refuses: a duplicate key, a NaN, an escaped
        lone surrogate or a number written another way would each serialise differently
        (or not at all). That is every snapshot this package stored; anything else goes
        to the strict reader, which alone decides what is accepted and names the problem.
        So the plain-JSON validators are skipped here (``_STORED_BYTES``): what the JSON
        parser makes is plain JSON nested less deeply than ``MAX_JSON_DEPTH`` (its own
        bound is lower: a canary test), and what would not read back as it is fails the
        comparison. The messages share their pydantic fields sets (as a memory's load).
        """
        if overlong_int(raw) is not None:
            return None  # the strict reader applies the interpreter's lowered digit limit
        if len(raw) >= _SLICED_BYTES:
            sliced = cls._canonical_sliced(raw)
            if sliced is not None:
                return sliced
        snapshot = cls._exact(raw)
        if snapshot is not None and snapshot.data.messages:
            share_fields_set(snapshot.data.messages)
        return snapshot

    @classmethod
    def _canonical_sliced(cls, raw: bytes) -> Snapshot | None:
        """:meth:`_canonical` with the messages parsed in slices (``split_messages``).

        One parse of the whole document makes a pydantic fields set per message and, for
        the comparison, its whole serialisation again (a load peaked at 1.8x the memory
        of a database's rows read back). In slices, each compared with its
        serialisation, the messages share fields sets and nothing of the document's size
        is made twice; the rest (the document with no messages) is read and compared the
        same way. No validator of a snapshot looks at its messages but the plain-JSON
        one, which a stored document skips (``_STORED_BYTES``).
        """
        opening = b'"data":{"messages":['
        split = split_messages(raw, opening, _MESSAGES_CLOSINGS, cls._shell)
        if split is None:
            split = split_messages(raw, opening, _MESSAGES_END, cls._shell)
        if split is None:
            return None
        messages, shell = split
        data = shell.data.model_copy(update={"messages": messages})
        return shell.model_copy(update={"data": data})

    @classmethod
    def _shell(cls, rest: bytes) -> Snapshot | None:
        """A snapshot document with no messages, if it reads back byte for byte."""
        shell = cls._exact(rest)
        return shell if shell is not None and shell.data.messages == [] else None

    @classmethod
    def _exact(cls, raw: bytes) -> Snapshot | None:
        """The snapshot ``raw`` parses to in one pass, if it serialises back to ``raw``."""
        try:
            snapshot = cls.model_validate_json(raw, context=_STORED_BYTES)
            if snapshot.__pydantic_serializer__.to_json(snapshot) == raw:
                return snapshot
        except (
            ValidationError,
            PydanticSerializationError,
            AgentError,
            ValueError,
            OverflowError,
            RecursionError,
        ):
            pass
        return None

    @classmethod
    def from_json(cls, raw: bytes | str, *, source: str = "snapshot") -> Snapshot:
        """Parse a stored snapshot; anything unreadable raises ``SNAPSHOT_CORRUPT``."""
        if isinstance(raw, str):
            try:
                raw = raw.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise SnapshotCorruptError(f"{source} is not valid UTF-8: {exc}") from None
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise SnapshotCorruptError(
                f"{source} is a {type(raw).__name__}, not a JSON document (bytes or str)"
            )
        raw = bytes(raw)
        fast = cls._canonical(raw)
        if fast is not None:
            return fast
        try:
            # The memory reader's strictness: a duplicate key, NaN/Infinity or an escaped
            # lone surrogate would not read back equal once the snapshot is saved again.
            doc = strict_loads(raw)
        except (ValueError, RecursionError) as exc:
            if is_sealed(raw):  # a sealed store's value, read through plain storage
                raise sealed_without_cipher(source) from None
            raise SnapshotCorruptError(f"{source} is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise SnapshotCorruptError(f"{source} is not a JSON object")
        version = doc.get("schema_version")
        if type(version) is not int:
            raise SnapshotCorruptError(f"{source} has no integer schema_version")
        if version > SNAPSHOT_FORMAT_VERSION:
            raise SnapshotCorruptError(
                f"{source} has schema_version {version}, newer than this framework reads "
                f"({SNAPSHOT_FORMAT_VERSION}); upgrade framework-agents"
            )
        try:
            return cls.model_validate(doc)
        except (ValidationError, StateNotJsonError, RecursionError, OverflowError) as exc:
            raise SnapshotCorruptError(f"{source} is wrongly shaped: {exc}") from None


show_required(Snapshot, "data")


def select_snapshot_fields(
    preset: str | None = None,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
) -> set[str]:
    """The fields to snapshot: ``(preset's base - exclude) | include``.

    ``preset="session"`` gives ``{"messages", "state"}``; no preset gives the empty base.
    An unknown preset or field raises ``SNAPSHOT_FIELD``.
    """
    if preset is None:
        base: set[str] = set()
    elif isinstance(preset, str) and preset in SNAPSHOT_PRESETS:
        base = set(SNAPSHOT_PRESETS[preset])
    else:
        known = ", ".join(sorted(SNAPSHOT_PRESETS))
        raise SnapshotFieldError(f"unknown snapshot preset {preset!r} (known: {known})")
    include_set = _field_set(include, "include")
    exclude_set = _field_set(exclude, "exclude")
    return (base - exclude_set) | include_set


def _field_set(fields: Iterable[str] | None, what: str) -> set[str]:
    if fields is None:
        return set()
    if isinstance(fields, str):
        raise SnapshotFieldError(f"{what} must be a collection of field names, not a str")
    try:
        names = set(fields)
    except TypeError:
        raise SnapshotFieldError(f"{what} must be a collection of field names") from None
    unknown = names - SNAPSHOT_FIELDS
    if unknown:
        known = ", ".join(sorted(SNAPSHOT_FIELDS))
        bad = ", ".join(sorted(map(repr, unknown)))
        raise SnapshotFieldError(f"unknown snapshot field(s) {bad} in {what} (known: {known})")
    return names
