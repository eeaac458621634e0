"""The sealed forms of a database store's message bodies and checkpoint heads (internal).

With ``cipher=``, the SQLite, PostgreSQL and Redis stores keep the same rows, each value
sealed where the shared codec makes it (``MergingMemory._rows`` / ``_loaded``,
``LeasedCheckpointer._plan`` / ``_loaded``). A sealed value is still a JSON object, so
the database logic that reads a body's ``id`` (deduplication, merges) works unchanged:

* a message body: ``{"id":"<message id>","sealed":"fae1.<base64 envelope>"}``, its
  associated data binding the kind (``memory.message`` or ``checkpoint.message``), the
  memory key or thread id, the message id (and, in a thread, its position) and the
  message format version;
* a checkpoint head: ``{"sealed":"fae1.<base64 envelope>"}``, bound to the thread id and
  the history's length stored beside it (a head replayed from another length of the
  thread does not authenticate).

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
    "CHECKPOINT_MESSAGE",
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
    cipher: Cipher, kind: str, where: str, bodies: Sequence[bytes], *, indexed: bool
) -> list[bytes]:
    """:func:`open_body` of each body (``indexed``: bound to their positions 0, 1, ...)."""
    items = []
    for i, body in enumerate(bodies):
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
