"""Small internal helpers shared across the package (not public API)."""

from __future__ import annotations

import inspect
import os
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeGuard, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "DictMapping",
    "as_utc",
    "call_maybe_async",
    "check_collaborator",
    "implements",
    "maybe_await",
    "protocol_methods",
    "read_pairs",
    "redact",
]

T = TypeVar("T")


class DictMapping(Mapping[str, Any]):
    """A mapping read from a dict of its own (``_data``), which its subclass fills."""

    __slots__ = ("_data",)
    _data: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def as_utc(value: datetime, what: str) -> datetime:
    """``value`` in UTC; ``ValueError`` (a validation error) when UTC cannot hold it.

    ``0001-01-01T00:00:00+01:00`` is before the first UTC datetime: ``astimezone`` raises
    a bare ``OverflowError``, which pydantic would not turn into a validation error.
    """
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{what} {value.isoformat()} has no UTC equivalent") from None


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable, else return it (the one place we normalise)."""
    if inspect.isawaitable(value):
        return await cast(Awaitable[T], value)
    return value


async def call_maybe_async(fn: Callable[..., T | Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Call a sync or async callable and return its (awaited) result."""
    return await maybe_await(fn(*args, **kwargs))


#: Per class, per protocol: whether its instances implement it.
_IMPLEMENTS: weakref.WeakKeyDictionary[type, dict[Any, bool]] = weakref.WeakKeyDictionary()


def implements(obj: object, protocol: Any) -> TypeGuard[Any]:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol, cached per class.

    A protocol check looks up every member on every call (several microseconds each,
    several per run); a store's capabilities are those of its class. Not cached for a
    class whose instances answer attributes themselves (``__getattr__``: a proxy's
    capabilities are its target's).
    """
    cls = type(obj)
    known = _IMPLEMENTS.get(cls)
    if known is not None and protocol in known:
        return known[protocol]
    found = isinstance(obj, protocol)
    if getattr(cls, "__getattr__", None) is None:
        _IMPLEMENTS.setdefault(cls, {})[protocol] = found
    return found


def protocol_methods(protocol: type) -> list[str]:
    """The public members a runtime-checkable protocol declares (its bases' too), sorted."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls is object or not getattr(cls, "_is_protocol", False):
            continue
        names.update(n for n in vars(cls) if not n.startswith("_"))
    return sorted(names)


def check_collaborator(value: T | None, protocol: type, label: str) -> T | None:
    """``value`` if it is ``None`` or implements ``protocol``, else ``INVALID_ARGUMENT``.

    The one check of every collaborator an agent is given (its model, memory,
    conversation manager, session manager, checkpointer): a protocol says what to
    implement, the message says what is missing.
    """
    if value is None or implements(value, protocol):
        return value
    from .errors import InvalidArgumentError

    missing = [m for m in protocol_methods(protocol) if not callable(getattr(value, m, None))]
    raise InvalidArgumentError(
        f"{label} must implement {protocol.__name__} ({', '.join(protocol_methods(protocol))}); "
        f"{value!r:.100} lacks {', '.join(missing) or 'them'}"
    )


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and reprs)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))
    except ValueError:
        return "<unparsable url>"


def read_pairs(
    path: str | os.PathLike[str], what: str, shape: str
) -> Iterator[tuple[int, str, str, str]]:
    """The ``(line number, where, first, second)`` of each line of a two-field file.

    ``what`` names the file in messages (``"tokens"``: "the tokens file"), ``shape`` its
    line (``"TOKEN TENANT"``). Blank lines and ``#`` comments are skipped; ``where`` is
    ``"<what> file '<path>' line <n>"`` for the caller's own checks. An unreadable file,
    a line of another shape, or no line at all is ``INVALID_ARGUMENT`` naming the file and
    the line, never a field (the fields may be secrets).
    """
    from .errors import InvalidArgumentError

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise InvalidArgumentError(f"cannot read the {what} file {str(path)!r}: {reason}") from None
    found = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{what} file {str(path)!r} line {number}"
        fields = stripped.split()
        if len(fields) != 2:
            raise InvalidArgumentError(
                f"{where}: expected '{shape}' (two fields), found {len(fields)}"
            )
        found = True
        yield number, where, fields[0], fields[1]
    if not found:
        raise InvalidArgumentError(f"the {what} file {str(path)!r} holds no '{shape}' line")
