"""Where a store URL points: the one parser of ``open_store`` and the server (internal).

:func:`parse_store_url` sorts a URL (or a path) into the backend it names, so that
``open_store(url)``, ``create_app(store=url)`` and ``serve --store URL`` take the same
URLs and refuse the same mistakes:

=============================  ===================================================
``memory:``                    in this process
``sqlite:///<path>``           one SQLite file (``~`` expanded)
``postgresql://``, ``postgres://``  PostgreSQL
``redis://``, ``rediss://``, ``unix://``  Redis
``file:///<abs path>``         a directory (``file://localhost/...`` too; percent-decoded)
a path (str or os.PathLike)    a directory (``~`` expanded)
=============================  ===================================================

Refused with ``INVALID_ARGUMENT``: another scheme; a ``file:`` URL that names another
host or no absolute path; and a bare scheme name (``"memory"``, ``"sqlite"``, ...): the
scheme without its colon is a typo far more often than a directory's name, and a typo
would otherwise create a directory store beside the program. A directory of that name
is ``"./memory"`` or ``Path("memory")``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from .errors import InvalidArgumentError

__all__ = ["SCHEMES", "StoreURL", "parse_store_url"]

#: The schemes a store URL may start with, as the error messages list them.
SCHEMES = (
    "memory:",
    "sqlite:///",
    "postgresql://",
    "postgres://",
    "redis://",
    "rediss://",
    "file:///",
)

#: A scheme name alone, and the URL it was probably meant to be.
_BARE_NAMES = {
    "memory": "memory:",
    "sqlite": "sqlite:///<path>",
    "postgresql": "postgresql://<host>/<database>",
    "postgres": "postgres://<host>/<database>",
    "redis": "redis://<host>:6379/0",
    "rediss": "rediss://<host>:6379/0",
    "unix": "unix://<socket path>",
    "file": "file:///<absolute path>",
}

Kind = Literal["memory", "directory", "sqlite", "postgres", "redis"]


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL: the backend, the URL as given, and the path of a file backend."""

    kind: Kind
    url: str
    path: Path | None = None


def _home(text: str) -> Path:
    """``text`` as a path, a leading ``~`` or ``~user`` expanded."""
    return Path(os.path.expanduser(text)) if text.startswith("~") else Path(text)


def _file_url(url: str) -> Path:
    parts = urlsplit(url)
    if not url.startswith("file://") or parts.netloc not in ("", "localhost"):
        raise InvalidArgumentError(
            f"a file URL is file:///<absolute path> (this machine), not {url!r:.200}; "
            "pass a relative directory as a plain path"
        )
    if parts.query or parts.fragment or not parts.path.startswith("/"):
        raise InvalidArgumentError(f"a file URL is file:///<absolute path>, not {url!r:.200}")
    path = unquote(parts.path)
    if "\0" in path:
        raise InvalidArgumentError(f"a file URL cannot name a path with a NUL byte: {url!r:.200}")
    return Path(path)


def _scheme_url(url: str) -> StoreURL | None:
    """The :class:`StoreURL` of a URL with a known scheme; ``None`` for anything else."""
    if url == "memory:":
        return StoreURL("memory", url)
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise InvalidArgumentError(f"a SQLite URL is sqlite:///<path>, not {url!r}")
        return StoreURL("sqlite", url, _home(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        return StoreURL("postgres", url)
    if url.startswith(("redis://", "rediss://", "unix://")):
        return StoreURL("redis", url)
    if url.startswith("file:"):
        return StoreURL("directory", url, _file_url(url))
    return None


def parse_store_url(url: object, *, redact: Callable[[str], str] | None = None) -> StoreURL:
    """The :class:`StoreURL` that ``url`` names (see the module docstring).

    ``redact``: a function hiding a password in messages (the database URLs carry one).
    """
    if isinstance(url, os.PathLike):
        text = os.fspath(url)
        if not isinstance(text, str) or not text:
            raise InvalidArgumentError(f"a store path must be a non-empty text path, not {url!r}")
        return StoreURL("directory", text, _home(text))
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError(f"a store is a URL or a directory path, not {url!r:.100}")
    known = _scheme_url(url)
    if known is not None:
        return known
    shown = url if redact is None else redact(url)
    if "://" in url or url.endswith(":"):
        raise InvalidArgumentError(
            f"no store has the URL {shown!r}; use one of {', '.join(SCHEMES)} or a directory path"
        )
    meant = _BARE_NAMES.get(url.lower())
    if meant is not None:
        raise InvalidArgumentError(
            f"{url!r} is a scheme name, not a store URL: write {meant!r}; for a directory "
            f"of that name, write './{url}'"
        )
    if "\0" in url:
        raise InvalidArgumentError(f"a directory path cannot hold a NUL byte: {url!r:.100}")
    return StoreURL("directory", url, _home(url))
