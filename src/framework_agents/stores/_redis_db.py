"""One Redis database behind a lazily created ``redis.asyncio`` client (internal).

:class:`RedisDb` checks the URL and the key prefix up front (a URL redis-py would misread
or fail on later is INVALID_ARGUMENT), runs commands, MULTI/EXEC pipelines and the Lua
scripts of :mod:`._redis_lua`, and maps what the server and the connection report onto
the stores' errors: a dropped connection is BACKEND_UNAVAILABLE (reads retried once), a key
of the wrong Redis type the store's ``*_CORRUPT``. The stores built on it (and their
layout of keys) are in :mod:`.redis`, the memory bank's in :mod:`._bank_redis`.
"""

from __future__ import annotations

import builtins
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..errors import (
    BackendUnavailableError,
    CheckpointCorruptError,
    CorruptStoreError,
    InvalidArgumentError,
    MemoryCorruptError,
    SnapshotCorruptError,
)
from . import _redis_lua as lua
from ._codec import redact, unavailable

__all__ = ["RedisDb"]

_PREFIX = re.compile(r"[A-Za-z0-9_.:{}-]{1,64}\Z")
#: The path of a ``redis://`` URL: nothing, ``/`` or ``/`` and a database number.
_DATABASE = re.compile(r"(?:/[0-9]{0,9})?\Z")


def _unknown_options(scheme: str, names: builtins.set[str]) -> builtins.list[str]:
    """The query parameters among ``names`` that redis-py's connection would not take.

    redis-py passes every parameter of the URL to the connection's constructor, so a typo
    (``?prefx=``) was a raw ``TypeError`` at the first command. Asked of the installed
    driver (its parameters change between releases), only when there are any: nothing is
    imported otherwise, and nothing when the driver is missing (that error comes first).
    """
    if not names:
        return []
    try:
        from redis.asyncio import connection as rc
    except ImportError:
        return []
    kinds = {"rediss": rc.SSLConnection, "unix": rc.UnixDomainSocketConnection}
    known = {*rc.URL_QUERY_ARGUMENT_PARSERS, "max_connections"}
    for klass in kinds.get(scheme, rc.Connection).__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            known.update(inspect.signature(init).parameters)
    known -= {"self", "args", "kwargs"}
    return sorted(names - known)


def _check_url(url: str) -> None:
    """Refuse a Redis URL redis-py would misread or fail on later (INVALID_ARGUMENT).

    redis-py takes the digits of the whole path (``/1/2`` is database 12), a path that is
    not a number as database 0, and hands a query parameter it does not know to the
    connection (a ``TypeError`` at the first command); ``decode_responses`` would make
    every read a ``TypeError``.
    """
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    unknown = _unknown_options(parts.scheme, {k for k, _ in pairs} - {"db"})
    if unknown:
        raise InvalidArgumentError(
            f"{redact(url)!r} has the query parameter(s) {', '.join(map(repr, unknown))}, "
            "which are not options of a Redis connection (open_store's own is ?prefix=; "
            "the Redis classes take prefix= as an argument)"
        )
    decoded = [v for k, v in pairs if k == "decode_responses"]
    if any(v.upper() not in ("", "0", "F", "FALSE", "N", "NO") for v in decoded):
        raise InvalidArgumentError(
            f"{redact(url)!r} asks redis-py to decode replies (decode_responses); the stores "
            "read bytes: leave it out"
        )
    if parts.scheme != "unix":
        _check_database(url, parts.path, pairs)


def _check_database(url: str, path: str, pairs: list[tuple[str, str]]) -> None:
    """Refuse a database that is not a number, in the path or a ``?db=`` parameter."""
    bad = [v for k, v in pairs if k == "db"]
    bad = ["?db=" + v for v in bad if not (v.isascii() and v.isdigit())]
    if not _DATABASE.match(path):
        bad.append(path)
    if bad:
        raise InvalidArgumentError(
            f"a Redis URL names its database as /<number> (0, 1, ...), not {bad[0]!r} "
            f"in {redact(url)!r}"
        )


def _import_redis() -> Any:
    try:
        import redis.asyncio as aioredis
    except ImportError as exc:
        raise ImportError("the Redis stores need redis-py: pip install redis") from exc
    return aioredis


def _connection_errors() -> tuple[type[BaseException], ...]:
    _import_redis()
    import redis.exceptions as rex

    return (rex.ConnectionError, rex.TimeoutError, OSError)


def _response_error() -> type[BaseException]:
    _import_redis()
    import redis.exceptions as rex

    return rex.ResponseError


class RedisDb:
    """One lazily created ``redis.asyncio`` client and the scripts, under a key prefix."""

    def __init__(self, url: str, *, prefix: str = "fa:") -> None:
        """Set up the store; nothing connects before the first operation."""
        if not isinstance(url, str) or not url:
            raise InvalidArgumentError(f"a Redis URL must be a non-empty str, not {url!r:.40}")
        if prefix == "":
            raise InvalidArgumentError(
                "an empty Redis key prefix would mix the store's keys with every other key "
                "of the database; give one (default 'fa:')"
            )
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise InvalidArgumentError(f"invalid Redis key prefix {prefix!r}")
        _check_url(url)
        self.url = url
        self.prefix = prefix
        self._client: Any = None
        self._scripts: dict[str, Any] = {}

    def __repr__(self) -> str:
        """The store and where it keeps its data (password redacted)."""
        return f"RedisDb({redact(self.url)!r}, prefix={self.prefix!r})"

    def client(self) -> Any:
        """The client (created on first use; connections open lazily)."""
        if self._client is None:
            aioredis = _import_redis()
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            # No blind retries in the driver: a script whose reply was lost may have run,
            # and running an append twice would duplicate it. Reads retry in call().
            self._client = aioredis.Redis.from_url(
                self.url,
                socket_connect_timeout=5,
                health_check_interval=30,
                retry=Retry(NoBackoff(), 0),
            )
        return self._client

    def wrong_type(self, exc: BaseException, keys: Sequence[object]) -> CorruptStoreError | None:
        """The store's ``*_CORRUPT`` for a ``WRONGTYPE`` reply (``None``: another error).

        A key of ours holding another Redis type than the store writes (a string where a
        hash or a list belongs): the checkpoint's, the memory's or the storage's data is
        wrongly shaped. Nothing was written (a command refused by type changes nothing).
        """
        text = str(exc)
        if "WRONGTYPE" not in text:
            return None
        names = " ".join([*(str(k) for k in keys), text])
        p = self.prefix
        kind: type[CorruptStoreError] = SnapshotCorruptError  # the storage's values
        if f"{p}mem" in names or f"{p}bank:" in names:
            kind = MemoryCorruptError
        elif f"{p}kv:" not in names and any(
            f"{p}{k}" in names for k in ("t:", "m:", "lock:", "fence:", "threads")
        ):
            kind = CheckpointCorruptError
        return kind(
            f"a key under {p!r} in {redact(self.url)} holds another Redis type than the "
            f"store writes there ({text}); it was left untouched"
        )

    def refused(self, exc: BaseException, keys: Sequence[object]) -> BaseException:
        """The error to raise for an error reply ``exc`` of the server.

        A key of the wrong Redis type is the store's ``*_CORRUPT`` (:meth:`wrong_type`); a
        database the server does not have (the URL's ``/<n>`` past its ``databases``) is
        BACKEND_UNAVAILABLE, refused on connecting, before any command ran; any other
        reply is ``exc`` itself.
        """
        found = self.wrong_type(exc, keys)
        if found is not None:
            return found
        if "DB index is out of range" in str(exc) or "invalid DB index" in str(exc):
            return BackendUnavailableError(
                f"cannot use {redact(self.url)}: the Redis server has no database "
                f"{self._database()} ({exc}); it has as many as its 'databases' setting, "
                "numbered from 0"
            )
        return exc

    def _database(self) -> str:
        parts = urlsplit(self.url)
        dbs = [v for k, v in parse_qsl(parts.query) if k == "db"]
        return dbs[0] if dbs else parts.path.strip("/") or "0"

    async def call(self, method: str, *args: Any) -> Any:
        """``client.<method>(*args)`` for a read or an idempotent write.

        Retried once when the connection drops, then BACKEND_UNAVAILABLE; a key of the
        wrong Redis type is the store's ``*_CORRUPT``.
        """
        errors = _connection_errors()
        for attempt in range(2):
            try:
                return await getattr(self.client(), method)(*args)
            except errors as exc:
                if attempt:
                    raise unavailable(self.url, exc) from None
            except _response_error() as exc:
                raise self.refused(exc, args) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, build: Callable[[Any], object]) -> Any:
        """Execute the MULTI/EXEC pipeline that ``build(pipe)`` queues.

        Read-only or idempotent only: retried once like :meth:`call` (the pipeline is
        rebuilt for the retry).
        """
        errors = _connection_errors()
        for attempt in range(2):
            try:
                pipe = self.client().pipeline(transaction=True)
                build(pipe)
                return await pipe.execute()
            except errors as exc:
                if attempt:
                    raise unavailable(self.url, exc) from None
            except _response_error() as exc:  # its text names the command and its keys
                raise self.refused(exc, ()) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def script(
        self, name: str, keys: Sequence[str], args: Sequence[Any], *, source: str | None = None
    ) -> Any:
        """Run the Lua script ``name`` of :mod:`._redis_lua` (loaded once, then EVALSHA).

        ``source``: the text of a script kept elsewhere (the bank's), registered as ``name``.

        Never retried: when the connection drops the script may have run, so the failure
        surfaces as BACKEND_UNAVAILABLE (a thread save retried by the caller is safe: its
        version check refuses a duplicate with CHECKPOINT_CONFLICT).
        """
        errors = _connection_errors()
        script = self._scripts.get(name)
        if script is None:
            script = self.client().register_script(source or getattr(lua, name))
            self._scripts[name] = script
        try:
            return await script(keys=list(keys), args=list(args))
        except errors as exc:
            raise unavailable(self.url, exc) from None
        except _response_error() as exc:
            raise self.refused(exc, keys) from None

    async def close(self) -> None:
        """Close the client's connections (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
