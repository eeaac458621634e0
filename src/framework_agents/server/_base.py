"""The server's internal contract for the command line (``cli/serve.py``).

``framework-agents serve`` checks and opens a store, and reads a memory namespace and a
tokens file, the way the app does: these names are the ones it uses. Internal: not part
of the public API.
"""

from __future__ import annotations

from ._memories import parse_namespace
from ._store import probe_store, resolve_store
from ._tenants import read_tokens_file

__all__ = ["parse_namespace", "probe_store", "read_tokens_file", "resolve_store"]
