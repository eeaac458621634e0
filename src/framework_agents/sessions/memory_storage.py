"""``InMemoryStorage``: a process-local byte store with exactly the file backend's rules."""

from __future__ import annotations

import builtins
import time
from collections import Counter
from datetime import timedelta

from .._retention import AutoPrune, check_older_than, check_ttl
from ..errors import StorageKeyInvalidError
from ._base import ArgumentTypeError, CompareAndPut, check_expected_tag, check_tag, digest
from ._keys import validate_key, validate_prefix
from ._log import digest_tag

__all__ = ["InMemoryStorage", "as_bytes"]


def as_bytes(data: object) -> bytes:
    """``data`` as immutable bytes; a bytes-like value is copied, anything else is refused."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise ArgumentTypeError(f"storage data must be bytes, not {type(data).__name__}")


class InMemoryStorage(CompareAndPut, AutoPrune):
    """Keeps values in a dict; same key validation and key/directory rules as on disk.

    Like a file system, a key cannot be both a value and a "directory": ``put("a/b")``
    while ``a`` holds a value (or ``put("a")`` while ``a/b`` does) raises
    ``STORAGE_KEY_INVALID``, so code tested against this backend behaves the same on
    :class:`~framework_agents.sessions.LocalFileStorage`.
    """

    def __init__(self, *, ttl: float | None = None) -> None:
        """Create it; ``ttl``: seconds a value is kept after its last write (``prune``)."""
        self.ttl = check_ttl(ttl)
        self._data: dict[str, bytes] = {}
        # How many stored keys live under each directory prefix ("a", "a/b", ...).
        self._dirs: Counter[str] = Counter()
        # When each value (or its log) was last written (wall clock), for prune().
        self._written: dict[str, float] = {}
        # Records appended to a value since it was stored (see ``sessions._log``).
        self._logs: dict[str, builtins.list[bytes]] = {}
        # The digest of each stored value, made once it is asked for: an append then
        # costs its record, not a hash of the value it follows.
        self._digests: dict[str, str] = {}

    @staticmethod
    def _ancestors(segments: builtins.list[str]) -> builtins.list[str]:
        return ["/".join(segments[:i]) for i in range(1, len(segments))]

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``."""
        segments = validate_key(key)
        value = as_bytes(data)
        if key not in self._data:
            ancestors = self._ancestors(segments)
            for parent in ancestors:
                if parent in self._data:
                    raise StorageKeyInvalidError(
                        f"cannot store {key!r}: {parent!r} already holds a value"
                    )
            if self._dirs[key]:
                raise StorageKeyInvalidError(
                    f"cannot store {key!r}: other keys are stored under it"
                )
            for parent in ancestors:
                self._dirs[parent] += 1
        self._logs.pop(key, None)  # a stored value starts a new log
        self._digests.pop(key, None)
        self._data[key] = value
        self._written[key] = time.time()
        await self._after_write()

    async def swap(self, key: str, data: bytes, expected: str | None) -> None:
        """Store ``data`` if ``key`` is still in the state ``expected`` names (else CONFLICT)."""
        validate_key(key)
        value = as_bytes(data)
        check_expected_tag(expected, optional=True)
        check_tag(key, self._tag(key), expected)
        await self.put(key, value)

    async def read_logged(self, key: str) -> tuple[bytes | None, builtins.list[bytes], str | None]:
        """The value of ``key``, the records appended since it was stored, and its tag."""
        value = await self.get(key)  # through get(), so a subclass sees the read
        return value, list(self._logs.get(key, ())), self._tag(key)

    async def append_logged(self, key: str, record: bytes, expected: str) -> str:
        """Append ``record`` to the log of ``key`` if its tag is still ``expected``."""
        validate_key(key)
        data = as_bytes(record)
        check_expected_tag(expected, optional=False)
        check_tag(key, self._tag(key), expected)
        self._logs.setdefault(key, []).append(data)
        self._written[key] = time.time()
        tag = self._tag(key)
        assert tag is not None
        await self._after_write()
        return tag

    def _tag(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is None:
            return None
        value_digest = self._digests.get(key)
        if value_digest is None:
            value_digest = self._digests[key] = digest(value)
        records = len(self._logs.get(key, ()))
        return digest_tag(value_digest, records, records)

    async def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or ``None``."""
        validate_key(key)
        return self._data.get(key)

    async def delete(self, key: str) -> None:
        """Remove ``key`` (no-op when missing)."""
        segments = validate_key(key)
        self._logs.pop(key, None)
        self._written.pop(key, None)
        self._digests.pop(key, None)
        if self._data.pop(key, None) is None:
            return
        for parent in self._ancestors(segments):
            self._dirs[parent] -= 1
            if not self._dirs[parent]:
                del self._dirs[parent]

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Stored keys starting with ``prefix``, sorted."""
        validate_prefix(prefix)
        return sorted(k for k in self._data if k.startswith(prefix))

    async def prune(self, older_than: timedelta | None = None) -> int:
        """Remove values (and logs) not written for ``older_than`` (default: ``ttl``).

        Returns how many values went.
        """
        cutoff = time.time() - check_older_than(older_than, self.ttl)
        old = [key for key, at in self._written.items() if at < cutoff]
        for key in old:
            await self.delete(key)
        return len(old)
