"""What one ``FileCheckpointer`` knows of a thread's files, and their names and errors."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._persist import FileIdent, OddFileError, TooLargeError
from ..errors import CheckpointCorruptError
from ..messages import Message
from ._journal import JournalView
from ._values import detached
from .model import BASE_CHECKPOINT_FORMAT_VERSION, ThreadCheckpoint

__all__ = [
    "CHECKPOINT_FILE",
    "JOURNAL_FILE",
    "PROGRESS_FILE",
    "RUN_LOCK_FILE",
    "WRITE_LOCK_FILE",
    "Files",
    "Known",
    "Parsed",
    "View",
    "as_value",
    "counted_view",
    "digest",
    "not_a_file",
    "own_view",
    "unreadable",
]

CHECKPOINT_FILE = "checkpoint.json"
JOURNAL_FILE = "checkpoint.journal"
PROGRESS_FILE = "progress.json"
WRITE_LOCK_FILE = "checkpoint.lock"
RUN_LOCK_FILE = "run.lock"


@dataclass(frozen=True, slots=True)
class Files:
    """The paths of one thread's files."""

    directory: Path
    doc: Path
    journal: Path
    progress: Path
    write_lock: Path

    @classmethod
    def under(cls, directory: Path) -> Files:
        """The files of the thread whose directory is ``directory``."""
        return cls(
            directory,
            directory / CHECKPOINT_FILE,
            directory / JOURNAL_FILE,
            directory / PROGRESS_FILE,
            directory / WRITE_LOCK_FILE,
        )


def digest(data: bytes) -> str:
    """The digest a ``progress.json`` (and a document before v3) is bound by."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class View:
    """What the files hold, as :meth:`FileCheckpointer.load` gives it.

    One value, which a save replaces whole (loads take no lock, so they must never see
    half of a save). ``count >= 0``: the messages are the first ``count`` of the record
    (``Known.messages``, which only ever grows past them, or is replaced) and
    ``checkpoint.messages`` is empty; a save then costs no copy of the history. ``-1``:
    they are ``checkpoint.messages`` (the record holds objects a read would not give).
    """

    checkpoint: ThreadCheckpoint
    count: int = -1

    def messages(self, record: list[Message]) -> list[Message]:
        """A new list of its messages (``record``: the ``Known.messages`` it counts)."""
        return list(self.checkpoint.messages) if self.count < 0 else record[: self.count]

    def value(self, record: list[Message]) -> ThreadCheckpoint:
        """A detached copy of the checkpoint (``record``: the ``Known.messages`` it counts)."""
        return detached(self.checkpoint, self.messages(record))


@dataclass(slots=True)
class Known:
    """A thread's files as this instance last wrote or read them (under the write lock)."""

    signature: FileIdent
    digest: str  # the token the journal binds to (version 3) or the file's digest (older)
    messages: list[Message] = field(default_factory=list)  # the objects last saved or loaded
    journal: JournalView = field(default_factory=lambda: JournalView([], None, 0))
    doc_bytes: int = 0
    progress: bool = False  # a progress.json (written by an earlier release) is there
    view: View | None = None  # what the files hold, for load()
    # Whether ``messages`` are the very objects a read gives (a save's ``View`` may then
    # take them from there instead of a copy of the history).
    exact: bool = False
    # Whether ``messages`` are all plain (``plain_messages``): only then may a save's
    # prefix check trust them (a message class with an ``==`` of its own decides it).
    plain: bool = True
    # A file of a layout before v3 (no checksum, no folded journal): the next save folds.
    legacy: bool = False


@dataclass(frozen=True, slots=True)
class Parsed:
    """A ``checkpoint.json`` as read: the checkpoint and the journal tokens it names."""

    checkpoint: ThreadCheckpoint
    token: str
    folded: str | None  # None: a layout before v3, which named no folded journal


def unreadable(path: Path, exc: OddFileError | TooLargeError) -> CheckpointCorruptError:
    """The error of a thread file that is not a readable file, or is over ``max_bytes``."""
    if isinstance(exc, TooLargeError):
        return CheckpointCorruptError(
            f"checkpoint {str(path)!r} holds {exc.size} bytes, more than the bound of "
            f"{exc.bound} (FileCheckpointer(max_bytes=...))"
        )
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is unreadable ({exc.reason}); it was left untouched"
    )


def not_a_file(path: Path) -> CheckpointCorruptError:
    """The error of a thread file with a directory in its place."""
    return CheckpointCorruptError(
        f"checkpoint {str(path)!r} is not a file (a directory is in its place); "
        "it was left untouched: remove it to continue"
    )


def counted_view(checkpoint: ThreadCheckpoint, fields: dict[str, Any], count: int) -> View:
    """The ``View`` of a save of ``checkpoint``: its messages the record's first ``count``.

    For ``fields`` as ``kept_fields`` gives them when it says the messages are exact.
    """
    return View(as_value(checkpoint.model_copy(update={**fields, "messages": []})), count)


def own_view(checkpoint: ThreadCheckpoint, fields: dict[str, Any], messages: list[Message]) -> View:
    """The ``View`` of a save of ``checkpoint`` holding ``messages`` (as a read gives them)."""
    return View(as_value(checkpoint.model_copy(update={**fields, "messages": messages})))


def as_value(checkpoint: ThreadCheckpoint) -> ThreadCheckpoint:
    """The checkpoint as a value, version 1 like every other store's.

    The stored form's version (2: a journal may follow) is the file's business.
    """
    if checkpoint.version == BASE_CHECKPOINT_FORMAT_VERSION:
        return checkpoint
    return checkpoint.model_copy(update={"version": BASE_CHECKPOINT_FORMAT_VERSION})
