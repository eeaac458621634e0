"""``framework-agents doctor``: what is installed, which extras work, which stores answer.

Each extra is checked by importing its modules (an installed but broken package shows as
such), the ``local`` extra also by finding the model file. Stores are checked only when
their URL is given (``--postgres``/``--redis`` or the environment variables
``FRAMEWORK_AGENTS_POSTGRES_URL`` and ``FRAMEWORK_AGENTS_REDIS_URL``): PostgreSQL answers
``select 1``, Redis ``PING``, each within ``--timeout`` seconds. The report ends with the
commands that install what is missing.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import platform
import re
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import __version__
from .._install import EXTRAS, install_hint

__all__ = ["POSTGRES_ENV", "REDIS_ENV", "Check", "check_extras", "check_stores", "run_doctor"]

#: Environment variables naming the stores ``doctor`` checks when no option is given.
POSTGRES_ENV = "FRAMEWORK_AGENTS_POSTGRES_URL"
REDIS_ENV = "FRAMEWORK_AGENTS_REDIS_URL"


@dataclass
class Check:
    """One line of the report: what was checked, whether it works, and details."""

    name: str
    ok: bool
    detail: str
    hint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0]


def _distribution_version(requirement: str) -> str | None:
    try:
        return importlib.metadata.version(_name(requirement))
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_extra(extra: str) -> Check:
    missing: list[str] = []
    for module in EXTRAS[extra].modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or a broken install failing on import
            missing.append(f"{module} ({type(exc).__name__}: {exc})"[:160])
    versions = [f"{_name(p)} {_distribution_version(p) or '-'}" for p in EXTRAS[extra].packages]
    if not missing and extra == "local":
        from ..models.local import local_model_path

        try:
            versions.append(f"model {local_model_path()}")
        except ImportError:
            missing.append("the SmolLM2 model file")
    if missing:
        return Check(extra, False, "missing: " + ", ".join(missing), install_hint(extra))
    return Check(extra, True, ", ".join(versions))


def check_extras() -> list[Check]:
    """One check per optional extra (see :data:`framework_agents._install.EXTRAS`)."""
    checks = [_check_extra(extra) for extra in EXTRAS]
    try:
        importlib.import_module("fcntl")
        checks.append(Check("file locking", True, "fcntl.flock (file backends work)"))
    except ImportError:
        checks.append(
            Check(
                "file locking",
                False,
                f"no fcntl on {sys.platform}: file backends raise FILE_LOCK_UNSUPPORTED",
                "use the in-memory backends or a database store",
            )
        )
    return checks


async def _postgres(url: str, seconds: float) -> str:
    import psycopg

    async with await psycopg.AsyncConnection.connect(
        url, connect_timeout=max(1, int(seconds))
    ) as conn:
        cursor = await conn.execute("select version()")
        row = await cursor.fetchone()
    return str(row[0]).split(" on ")[0] if row else "answered"


async def _redis(url: str, seconds: float) -> str:
    import redis.asyncio as redis

    client = redis.Redis.from_url(url, socket_connect_timeout=seconds, socket_timeout=seconds)
    try:
        await client.ping()
        info = await client.info("server")
    finally:
        await client.aclose()
    return f"Redis {info.get('redis_version', '?')}"


def _shown(url: str) -> str:
    """``url`` without its password (never printed)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


async def _check_store(name: str, url: str | None, env: str, seconds: float) -> Check:
    if not url:
        return Check(name, True, f"not checked (give --{name} URL or set {env})")
    extra = "postgres" if name == "postgres" else "redis"
    probe = _postgres if name == "postgres" else _redis
    try:
        answer = await asyncio.wait_for(probe(url, seconds), seconds + 1)
    except ImportError:
        return Check(
            name, False, f"cannot check {url}: extra {extra!r} missing", install_hint(extra)
        )
    except Exception as exc:  # refused, unknown host, auth, timeout: the store does not answer
        detail = f"{_shown(url)} does not answer: {type(exc).__name__}: {exc}"[:300]
        return Check(name, False, detail, extra={"asked": True})
    return Check(name, True, f"{_shown(url)} answers ({answer})", extra={"asked": True})


async def check_stores(
    postgres: str | None, redis: str | None, *, seconds: float = 3.0
) -> list[Check]:
    """Whether the given PostgreSQL and Redis servers answer (unchecked without a URL)."""
    return list(
        await asyncio.gather(
            _check_store("postgres", postgres, POSTGRES_ENV, seconds),
            _check_store("redis", redis, REDIS_ENV, seconds),
        )
    )


def _table(title: str, checks: list[Check]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None)
    for check in checks:
        mark = "[green]ok[/green]" if check.ok else "[red]no[/red]"
        table.add_row(escape(check.name), mark, escape(check.detail))
    return table


async def run_doctor(
    console: Console, *, postgres: str | None, redis: str | None, seconds: float = 3.0
) -> int:
    """Print the report; 1 if a store that was named does not answer, else 0."""
    console.print(
        f"[bold]framework-agents[/bold] {__version__} on Python {platform.python_version()} "
        f"({sys.platform}, {platform.machine()})"
    )
    extras = await asyncio.to_thread(check_extras)
    console.print(_table("extras", extras))
    stores = await check_stores(postgres, redis, seconds=seconds)
    console.print(_table("stores", stores))
    hints = [c for c in extras + stores if c.hint]
    if hints:
        console.print("[bold]to install the rest[/bold]")
        for check in hints:
            console.print(f"  {escape(check.name)}: {escape(check.hint or '')}")
    failed = [c for c in stores if not c.ok and c.extra.get("asked")]
    return 1 if failed else 0
