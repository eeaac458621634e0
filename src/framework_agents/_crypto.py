"""Encryption at rest: :class:`Cipher`, the sealed-value envelope and data keys.

Every store that takes ``cipher=`` turns a value's bytes into an *envelope* at the one
place where it knows what the value is and where it belongs, and back again there:

``seal(plain, place)`` / ``open(envelope, place)``

A :class:`Place` names the value's kind (``"checkpoint.head"``, ``"memory.message"``,
...), where it belongs (the store key, thread id or namespace), its position (a message
id, a sequence number, a checkpoint version) and the format version of the plain
bytes. The place is the AES-GCM *associated data*: it is not stored in the envelope, the
reader rebuilds it from where it found the value, so a value copied to another row,
thread, key or position does not authenticate there.

The envelope (binary form)::

    magic 0xFA 0xE1        2 bytes (0xFA never starts UTF-8 text, so plain JSON never
                              looks sealed)
    envelope version       1 byte  (1)
    flags                  1 byte  (0: sealed under a store key, 1: under a data key)
    key id length n        1 byte
    key id                 n bytes (ASCII)
    nonce                  12 bytes (random)
    ciphertext + tag       len(plain) + 16 bytes

The header (magic to key id) is authenticated with the place. Text columns hold the text
form, ``"fae1." + base64(envelope)``. A value that is not an envelope (plain text), is
too short, names a key id the cipher does not hold, or fails the tag, is
``STORE_INTEGRITY`` (:class:`~framework_agents.errors.StoreIntegrityError`) and the
caller leaves it as it is.

Data keys: a :class:`DataKey` is a random 32-byte key of its own (one per memory-bank
namespace or session) whose wrapped form (``Cipher.wrap``, sealed under the store key
with the place of its owner) is stored beside the data. Destroying the wrapped key makes
every copy of the data it sealed unreadable; rotating the store key re-wraps it without
touching the data.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._install import install_hint
from ._util import read_pairs
from .errors import InvalidArgumentError, StoreIntegrityError

__all__ = [
    "SEALED_FORMAT_VERSION",
    "TEXT_PREFIX",
    "Cipher",
    "DataKey",
    "Place",
    "is_sealed",
    "is_sealed_json_string",
    "is_sealed_text",
    "SEALED_JSON_PREFIX",
    "read_keys_file",
    "sealed_json_envelope",
    "sealed_without_cipher",
    "text_envelope",
]

#: The first bytes of every envelope (0xFA is never the first byte of UTF-8 text).
MAGIC = b"\xfa\xe1"
#: The version of the envelope's layout.
SEALED_FORMAT_VERSION = 1
#: What a text column's sealed value starts with.
TEXT_PREFIX = "fae1."
#: What to install when ``cryptography`` is missing.
_NONCE = 12
_TAG = 16
_KEY_BYTES = 32
_STORE_KEY = 0
_DATA_KEY = 1
_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
#: The first four bytes of an envelope sealed under a store key.
_HEAD_STORE = MAGIC + bytes((SEALED_FORMAT_VERSION, _STORE_KEY))


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ImportError(
            f"encryption at rest needs the 'crypto' extra: {install_hint('crypto')}"
        ) from exc
    return AESGCM


def _invalid_tag() -> type[Exception]:
    from cryptography.exceptions import InvalidTag

    return InvalidTag


@dataclass(frozen=True, slots=True)
class Place:
    """What a sealed value is and where it belongs: its associated data.

    ``kind``: what the value is (``"checkpoint.head"``, ``"memory.message"``, ...);
    ``where``: the store key, thread id or namespace it belongs to; ``position``: its
    place inside that (a message id, a sequence number, a version; ``""`` for none);
    ``version``: the format version of the plain bytes.
    """

    kind: str
    where: str
    position: str = ""
    version: int = 1

    def associated(self, header: bytes) -> bytes:
        """The associated data: the envelope header, then each field length-prefixed."""
        return header + _fields(self.kind, self.where, self.position, str(self.version))

    def describe(self) -> str:
        """The place in words, for error messages (no value content)."""
        at = f" at {self.position!r:.80}" if self.position else ""
        return f"{self.kind} of {self.where!r:.200}{at} (format {self.version})"


def _fields(*texts: str) -> bytes:
    """Length-prefixed fields, as :meth:`Place.associated` joins them."""
    parts = []
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        parts.append(len(raw).to_bytes(4, "big"))
        parts.append(raw)
    return b"".join(parts)


def is_sealed(value: bytes | bytearray | memoryview) -> bool:
    """Whether ``value`` starts like an envelope (says nothing about authenticity)."""
    return bytes(value[:2]) == MAGIC


def is_sealed_text(value: str) -> bool:
    """Whether a text column's ``value`` is in the sealed text form."""
    return value.startswith(TEXT_PREFIX)


#: A sealed text as a JSON string begins with these bytes (``"fae1.``).
SEALED_JSON_PREFIX = b'"' + TEXT_PREFIX.encode("ascii")


def is_sealed_json_string(raw: bytes) -> bool:
    """Whether ``raw`` is a JSON string holding a sealed text (a document's sealed payload)."""
    return raw.startswith(SEALED_JSON_PREFIX) and raw.endswith(b'"')


def _check_key(key_id: object, key: object) -> bytes:
    if not isinstance(key_id, str) or not _KEY_ID.match(key_id):
        raise InvalidArgumentError(
            f"a cipher key id is 1 to 64 letters, digits, '.', '_', ':' or '-' "
            f"(starting with a letter or digit), not {key_id!r:.80}"
        )
    if not isinstance(key, bytes | bytearray | memoryview):
        raise InvalidArgumentError(
            f"cipher key {key_id!r} must be 32 bytes (AES-256), not {type(key).__name__}"
        )
    raw = bytes(key)
    if len(raw) != _KEY_BYTES:
        raise InvalidArgumentError(
            f"cipher key {key_id!r} must be 32 bytes (AES-256), not {len(raw)} bytes"
        )
    return raw


class _Sealer:
    """AES-256-GCM over the envelope, for store keys and data keys alike."""

    _flags: int

    def _seal_with(self, aead: Any, key_id: str, plain: bytes, place: Place) -> bytes:
        if not isinstance(plain, bytes | bytearray | memoryview):
            raise InvalidArgumentError(f"only bytes can be sealed, not {type(plain).__name__}")
        kid = key_id.encode("ascii")
        header = MAGIC + bytes((SEALED_FORMAT_VERSION, self._flags, len(kid))) + kid
        nonce = os.urandom(_NONCE)
        try:
            sealed = aead.encrypt(nonce, bytes(plain), place.associated(header))
        except (OverflowError, ValueError) as exc:
            raise InvalidArgumentError(f"cannot seal {place.describe()}: {exc}") from None
        return header + nonce + bytes(sealed)

    def _parse(self, envelope: bytes, place: Place) -> tuple[bytes, str, bytes, bytes]:
        """(header, key id, nonce, ciphertext) of ``envelope``; STORE_INTEGRITY if odd."""
        if not isinstance(envelope, bytes | bytearray | memoryview):
            raise StoreIntegrityError(
                f"{place.describe()} is not a sealed value ({type(envelope).__name__}); "
                "left as it is"
            )
        data = bytes(envelope)
        if not is_sealed(data):
            raise StoreIntegrityError(
                f"{place.describe()} is plain (not sealed) in an encrypted store: planted, "
                "or written without the cipher; left as it is (a store that holds plain "
                "data is migrated with rotate())"
            )
        if len(data) < 5 or data[2] != SEALED_FORMAT_VERSION:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed in an unknown envelope version or truncated; "
                "left as it is"
            )
        n = data[4]
        header_end = 5 + n
        if len(data) < header_end + _NONCE + _TAG:
            raise StoreIntegrityError(f"{place.describe()} is truncated; left as it is")
        if data[3] != self._flags:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under the wrong kind of key; left as it is"
            )
        try:
            key_id = data[5:header_end].decode("ascii")
        except UnicodeDecodeError:
            raise StoreIntegrityError(
                f"{place.describe()} names an unreadable key id; left as it is"
            ) from None
        return (
            data[:header_end],
            key_id,
            data[header_end : header_end + _NONCE],
            data[header_end + _NONCE :],
        )

    def _open_with(
        self, aead: Any, header: bytes, nonce: bytes, body: bytes, place: Place
    ) -> bytes:
        try:
            return bytes(aead.decrypt(nonce, body, place.associated(header)))
        except _invalid_tag():
            raise StoreIntegrityError(
                f"{place.describe()} does not authenticate for its place: moved or "
                "replayed from another row, thread or version, altered, or truncated; "
                "left as it is"
            ) from None


class Cipher(_Sealer):
    """AES-256-GCM encryption at rest, bound to each value's place (extra ``crypto``).

    ``keys``: key id -> 32-byte key; ``current``: the id new values are sealed under.
    Values sealed under any key in ``keys`` stay readable, so rotating is: add the new
    key, make it ``current``, run ``await store.rotate()``, then drop the old key.
    A key that is not 32 bytes, a bad key id or a ``current`` not in ``keys`` is
    ``INVALID_ARGUMENT``; a missing ``cryptography`` package is ``ImportError`` naming
    the ``crypto`` extra (``cryptography``).
    """

    _flags = _STORE_KEY

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        aesgcm = _aesgcm()
        if not isinstance(keys, Mapping) or not keys:
            raise InvalidArgumentError(
                "Cipher(keys=...) is a non-empty mapping of key id -> 32-byte key"
            )
        checked = {kid: _check_key(kid, key) for kid, key in keys.items()}
        if not isinstance(current, str) or current not in checked:
            raise InvalidArgumentError(
                f"Cipher(current={current!r:.80}) names no key in keys ({', '.join(checked)})"
            )
        self._aead = {kid: aesgcm(key) for kid, key in checked.items()}
        self.current = current
        self.key_ids: tuple[str, ...] = tuple(checked)

    def __repr__(self) -> str:
        """The key ids (never the keys)."""
        return f"Cipher(key_ids={list(self.key_ids)!r}, current={self.current!r})"

    def __reduce__(self) -> Any:
        raise TypeError("a Cipher holds keys and is not pickled; build it in each process")

    def seal(self, plain: bytes, place: Place) -> bytes:
        """The envelope of ``plain`` at ``place``, under the current key."""
        return self._seal_with(self._aead[self.current], self.current, plain, place)

    def open(self, envelope: bytes, place: Place) -> bytes:
        """The plain bytes of ``envelope`` read at ``place`` (STORE_INTEGRITY otherwise)."""
        header, key_id, nonce, body = self._parse(envelope, place)
        aead = self._aead.get(key_id)
        if aead is None:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under key id {key_id!r:.80}, which the "
                f"cipher does not hold (it holds {', '.join(self.key_ids)}); left as it is"
            )
        return self._open_with(aead, header, nonce, body, place)

    def seal_text(self, plain: bytes, place: Place) -> str:
        """The text form of :meth:`seal` (for text columns)."""
        return TEXT_PREFIX + base64.b64encode(self.seal(plain, place)).decode("ascii")

    def open_text(self, text: str, place: Place) -> bytes:
        """The plain bytes of a text column's sealed ``text`` (STORE_INTEGRITY otherwise)."""
        return self.open(text_envelope(text, place), place)

    def open_texts(
        self, kind: str, where: str, version: int, items: Sequence[tuple[str, str]]
    ) -> list[bytes]:
        """:meth:`open_text` of many ``(text, position)`` of one kind and place, faster.

        The associated data's common part is built once and each envelope is checked
        inline; anything odd goes through :meth:`open_text`, which names the problem.
        """
        common, tail = _fields(kind, where), _fields(str(version))
        invalid, aeads, skip = _invalid_tag(), self._aead, len(TEXT_PREFIX)
        a2b, join = binascii.a2b_base64, b"".join
        out: list[bytes] = []
        append = out.append
        for text, position in items:
            try:
                data = a2b(text[skip:], strict_mode=True)
                if not _canonical_base64(data, text):
                    raise ValueError(text)
                start = 5 + data[4]
                aead = aeads[data[5:start].decode("ascii")]
                if data[:4] != _HEAD_STORE or not text.startswith(TEXT_PREFIX):
                    raise ValueError(text)
                pos = position.encode("utf-8", "surrogatepass")
                associated = join((data[:start], common, len(pos).to_bytes(4, "big"), pos, tail))
                end = start + _NONCE
                append(aead.decrypt(data[start:end], data[end:], associated))
            except (binascii.Error, ValueError, IndexError, KeyError, invalid):
                append(self.open_text(text, Place(kind, where, position, version)))
        return out

    def key_id_of(self, envelope: bytes) -> str | None:
        """The key id an envelope names (``None`` for a value that is not sealed)."""
        data = bytes(envelope)
        if not is_sealed(data) or len(data) < 5 or len(data) < 5 + data[4]:
            return None
        try:
            return data[5 : 5 + data[4]].decode("ascii")
        except UnicodeDecodeError:
            return None

    def is_current(self, envelope: bytes) -> bool:
        """Whether ``envelope`` is sealed under the current key (nothing to rotate)."""
        data = bytes(envelope)
        return len(data) > 3 and data[3] == _STORE_KEY and self.key_id_of(data) == self.current

    def reseal(self, envelope: bytes, place: Place) -> bytes | None:
        """``envelope`` sealed again under the current key; ``None`` if it already is."""
        if self.is_current(envelope):
            self.open(envelope, place)  # still authenticate what rotate() walks past
            return None
        return self.seal(self.open(envelope, place), place)

    # -- data keys ---------------------------------------------------------------

    def new_data_key(self) -> DataKey:
        """A fresh random data key (store its :meth:`wrap` beside the data it seals)."""
        return DataKey(os.urandom(_KEY_BYTES), os.urandom(6).hex())

    def wrap(self, key: DataKey, place: Place) -> bytes:
        """``key`` sealed under the current store key, bound to its owner's ``place``."""
        return self.seal(key.key_id.encode("ascii") + b"\0" + key.material, place)

    def unwrap(self, wrapped: bytes, place: Place) -> DataKey:
        """The :class:`DataKey` that :meth:`wrap` sealed at ``place``."""
        raw = self.open(wrapped, place)
        key_id, sep, material = raw.partition(b"\0")
        if not sep or len(material) != _KEY_BYTES:
            raise StoreIntegrityError(f"{place.describe()} is not a wrapped data key")
        return DataKey(material, key_id.decode("ascii"))


def sealed_without_cipher(what: str) -> StoreIntegrityError:
    """``STORE_INTEGRITY`` for a sealed value met by a reader that holds no cipher."""
    return StoreIntegrityError(
        f"{what} is sealed (encrypted at rest) and this store was opened without cipher=: "
        "open it with the Cipher that wrote it; left as it is"
    )


def read_keys_file(path: str | os.PathLike[str]) -> Cipher:
    """The :class:`Cipher` of a keys file (``framework-agents serve --keys FILE``).

    One ``KEY_ID BASE64_KEY`` pair a line (the key: 32 bytes, standard base64); blank
    lines and ``#`` comments are skipped; the last key is ``current``, so rotating is
    appending a line, then ``rotate()``. A line of another shape is ``INVALID_ARGUMENT``
    naming the file and line, never the key material.
    """
    keys: dict[str, bytes] = {}
    for _number, where, key_id, encoded in read_pairs(path, "keys", "KEY_ID BASE64_KEY"):
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(f"{where}: the key is not standard base64") from None
        if key_id in keys:
            raise InvalidArgumentError(f"{where}: key id {key_id!r:.80} is given twice")
        try:
            _check_key(key_id, key)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{where}: {exc.message}") from None
        keys[key_id] = key
    return Cipher(keys=keys, current=list(keys)[-1])


def text_envelope(text: str, place: Place) -> bytes:
    """The envelope inside a sealed text value (STORE_INTEGRITY for plain or odd text)."""
    if not isinstance(text, str) or not is_sealed_text(text):
        raise _plain(place)
    return _decoded(text[len(TEXT_PREFIX) :], place)


def sealed_json_envelope(raw: bytes, place: Place) -> bytes:
    """The envelope inside ``raw``, a JSON string holding a sealed text (quotes included).

    :func:`text_envelope` of the string's text, read straight from ``raw`` (a sealed
    document's payload of megabytes is not copied into a text first).
    """
    if not isinstance(raw, bytes) or not is_sealed_json_string(raw) or len(raw) < 10:
        raise _plain(place)
    return _decoded(memoryview(raw)[len(SEALED_JSON_PREFIX) : -1], place)


def _plain(place: Place) -> StoreIntegrityError:
    """The error for a plain value where an encrypted store keeps sealed ones."""
    return StoreIntegrityError(
        f"{place.describe()} is plain (not sealed) in an encrypted store: planted, or "
        "written without the cipher; left as it is (a store that holds plain data is "
        "migrated with rotate())"
    )


def _decoded(encoded: str | memoryview, place: Place) -> bytes:
    """The bytes of base64 ``encoded``: STORE_INTEGRITY unless it is their one base64 text."""
    try:
        data: bytes | None = binascii.a2b_base64(encoded, strict_mode=True)
    except (binascii.Error, ValueError):
        data = None
    if data is None or not _canonical_base64(data, encoded[-4:]):
        raise StoreIntegrityError(f"{place.describe()} is a damaged sealed value; left as it is")
    return data


def _canonical_base64(data: bytes, last: str | memoryview) -> bool:
    """Whether ``last``, the last group of a base64 text of ``data``, is the one it has.

    A decoder ignores the unused low bits of a last group of two or three characters: a
    text differing there decodes alike, so the stored text would change unnoticed. (A
    text that decoded is ASCII.)
    """
    tail = len(data) % 3
    if not tail:
        return True
    group = last.encode("ascii") if isinstance(last, str) else bytes(last)
    return binascii.b2a_base64(data[-tail:], newline=False) == group


class DataKey(_Sealer):
    """A key of one memory-bank namespace or one session, wrapped by the store key.

    It seals and opens like :class:`Cipher` (same envelope, flagged as a data-key
    envelope and naming the data key's random id); destroying its wrapped form makes
    everything it sealed unreadable.
    """

    _flags = _DATA_KEY

    def __init__(self, material: bytes, key_id: str) -> None:
        self.material = material
        self.key_id = key_id
        self._aead = _aesgcm()(material)

    def __repr__(self) -> str:
        """The key's id (never its material)."""
        return f"DataKey({self.key_id!r})"

    def __reduce__(self) -> Any:
        raise TypeError("a DataKey is not pickled")

    def seal(self, plain: bytes, place: Place) -> bytes:
        """The envelope of ``plain`` at ``place`` under this data key."""
        return self._seal_with(self._aead, self.key_id, plain, place)

    def open(self, envelope: bytes, place: Place) -> bytes:
        """The plain bytes of ``envelope`` at ``place`` (STORE_INTEGRITY otherwise)."""
        header, key_id, nonce, body = self._parse(envelope, place)
        if key_id != self.key_id:
            raise StoreIntegrityError(
                f"{place.describe()} is sealed under a data key that no longer exists "
                "(forgotten, or from another namespace or session); left as it is"
            )
        return self._open_with(self._aead, header, nonce, body, place)

    def seal_text(self, plain: bytes, place: Place) -> str:
        """The text form of :meth:`seal`."""
        return TEXT_PREFIX + base64.b64encode(self.seal(plain, place)).decode("ascii")

    def open_text(self, text: str, place: Place) -> bytes:
        """The plain bytes of a sealed ``text`` (STORE_INTEGRITY otherwise)."""
        return self.open(text_envelope(text, place), place)
