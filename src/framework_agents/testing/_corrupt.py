"""Corrupters for the shipped backends: raw driver writes no store would make (internal).

Each writes through the database driver (or the file system) directly, so the store's
own code never sees the bytes until it reads them back.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = [
    "BankCorrupter",
    "FileCorrupter",
    "PostgresCorrupter",
    "RedisCorrupter",
    "SqliteCorrupter",
]

_JUNK = b'{"role": "user", "content": '


@runtime_checkable
class BankCorrupter(Protocol):
    """A corrupter that can also spoil a memory bank's record (the bank suite's capability)."""

    async def corrupt_bank_record(self, record_id: str) -> None:
        """Make the stored record ``record_id`` of the store's bank unreadable."""
        ...


@dataclass(frozen=True)
class FileCorrupter:
    """Corrupts the files of ``open_store(<root>)``."""

    root: str

    async def corrupt_checkpoint(self, thread_id: str) -> None:
        """Truncate ``checkpoint.json``."""
        path = Path(self.root, "threads", thread_id, "checkpoint.json")
        await asyncio.to_thread(path.write_bytes, _JUNK)

    async def corrupt_memory(self, key: str) -> None:
        """Truncate ``memory.json``."""
        path = Path(self.root, "memory", key, "memory.json")
        await asyncio.to_thread(path.write_bytes, _JUNK)

    async def corrupt_bank_record(self, record_id: str) -> None:
        """Replace the record's file with a record of the wrong shape (no revisions)."""
        path = Path(self.root, "bank", "records", f"{record_id}.json")
        await asyncio.to_thread(path.write_bytes, b'{"revisions": [], "vectors": []}')


@dataclass(frozen=True)
class SqliteCorrupter:
    """Corrupts rows of a SQLite store file."""

    path: str

    def _execute(self, sql: str, *args: object) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute(sql, args)

    async def corrupt_checkpoint(self, thread_id: str) -> None:
        """Cut a message row in half."""
        await asyncio.to_thread(
            self._execute,
            "UPDATE fa_thread_messages SET body = ? WHERE thread_id = ?",
            _JUNK,
            thread_id,
        )

    async def corrupt_memory(self, key: str) -> None:
        """Cut a message row in half."""
        await asyncio.to_thread(
            self._execute, "UPDATE fa_memory_messages SET body = ? WHERE key = ?", _JUNK, key
        )

    async def corrupt_bank_record(self, record_id: str) -> None:
        """Cut the record's revision bodies in half."""
        await asyncio.to_thread(
            self._execute, "UPDATE fa_bank_revisions SET body = ? WHERE id = ?", _JUNK, record_id
        )


@dataclass(frozen=True)
class PostgresCorrupter:
    """Corrupts rows of a PostgreSQL store schema."""

    dsn: str
    schema: str

    async def _execute(self, sql: str, *args: object) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute(sql.replace("{s}", f'"{self.schema}"'), args)

    async def corrupt_checkpoint(self, thread_id: str) -> None:
        """Replace the head row with something that is not a checkpoint."""
        await self._execute(
            "UPDATE {s}.fa_threads SET head = %s WHERE thread_id = %s", b'{"state": 3}', thread_id
        )

    async def corrupt_memory(self, key: str) -> None:
        """Cut a message row in half."""
        await self._execute(
            "UPDATE {s}.fa_memory_messages SET body = %s WHERE key = %s", _JUNK, key
        )

    async def corrupt_bank_record(self, record_id: str) -> None:
        """Replace the record's revision bodies with JSON of the wrong shape."""
        await self._execute(
            "UPDATE {s}.fa_bank_revisions SET body = %s WHERE id = %s", '{"id": 3}', record_id
        )


@dataclass(frozen=True)
class RedisCorrupter:
    """Corrupts keys of a Redis store prefix."""

    url: str
    prefix: str

    async def corrupt_checkpoint(self, thread_id: str) -> None:
        """Drop a message from the list behind the head's back (length mismatch)."""
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            await client.rpop(f"{self.prefix}m:{thread_id}")
        finally:
            await client.aclose()

    async def corrupt_memory(self, key: str) -> None:
        """Overwrite the first stored message with half a message."""
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            await client.lset(f"{self.prefix}mem:{key}", 0, "0" + _JUNK.decode())
        finally:
            await client.aclose()

    async def corrupt_bank_record(self, record_id: str) -> None:
        """Overwrite the record's first revision with half a revision."""
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(self.url)
        try:
            await client.hset(f"{self.prefix}bank:rec:{record_id}", "j1", _JUNK.decode())
        finally:
            await client.aclose()
