"""The memory bank's internal contract for backends and tools outside ``bank/``.

A database backend (``stores/``), the conformance suite (``testing/``) and the server
build on the bank through these names only: the backend protocol and what it stores
(:mod:`._backend`), the record rules every backend applies (the stored shape, the key
timeline, namespaces: :mod:`._records`) and the directory backend a store opens
(:mod:`._files`). They are internal: not part of the public API, free to change with
the packages that use them.
"""

from __future__ import annotations

from ._backend import BankBackend, InMemoryBankBackend, Job, Revision, SealingBackend
from ._files import FileBankBackend
from ._records import (
    Row,
    check_namespace,
    key_digest,
    namespace_text,
    place_on_timeline,
    row_from_json,
    row_to_json,
)

__all__ = [
    "BankBackend",
    "FileBankBackend",
    "InMemoryBankBackend",
    "Job",
    "Revision",
    "Row",
    "SealingBackend",
    "check_namespace",
    "key_digest",
    "namespace_text",
    "place_on_timeline",
    "row_from_json",
    "row_to_json",
]
