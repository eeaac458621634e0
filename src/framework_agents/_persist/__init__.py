"""The persistence layer every file-backed store sits on (internal).

One place for what each store used to do its own way:

* ``_json``: the one strict JSON reader and the one "is this plain JSON" rule (same
  depth limit everywhere);
* ``_version``: the one version rule;
* ``_files``: atomic publish (temp + fsync + rename + directory fsync), owner-only files
  and directories, bounded reads that refuse symlinks, FIFOs and devices, and
  ``OSError`` -> ``StorageIOError`` (``STORAGE_IO``);
* ``_journal``: framed, checksummed records appended with one ``fdatasync``;
* ``_locks``: the per-event-loop lock registry and the sidecar ``flock``;
* ``_sealing``: opening values sealed at rest (``cipher=``) as a file store reads them;
* ``_io``: blocking I/O handed to a worker thread (``run_blocking``), which a cancel
  never cuts in half;
* ``_messages``: the persisted-message codec (a message's stored JSON fragment, arrays of
  them parsed in slices) and the prefix checks that let a save write only what is new.

Each store keeps only its schema and its error code.
"""

from ._files import (
    DIR_MODE,
    FILE_MODE,
    TEMP_SUFFIX,
    FileIdent,
    OddFileError,
    TooLargeError,
    atomic_publish,
    file_ident,
    fsync_dir,
    ident_or_none,
    io_error,
    make_private_dirs,
    mark_landed,
    read_bounded,
    read_document,
    sweep_temp_files,
    temp_name,
)
from ._io import run_blocking
from ._journal import (
    COMMIT,
    FRAME_BYTES,
    JOURNAL_FORMAT_VERSION,
    JournalCorruptError,
    Scan,
    append_record,
    bound,
    frame,
    header_payload,
    header_token_at,
    header_token_of,
    parse_header,
    scan,
)
from ._json import (
    MAX_JSON_DEPTH,
    PARSER_INT_DIGITS,
    int_digit_limit,
    json_problem,
    json_type,
    overlong_int,
    reads_back_as_is,
    strict_loads,
)
from ._locks import Deadline, LoopLocks, check_seconds, flock, holding, open_lock_file
from ._messages import (
    PARSE_SLICE,
    encode_message,
    parse_items,
    plain_messages,
    same_json_message,
    shared_prefix,
    split_messages,
    stored_prefix,
    strict_equality,
)
from ._sealing import SealedReader, checked_cipher, sealed_payload
from ._version import version_problem

__all__ = [
    "COMMIT",
    "DIR_MODE",
    "FILE_MODE",
    "FRAME_BYTES",
    "JOURNAL_FORMAT_VERSION",
    "MAX_JSON_DEPTH",
    "PARSE_SLICE",
    "PARSER_INT_DIGITS",
    "TEMP_SUFFIX",
    "Deadline",
    "JournalCorruptError",
    "FileIdent",
    "LoopLocks",
    "OddFileError",
    "Scan",
    "SealedReader",
    "TooLargeError",
    "append_record",
    "atomic_publish",
    "bound",
    "check_seconds",
    "checked_cipher",
    "encode_message",
    "file_ident",
    "flock",
    "frame",
    "fsync_dir",
    "header_payload",
    "holding",
    "ident_or_none",
    "io_error",
    "int_digit_limit",
    "json_problem",
    "json_type",
    "make_private_dirs",
    "mark_landed",
    "open_lock_file",
    "overlong_int",
    "header_token_at",
    "header_token_of",
    "parse_header",
    "parse_items",
    "plain_messages",
    "read_bounded",
    "read_document",
    "reads_back_as_is",
    "run_blocking",
    "same_json_message",
    "scan",
    "sealed_payload",
    "shared_prefix",
    "split_messages",
    "stored_prefix",
    "strict_equality",
    "strict_loads",
    "sweep_temp_files",
    "temp_name",
    "version_problem",
]
