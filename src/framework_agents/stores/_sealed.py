"""The sealed forms of a database store's message bodies and checkpoint heads (internal).

With ``cipher=``, the SQLite, PostgreSQL and Redis stores keep the same rows, each value
sealed where the shared codec makes it (``MergingMemory._rows`` / ``_loaded``,
``LeasedCheckpointer._plan`` / ``_loaded``). A sealed value is still a JSON object that
names its message's ``id`` in the clear, so the database logic that reads a body's id
(deduplication, merges) works unchanged:

* a memory message, and a thread message saved alone: ``{"id":"<message id>","sealed":
  "fae1.<base64 envelope>"}``, its associated data binding the kind
  (``memory.message`` or ``checkpoint.message``), the memory key or thread id, the
  message id (and, in a thread, its position) and the message format version;
* a thread's *group*: the messages one checkpoint save appends (two or more, at most
  ``GROUP_MAX``) are one envelope of their comma-joined bodies, so a load opens one
  envelope a save instead of one a message. One row per message still: the group's first
  row is ``{"id":…,"count":n,"sealed":"fae1.…"}``, each following row
  ``{"id":…,"group":<first position>}``. The associated data (kind
  ``checkpoint.messages``) binds the thread id, the first position, the count, the
  first row's id, the exact bytes of every other row in order, and the format version:
  a row dropped from or added to a group, a member's id changed, a group moved to
  another position or thread, its count changed, all fail to authenticate. Binding the
  other rows' bytes, not ids parsed out of them, keeps a load from parsing them;
* a checkpoint head: ``{"sealed":"fae1.<base64 envelope>"}``, bound to the thread id and
  the history's length stored beside it (a head replayed from another length of the
  thread does not authenticate); with the head authenticated, a row count other than
  that length is ``STORE_INTEGRITY`` too.

Why threads only: a thread's log is only ever cut at one place and appended to (a save
keeps a stored prefix), and it is always read whole, so a group is never read in part.
A save whose kept prefix ends inside a group starts writing at that group's start (it is
re-sealed with the new messages: :func:`~._checkpointer.group_keep`), and a save also
takes in the group before it while that is no bigger than what it writes (up to
``GROUP_MAX``), so a thread grown a turn a save holds groups of growing sizes, not one
per save. A memory's rows are cut at the front by its window, merged with other
writers' appends and looked up by id inside the database (SQL, Lua), which would then
have to cut or re-seal groups: memories keep the per-message form.

Rows of the per-message form (what earlier releases wrote) are read as groups of one
and never rewritten except by a save that re-seals their group or by rotation
(:func:`reseal_thread`: a group is re-sealed in its first row, its other rows hold only
ids). A group is no better against a replay of an older version of the same thread
than the per-message form is: a group from an older save with the same first position
and the same ids (a message edited in place) authenticates, as a single body would.

The message id stays plain, as keys and thread ids do. A body or head that is plain, or
does not authenticate for its row, is ``STORE_INTEGRITY``, left as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from .._crypto import TEXT_PREFIX, Cipher, Place
from ..checkpoint.model import CHECKPOINT_FORMAT_VERSION
from ..errors import StoreIntegrityError
from ..messages import MESSAGES_FORMAT_VERSION

__all__ = [
    "CHECKPOINT_GROUP",
    "CHECKPOINT_MESSAGE",
    "GROUP_MAX",
    "group_place",
    "open_thread",
    "reseal_thread",
    "seal_group",
    "MEMORY_MESSAGE",
    "is_sealed_body",
    "open_bodies",
    "message_place",
    "open_body",
    "open_head",
    "reseal_body",
    "reseal_head",
    "seal_body",
    "seal_head",
]

MEMORY_MESSAGE = "memory.message"
CHECKPOINT_MESSAGE = "checkpoint.message"
_SEALED_KEY = b'"sealed":"'
#: A sealed value's key and the start of its text, as :func:`seal_body` writes them.
_SEALED_VALUE = _SEALED_KEY + TEXT_PREFIX.encode("ascii")
_BODY_MARK = b'",' + _SEALED_VALUE  # after a body's id


def message_place(kind: str, where: str, msg_id: str, index: int | None) -> Place:
    """The place of a message body (``index``: its position in a thread, if bound)."""
    position = msg_id if index is None else f"{index}:{msg_id}"
    return Place(kind, where, position, MESSAGES_FORMAT_VERSION)


def seal_body(
    cipher: Cipher, kind: str, where: str, msg_id: str, body: bytes, index: int | None = None
) -> bytes:
    """The sealed form of one message body."""
    text = cipher.seal_text(body, message_place(kind, where, msg_id, index))
    return b'{"id":%s,"sealed":"%s"}' % (json.dumps(msg_id).encode(), text.encode("ascii"))


def _parts(body: bytes, kind: str, where: str) -> tuple[str, str]:
    """(message id, sealed text) of a sealed body; STORE_INTEGRITY for anything else."""
    try:
        found = json.loads(body) if _SEALED_KEY in body else None
    except ValueError:
        found = None
    if (
        not isinstance(found, dict)
        or found.keys() != {"id", "sealed"}
        or not isinstance(found["id"], str)
        or not isinstance(found["sealed"], str)
    ):
        place = Place(kind, where)
        raise StoreIntegrityError(
            f"a message of {place.describe()} is plain (not sealed) in an encrypted store: "
            "planted, or written without the cipher; left as it is (a store that holds "
            "plain data is migrated with rotate())"
        )
    return found["id"], found["sealed"]


def open_body(
    cipher: Cipher, kind: str, where: str, body: bytes, index: int | None = None
) -> bytes:
    """The plain JSON of one sealed message body (STORE_INTEGRITY otherwise)."""
    msg_id, text = _parts(body, kind, where)
    return cipher.open_text(text, message_place(kind, where, msg_id, index))


def _fast_parts(body: bytes) -> tuple[str, str] | None:
    """(id, sealed text) of a body exactly as :func:`seal_body` wrote it, else ``None``."""
    at = body.rfind(_BODY_MARK)
    if not body.startswith(b'{"id":"') or not body.endswith(b'"}') or at < 7:
        return None
    raw_id = body[7:at]
    if b"\\" in raw_id or b'"' in raw_id:
        return None  # an escaped id: the JSON reader decodes it
    try:
        return raw_id.decode("ascii"), body[at + 12 : -2].decode("ascii")
    except UnicodeDecodeError:
        return None


def open_bodies(
    cipher: Cipher,
    kind: str,
    where: str,
    bodies: Sequence[bytes],
    *,
    indexed: bool,
    first: int = 0,
) -> list[bytes]:
    """:func:`open_body` of each body (``indexed``: bound to positions ``first``, ...)."""
    items = []
    for i, body in enumerate(bodies, first):
        parts = _fast_parts(body) or _parts(body, kind, where)
        items.append((parts[1], parts[0] if not indexed else f"{i}:{parts[0]}"))
    return cipher.open_texts(kind, where, MESSAGES_FORMAT_VERSION, items)


def is_sealed_body(body: bytes) -> bool:
    """Whether a stored body or head is in a sealed form (says nothing about authenticity)."""
    return body.startswith(b"{") and _SEALED_VALUE in body


def head_place(thread_id: str, length: int) -> Place:
    """The place of a checkpoint head: its thread, bound to the history's length."""
    return Place("checkpoint.head", thread_id, str(length), CHECKPOINT_FORMAT_VERSION)


def seal_head(cipher: Cipher, thread_id: str, length: int, head: bytes) -> bytes:
    """The sealed form of a checkpoint head."""
    text = cipher.seal_text(head, head_place(thread_id, length))
    return b'{"sealed":"%s"}' % text.encode("ascii")


_SEALED_HEAD = re.compile(rb'\{\s*"sealed"\s*:\s*"' + re.escape(TEXT_PREFIX.encode()))


def is_sealed_head(head: bytes) -> bool:
    """Whether a stored head is a sealed one (``{"sealed": "fae1...."}``), by its shape."""
    # A plain head is a ThreadCheckpoint's JSON, whose first key is never "sealed"; a
    # database may give the JSON back spaced ('{"sealed": "fae1.').
    return _SEALED_HEAD.match(head) is not None


def open_head(cipher: Cipher, thread_id: str, length: int, head: bytes) -> bytes:
    """The plain head JSON of a sealed head (STORE_INTEGRITY otherwise)."""
    place = head_place(thread_id, length)
    try:
        found = json.loads(head) if _SEALED_KEY in head else None
    except ValueError:
        found = None
    if not isinstance(found, dict) or found.keys() != {"sealed"}:
        raise StoreIntegrityError(
            f"{place.describe()} is plain (not sealed) in an encrypted store: planted, or "
            "written without the cipher; left as it is (a store that holds plain data is "
            "migrated with rotate())"
        )
    text = found["sealed"]
    if not isinstance(text, str):
        raise StoreIntegrityError(f"{place.describe()} is a damaged sealed value")
    return cipher.open_text(text, place)


def reseal_body(
    cipher: Cipher,
    kind: str,
    where: str,
    body: bytes,
    index: int | None = None,
    *,
    migrate: bool,
) -> bytes | None:
    """``body`` sealed under the current key (``None``: it already is).

    A plain body is sealed when ``migrate`` (a store written without the cipher), else
    ``STORE_INTEGRITY``.
    """
    if not is_sealed_body(body):
        if not migrate:
            open_body(cipher, kind, where, body, index)  # raises: plain
        msg_id = _plain_id(body, kind, where)
        return seal_body(cipher, kind, where, msg_id, body, index)
    msg_id, text = _parts(body, kind, where)
    place = message_place(kind, where, msg_id, index)
    envelope = cipher.open_text(text, place)  # authenticates (raises if not)
    if cipher.key_id_of(_envelope(text)) == cipher.current:
        return None
    return seal_body(cipher, kind, where, msg_id, envelope, index)


def reseal_head(
    cipher: Cipher, thread_id: str, length: int, head: bytes, *, migrate: bool
) -> bytes | None:
    """A head sealed under the current key (``None``: it already is); see :func:`reseal_body`."""
    if not is_sealed_body(head):
        if not migrate:
            open_head(cipher, thread_id, length, head)  # raises: plain
        return seal_head(cipher, thread_id, length, head)
    plain = open_head(cipher, thread_id, length, head)
    text = json.loads(head)["sealed"]
    if cipher.key_id_of(_envelope(text)) == cipher.current:
        return None
    return seal_head(cipher, thread_id, length, plain)


def _envelope(text: str) -> bytes:
    from .._crypto import text_envelope

    return text_envelope(text, Place("", ""))


def _plain_id(body: bytes, kind: str, where: str) -> str:
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("id"), str):
        raise StoreIntegrityError(
            f"a message of {Place(kind, where).describe()} is neither sealed nor a message; "
            "left as it is"
        )
    msg_id: str = found["id"]
    return msg_id


# -- a thread's groups ----------------------------------------------------------------------

#: The kind of a thread's group envelope (one per save's run of appended messages).
CHECKPOINT_GROUP = "checkpoint.messages"
#: The most messages one group holds: what a save that changes a message inside a group
#: re-seals at most, besides what it appends.
GROUP_MAX = 256
_COUNT = b',"count":'
_AFTER_COUNT = b',"sealed":"'
_ID_OPEN = b'{"id":'


def group_place(where: str, first: int, raw_id: bytes, members: Sequence[bytes]) -> Place:
    """The place of the group at position ``first`` of thread ``where``.

    Its position binds the first position, the count, the first row's id (``raw_id``,
    the JSON string that row holds) and the exact bytes of every other row of the group
    in order (each names its id and the group; none holds a newline, the separator): a
    group moved, cut, grown, reordered or given another id does not authenticate.
    """
    joined = b"\n".join(members)
    if joined.count(b"\n") != max(0, len(members) - 1):
        raise _altered(where, first)
    position = b"%d:%d:%s\n%s" % (first, len(members) + 1, raw_id, joined)
    try:
        text = position.decode("ascii")
    except UnicodeDecodeError:
        raise _altered(where, first) from None
    return Place(CHECKPOINT_GROUP, where, text, MESSAGES_FORMAT_VERSION)


def _altered(where: str, first: int) -> StoreIntegrityError:
    return StoreIntegrityError(
        f"the message group at {first} of {Place(CHECKPOINT_GROUP, where).describe()} has "
        "a row in a form the cipher never writes: altered; left as it is"
    )


def _raw_id(msg_id: str) -> bytes:
    return json.dumps(msg_id).encode("ascii")


def _lead_row(raw_id: bytes, count: int, text: str) -> bytes:
    return b'{"id":%s,"count":%d,"sealed":"%s"}' % (raw_id, count, text.encode("ascii"))


def _member_suffix(first: int) -> bytes:
    return b',"group":%d}' % first


def seal_group(
    cipher: Cipher, where: str, first: int, ids: Sequence[str], bodies: Sequence[bytes]
) -> list[bytes]:
    """The rows of messages appended together at position ``first`` of thread ``where``.

    One message is today's per-message form (:func:`seal_body`); more are one group: the
    first row ``{"id":…,"count":n,"sealed":"fae1.…"}`` holds the envelope of all their
    bodies (comma-joined), each following row ``{"id":…,"group":first}``.
    """
    if len(bodies) == 1:
        return [seal_body(cipher, CHECKPOINT_MESSAGE, where, ids[0], bodies[0], first)]
    suffix = _member_suffix(first)
    members = [_ID_OPEN + _raw_id(i) + suffix for i in ids[1:]]
    raw_id = _raw_id(ids[0])
    text = cipher.seal_text(b",".join(bodies), group_place(where, first, raw_id, members))
    return [_lead_row(raw_id, len(ids), text), *members]


def _loads_row(body: bytes) -> dict[str, object] | None:
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _lead(body: bytes) -> tuple[bytes, int, str] | None:
    """(raw id, count, sealed text) of a group's first row; ``None``: not one."""
    if b'"count"' not in body:
        return None
    return _lead_as_written(body) or _lead_parsed(body)


def _lead_as_written(body: bytes) -> tuple[bytes, int, str] | None:
    """:func:`_lead` of a row in the very form :func:`_lead_row` writes, unparsed.

    The fast path: ``None`` for a row in any other form (:func:`_lead_parsed` decides).
    """
    at = body.find(_COUNT, 7)
    end = body.find(_AFTER_COUNT, at) if at > 0 else -1
    if not (body.startswith(_ID_OPEN) and body.endswith(b'"}') and end > 0):
        return None
    digits = body[at + len(_COUNT) : end]
    if not digits.isdigit() or digits.startswith(b"0"):
        return None
    try:
        return body[6:at], int(digits), body[end + len(_AFTER_COUNT) : -2].decode("ascii")
    except UnicodeDecodeError:
        return None


def _lead_parsed(body: bytes) -> tuple[bytes, int, str] | None:
    """:func:`_lead` of a row of any JSON form: exactly the fields ``id``, ``count``, ``sealed``."""
    found = _loads_row(body)
    if (
        found is None
        or found.keys() != {"id", "count", "sealed"}
        or not isinstance(found["id"], str)
        or type(found["count"]) is not int
        or found["count"] < 1
        or not isinstance(found["sealed"], str)
    ):
        return None
    return _raw_id(found["id"]), found["count"], found["sealed"]


def _is_member(body: bytes) -> bool:
    found = _loads_row(body) if b'"group"' in body else None
    return found is not None and found.keys() == {"id", "group"}


def _group(
    cipher: Cipher, where: str, bodies: Sequence[bytes], first: int, lead: tuple[bytes, int, str]
) -> tuple[Place, bytes]:
    """(place, plain comma-joined bodies) of the group at ``first`` (STORE_INTEGRITY)."""
    raw_id, count, text = lead
    if first + count > len(bodies):
        raise StoreIntegrityError(
            f"the message group at {first} of {Place(CHECKPOINT_GROUP, where).describe()} "
            f"has {count} messages but only {len(bodies) - first} rows follow: rows "
            "dropped; left as it is"
        )
    place = group_place(where, first, raw_id, bodies[first + 1 : first + count])
    return place, cipher.open_text(text, place)


def _orphan(where: str, index: int) -> StoreIntegrityError:
    return StoreIntegrityError(
        f"message {index} of {Place(CHECKPOINT_GROUP, where).describe()} names a group "
        "whose first row is not before it (moved, or the group cut or grown); left as it is"
    )


def open_thread(
    cipher: Cipher, where: str, bodies: Sequence[bytes]
) -> tuple[list[bytes], list[int]]:
    """The plain JSON fragments of a thread's sealed rows, and where each group starts.

    The fragments joined by commas are the messages (a group's fragment holds all of its
    messages); a row in today's per-message form is a group of one. STORE_INTEGRITY for
    anything that does not authenticate at its place.
    """
    out: list[bytes] = []
    starts: list[int] = []
    singles = 0  # the first of a run of rows in the per-message form
    i, n = 0, len(bodies)
    while i < n:
        lead = _lead(bodies[i])
        if lead is None:
            if _is_member(bodies[i]):
                # what stands before it first: a planted plain row says so
                run = bodies[singles:i]
                open_bodies(cipher, CHECKPOINT_MESSAGE, where, run, indexed=True, first=singles)
                raise _orphan(where, i)
            starts.append(i)
            i += 1
            continue
        if singles < i:
            run = bodies[singles:i]
            out += open_bodies(cipher, CHECKPOINT_MESSAGE, where, run, indexed=True, first=singles)
        starts.append(i)
        out.append(_group(cipher, where, bodies, i, lead)[1])
        i += lead[1]
        singles = i
    if singles < n:
        run = bodies[singles:n]
        out += open_bodies(cipher, CHECKPOINT_MESSAGE, where, run, indexed=True, first=singles)
    return out, starts


def reseal_thread(
    cipher: Cipher, where: str, bodies: Sequence[bytes], *, migrate: bool
) -> list[tuple[int, bytes]]:
    """``(index, new row)`` of each row of a thread to re-seal under the current key.

    A group is re-sealed whole in its first row (its other rows hold only ids and stay);
    a row in the per-message form (or a plain one, with ``migrate``) by
    :func:`reseal_body`. Everything is authenticated, current or not.
    """
    changes: list[tuple[int, bytes]] = []
    i, n = 0, len(bodies)
    while i < n:
        lead = _lead(bodies[i])
        if lead is None:
            if _is_member(bodies[i]):
                raise _orphan(where, i)
            new = reseal_body(cipher, CHECKPOINT_MESSAGE, where, bodies[i], i, migrate=migrate)
            if new is not None:
                changes.append((i, new))
            i += 1
            continue
        place, plain = _group(cipher, where, bodies, i, lead)
        if cipher.key_id_of(_envelope(lead[2])) != cipher.current:
            changes.append((i, _lead_row(lead[0], lead[1], cipher.seal_text(plain, place))))
        i += lead[1]
    return changes
