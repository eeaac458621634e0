"""Durable stores shared by processes and machines: SQLite, PostgreSQL and Redis.

Each backend implements the contracts of the file backends (``Storage``, the
checkpointer's ``save``/``load``/``delete``/``list_threads`` plus ``save_progress`` and
``thread_lock``, ``Memory`` with ``replace``), and :func:`open_store` opens the bundle of
all three from one URL. The PostgreSQL and Redis drivers are imported on first use
(extras ``postgres`` and ``redis``).
"""

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from ._base import Store, open_store
    from ._codec import SchemaTooNewError
    from .postgres import PostgresCheckpointer, PostgresMemory, PostgresStorage
    from .redis import RedisCheckpointer, RedisMemory, RedisStorage
    from .sqlite import SqliteCheckpointer, SqliteMemory, SqliteStorage
else:
    _lazy.install(
        globals(),
        {
            "._base": ("Store", "open_store"),
            "._codec": ("SchemaTooNewError",),
            ".postgres": ("PostgresCheckpointer", "PostgresMemory", "PostgresStorage"),
            ".redis": ("RedisCheckpointer", "RedisMemory", "RedisStorage"),
            ".sqlite": ("SqliteCheckpointer", "SqliteMemory", "SqliteStorage"),
        },
    )

__all__ = [
    "PostgresCheckpointer",
    "PostgresMemory",
    "PostgresStorage",
    "RedisCheckpointer",
    "RedisMemory",
    "RedisStorage",
    "SchemaTooNewError",
    "SqliteCheckpointer",
    "SqliteMemory",
    "SqliteStorage",
    "Store",
    "open_store",
]
