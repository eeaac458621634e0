"""Storage key validation: one allowlist shared by every storage backend.

A key is a ``/``-separated relative path of *segments*. Each segment must:

* use only ASCII letters, digits and ``.``, ``_``, ``-`` (so no NUL, backslash, colon,
  control character, space, ``%`` or non-ASCII look-alike such as U+2025 or U+FF0F);
* be non-empty, at most :data:`MAX_SEGMENT_LENGTH` characters, neither dot-only (``.``,
  ``..``) nor starting or ending with a dot (hidden files and Windows' trailing-dot
  stripping; it also keeps backend temp files, which start with a dot, out of key space);
* not be a Windows device name (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``-``COM9``,
  ``LPT1``-``LPT9``), with or without an extension, in any case.

The whole key is at most :data:`MAX_KEY_LENGTH` characters. Dots inside a segment are
fine: ``a..b.json`` is a legitimate key. Anything else raises
:class:`~framework_agents.errors.StorageKeyInvalidError` (``STORAGE_KEY_INVALID``).
"""

from __future__ import annotations

import re

from ..errors import StorageKeyInvalidError

__all__ = [
    "MAX_KEY_LENGTH",
    "MAX_SEGMENT_LENGTH",
    "is_valid_key",
    "is_valid_segment",
    "validate_key",
    "validate_prefix",
    "validate_segment",
]

#: Longest segment; leaves room under NAME_MAX (255) for a backend's temp-file affixes.
MAX_SEGMENT_LENGTH = 200
#: Longest key (all segments and separators).
MAX_KEY_LENGTH = 1024

# \Z, not $: "$" would also match before a trailing newline.
_SEGMENT_CHARS = re.compile(r"[A-Za-z0-9._-]+\Z")
_PARTIAL_CHARS = re.compile(r"[A-Za-z0-9._-]*\Z")
_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL"}
    | {f"COM{i}" for i in range(1, 10)}
    | {f"LPT{i}" for i in range(1, 10)}
)


def _segment_problem(segment: str) -> str | None:
    if not segment:
        return "empty segment"
    if len(segment) > MAX_SEGMENT_LENGTH:
        return f"segment longer than {MAX_SEGMENT_LENGTH} characters"
    if not _SEGMENT_CHARS.match(segment):
        return "segment may only use ASCII letters, digits and '._-'"
    if segment.startswith(".") or segment.endswith("."):
        return "segment may not start or end with a dot"
    if segment.split(".", 1)[0].upper() in _DEVICE_NAMES:
        return "segment is a reserved Windows device name"
    return None


def validate_segment(segment: object, *, what: str = "key segment") -> str:
    """Return ``segment`` if it is one safe key segment, else raise ``STORAGE_KEY_INVALID``."""
    if not isinstance(segment, str):
        raise StorageKeyInvalidError(f"{what} must be a str, not {type(segment).__name__}")
    problem = _segment_problem(segment)
    if problem is not None:
        raise StorageKeyInvalidError(f"invalid {what} {segment!r}: {problem}")
    return segment


def validate_key(key: object) -> list[str]:
    """Split a valid key into its segments, or raise ``STORAGE_KEY_INVALID``."""
    if not isinstance(key, str):
        raise StorageKeyInvalidError(f"storage key must be a str, not {type(key).__name__}")
    if not key:
        raise StorageKeyInvalidError("storage key is empty")
    if len(key) > MAX_KEY_LENGTH:
        raise StorageKeyInvalidError(f"storage key longer than {MAX_KEY_LENGTH} characters")
    if key.startswith("/"):
        raise StorageKeyInvalidError(f"storage key {key!r} is absolute")
    segments = key.split("/")
    for segment in segments:
        problem = _segment_problem(segment)
        if problem is not None:
            raise StorageKeyInvalidError(f"invalid storage key {key!r}: {problem}")
    return segments


def is_valid_key(key: object) -> bool:
    """Whether ``key`` passes :func:`validate_key`."""
    try:
        validate_key(key)
    except StorageKeyInvalidError:
        return False
    return True


def is_valid_segment(segment: str) -> bool:
    """Whether ``segment`` is one safe key segment."""
    return _segment_problem(segment) is None


def validate_prefix(prefix: object) -> tuple[list[str], str]:
    """Split a listing prefix into its complete directory segments and its partial tail.

    ``"a/b/sn"`` gives ``(["a", "b"], "sn")`` and ``"a/b/"`` gives ``(["a", "b"], "")``.
    The directory segments must be valid segments; the tail is only a string filter (it is
    never used as a path), so it may be empty or dot-edged but must use allowed characters.
    """
    if not isinstance(prefix, str):
        raise StorageKeyInvalidError(f"storage prefix must be a str, not {type(prefix).__name__}")
    if len(prefix) > MAX_KEY_LENGTH:
        raise StorageKeyInvalidError(f"storage prefix longer than {MAX_KEY_LENGTH} characters")
    *dirs, tail = prefix.split("/")
    for segment in dirs:
        problem = _segment_problem(segment)
        if problem is not None:
            raise StorageKeyInvalidError(f"invalid storage prefix {prefix!r}: {problem}")
    if not _PARTIAL_CHARS.match(tail):
        raise StorageKeyInvalidError(
            f"invalid storage prefix {prefix!r}: may only use ASCII letters, digits and '._-'"
        )
    return dirs, tail
