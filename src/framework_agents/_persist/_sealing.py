"""Values sealed at rest in a file store (``cipher=``): how a read opens them.

A file store seals its document's payload (a JSON string in place of the plain JSON)
and each journal record. A read opens them, refuses a plain value in an encrypted store
(STORE_INTEGRITY) unless the store is being migrated, and notes every value that a
``rotate`` must publish again: a plain one, or one sealed under a key that is not
``cipher.current``.
"""

from __future__ import annotations

from .._crypto import Cipher, Place, is_sealed, is_sealed_json_string, sealed_json_envelope
from ..errors import InvalidArgumentError

__all__ = ["SealedReader", "checked_cipher", "sealed_payload"]


def checked_cipher(cipher: object) -> Cipher | None:
    """``cipher`` when it is a :class:`Cipher` or ``None``; else INVALID_ARGUMENT."""
    if cipher is not None and not isinstance(cipher, Cipher):
        raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
    return cipher


def sealed_payload(parts: tuple[str, str, bytes] | None) -> bool:
    """Whether a document split as ``(token, folded, payload)`` holds a sealed payload."""
    return parts is not None and is_sealed_json_string(parts[2])


class SealedReader:
    """Opens the sealed values of a read (``cipher``) and notes what a rotation rewrites.

    ``migrating``: a plain value is taken (a migration) instead of STORE_INTEGRITY.
    ``stale_key``: set once a value read was plain or not sealed under ``cipher.current``.
    """

    def __init__(self, cipher: Cipher | None = None, *, migrating: bool = False) -> None:
        """A reader with ``cipher`` (set before the first read of a sealed value)."""
        self.cipher = cipher
        self.migrating = migrating
        self.stale_key = False

    def plain_found(self, place: Place) -> None:
        """A plain value at ``place``: taken while migrating, else STORE_INTEGRITY."""
        if not self.migrating:
            assert self.cipher is not None
            self.cipher.open(b"{", place)  # raises: plain in an encrypted store
        self.stale_key = True

    def open_record(self, payload: bytes, place: Place) -> bytes:
        """A journal record's payload, opened (a plain one: see :meth:`plain_found`)."""
        if not is_sealed(payload):
            self.plain_found(place)
            return payload
        return self._opened(payload, place)

    def open_document(
        self, parts: tuple[str, str, bytes] | None, kind: str, where: str, version: int
    ) -> tuple[bytes, str, str] | None:
        """A sealed document's plain payload, token and folded token.

        ``parts``: the document split as ``(token, folded, payload)`` (``None``: not a
        sealed layout); its value is bound to ``Place(kind, where, token, version)``.
        ``None``: a plain document (see :meth:`plain_found`).
        """
        if parts is None or not is_sealed_json_string(parts[2]):
            self.plain_found(Place(kind, where))
            return None
        token, folded, payload = parts
        place = Place(kind, where, token, version)
        sealed = sealed_json_envelope(payload, place)  # decoded once, with no copy
        return self._opened(sealed, place), token, folded

    def _opened(self, envelope: bytes, place: Place) -> bytes:
        assert self.cipher is not None
        if not self.cipher.is_current(envelope):
            self.stale_key = True
        return self.cipher.open(envelope, place)
