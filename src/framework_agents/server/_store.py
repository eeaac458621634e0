"""Where the server keeps threads and its own records: one URL, resolved in one place.

:func:`resolve_store` turns the ``store`` URL of :func:`create_app` into a
:class:`ServerStore`: the checkpointer that holds every thread (all protocols share it)
and a :class:`~framework_agents.sessions.Storage` for the server's records (thread
timelines, A2A tasks). When ``framework_agents.stores`` is installed, its ``open_store``
resolves every URL (SQLite, PostgreSQL, Redis, ...). Without it, ``"memory:"`` and a
directory (a path or ``file:///``) are served by the in-process and file backends, and a
database URL is refused with ``INVALID_ARGUMENT``. Both read the URL with the same parser
(:func:`framework_agents._store_url.parse_store_url`), so they take and refuse the same
URLs.

Layout of a directory store::

    <dir>/threads/<thread_id>/checkpoint.json     FileCheckpointer
    <dir>/server/threads/<thread_id>/timeline.json  the server's timeline of the thread
    <dir>/a2a/tasks/<task_id>.json                 A2A tasks (see ``_a2a_store``)
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .._crypto import Cipher
from .._store_url import parse_store_url
from .._util import redact
from ..checkpoint import FileCheckpointer, InMemoryCheckpointer
from ..errors import AgentError, BackendUnavailableError, InvalidArgumentError
from ..sessions import InMemoryStorage, LocalFileStorage, SealedStorage

__all__ = ["DEFAULT_STORE", "PROBE_KEY", "ServerStore", "probe_store", "resolve_store"]

#: The default store of :func:`create_app`: an embedded SQLite file under ``./.data/``.
DEFAULT_STORE = "sqlite:///./.data/agents.db"


async def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class ServerStore:
    """A checkpointer and a storage, and how to close them when the server stops."""

    checkpointer: Any
    storage: Any
    close: Callable[[], Awaitable[None]] = _nothing


def resolve_store(
    url: str, *, lease: float | None = None, cipher: Cipher | None = None
) -> ServerStore:
    """The :class:`ServerStore` that ``url`` names (see the module docstring).

    ``lease`` (seconds; ``None``: the store's default) is how long a thread stays locked
    by a process that died holding it (``open_store(lease=...)``; a database store's).
    ``cipher``: every thread and server record sealed at rest (``open_store(cipher=)``;
    ``docs/security.md``); ``"memory:"`` keeps nothing at rest and refuses one.
    """
    if cipher is not None and not isinstance(cipher, Cipher):
        raise InvalidArgumentError(f"cipher must be a Cipher, not {type(cipher).__name__}")
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError(f"store must be a non-empty URL string, got {url!r:.100}")
    try:  # the stores package (SQLite, PostgreSQL, Redis) when installed
        stores: Any = importlib.import_module("framework_agents.stores")
    except ImportError:
        stores = None
    open_store = getattr(stores, "open_store", None)
    if open_store is not None:
        options: dict[str, Any] = {} if lease is None else {"lease": lease}
        if cipher is not None:
            options["cipher"] = cipher
        store = open_store(url, **options)
        return ServerStore(store.checkpointer, store.storage, store.close)
    where = parse_store_url(url)  # the parser open_store uses
    if where.kind == "memory":
        if cipher is not None:
            raise InvalidArgumentError(
                "cipher=: 'memory:' keeps nothing at rest to encrypt; give a directory"
            )
        return ServerStore(InMemoryCheckpointer(), InMemoryStorage())
    if where.kind != "directory" or where.path is None:
        raise InvalidArgumentError(
            f"store {url!r} needs framework_agents.stores (SQLite, PostgreSQL, Redis); "
            "this installation serves 'memory:' and a directory path or file:/// URL"
        )
    storage: Any = LocalFileStorage(where.path)
    if cipher is not None:
        storage = SealedStorage(storage, cipher)
    return ServerStore(FileCheckpointer(where.path, cipher=cipher), storage)


#: The storage key a readiness probe reads (never written: reading it costs one lookup).
PROBE_KEY = "server/ready-probe"


async def probe_store(store: ServerStore, seconds: float) -> None:
    """Read ``store`` once within ``seconds``: it is reachable and its schema is current.

    The first read of a database store connects and creates its schema, or refuses a
    newer one than this code knows. An error of the store is raised as it is; an
    unexpected one, or no answer within ``seconds``, is ``BACKEND_UNAVAILABLE``.
    """
    try:
        async with asyncio.timeout(seconds):
            await store.storage.get(PROBE_KEY)
    except AgentError:
        raise
    except TimeoutError as exc:
        raise BackendUnavailableError(f"the store did not answer within {seconds:g} s") from exc
    except Exception as exc:  # an OSError of a directory, a driver's own error
        raise BackendUnavailableError(
            f"the store cannot be read: {redact(str(exc))[:300]}"
        ) from exc
