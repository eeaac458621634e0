"""The one version rule of persisted documents.

Every document carries an integer format version under its version key (``version``;
snapshots, pinned by format 1, say ``schema_version``). A reader accepts every version
from 1 up to the newest it knows and refuses anything else with the store's
``*_CORRUPT`` code: a newer version is never guessed at, a bool or float is not a version.
Version constants are named ``<DOCUMENT>_FORMAT_VERSION`` (``MEMORY_FORMAT_VERSION``,
``DATABASE_FORMAT_VERSION`` for the database stores' layout); a version that is not the
newest but has a meaning of its own says so before the document's name
(``PLAIN_SNAPSHOT_FORMAT_VERSION``, ``BASE_CHECKPOINT_FORMAT_VERSION``).
"""

from __future__ import annotations

__all__ = ["version_problem"]


def version_problem(value: object, newest: int) -> str | None:
    """Why ``value`` is not a version this reader understands, or ``None``."""
    if type(value) is not int:
        return f"version is {value!r}, not an integer"
    if value > newest:
        return (
            f"version {value} was written by a newer framework-agents; "
            f"this one reads up to version {newest}"
        )
    if value < 1:
        return f"unknown version {value}"
    return None
