"""Which sites may talk to the server: the ``Host`` and ``Origin`` checks.

A server without a token (the default on loopback) is reachable by every page its user
opens in a browser. Two checks keep those pages out, on every route and protocol:

* **Host** (DNS rebinding): a page whose own name was made to resolve to 127.0.0.1 is
  same-origin with the server for the browser, so it may read answers and send any header.
  Only the ``Host`` it sends tells it apart: a request is served when its ``Host`` is a
  loopback name or address (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``[::1]``),
  the address the connection reached (a server listening on all interfaces, called by its
  IP), or a host the operator allowed; else ``400 HOST_NOT_ALLOWED``. A request without
  ``Host`` (HTTP/1.0, a probe) is no browser's and passes. ``/healthz`` answers any host.
* **Origin** (cross-site requests): a form post or a ``text/plain`` ``fetch`` from another
  site is sent without a CORS preflight. A request that may change something (any method
  but GET, HEAD and OPTIONS) whose ``Origin`` is neither the server's own (the same host
  and port as its ``Host``; the scheme may differ behind a TLS proxy) nor an allowed one is
  refused with ``403 ORIGIN_NOT_ALLOWED``; so is ``Origin: null`` and, without ``Origin``,
  ``Sec-Fetch-Site: cross-site`` or ``same-site``. Reads stay open: the browser keeps a
  cross-origin answer from the page unless CORS lets it through.

The third check, a JSON body only as ``application/json``, is the body guard's (``_app``).
``"*"`` in either list turns that check off (for a proxy that does it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import InvalidArgumentError
from ._api import send_error
from ._errors import HostNotAllowedError, OriginNotAllowedError

__all__ = ["SiteGuard", "check_hosts", "check_origins", "first_headers", "split_host"]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CROSS_SITE = frozenset({"cross-site", "same-site"})
#: Routes that answer any ``Host``: they tell nothing about threads (a proxy's probe).
_ANY_HOST_PATHS = frozenset({"/healthz"})


def split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` value (name lower-cased, IPv6 without brackets).

    ``None`` when it is not a host at all (a path, a user, an empty name, a bad port).
    """
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
    else:
        name, _, port_part = value.partition(":")
        rest = ":" + port_part if ":" in value else ""
    name = name.rstrip(".")
    if not name or any(c in name for c in "/@?#\\ ") or (":" in name and "[" not in value):
        return None
    return _with_port(name, rest[1:] if rest else None)


def _with_port(name: str, port: str | None) -> tuple[str, int | None] | None:
    if port is None:
        return name, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return name, int(port)


def first_headers(scope: Scope, names: frozenset[bytes]) -> dict[bytes, bytes]:
    """The first value of each header of ``names`` (lower-case) the request has, in one pass."""
    found: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", ()):
        if name in names and name not in found:
            found[name] = bytes(value)
    return found


_SITE_HEADERS = frozenset({b"host", b"origin", b"sec-fetch-site"})


def _is_loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_hosts(hosts: Sequence[str]) -> tuple[str, ...]:
    """The allowed host names, checked (``INVALID_ARGUMENT``) and lower-cased.

    A name (``agents.example.com``), an address, ``*.example.com`` (any name under it)
    or ``*`` (any host).
    """
    if isinstance(hosts, str) or not isinstance(hosts, Sequence):
        raise InvalidArgumentError(f"allowed_hosts must be a list of host names, got {hosts!r}")
    checked: list[str] = []
    for host in hosts:
        if host == "*":
            checked.append(host)
            continue
        wildcard = isinstance(host, str) and host.startswith("*.")
        parsed = split_host(host[2:] if wildcard else host) if isinstance(host, str) else None
        if parsed is None or parsed[1] is not None or "*" in parsed[0]:
            raise InvalidArgumentError(
                f"allowed_hosts: {host!r} is not a host name (say 'agents.example.com', "
                "'*.example.com' or '*', without scheme or port)"
            )
        checked.append(("*." if wildcard else "") + parsed[0])
    return tuple(checked)


def _origin(value: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an ``Origin`` value; ``None`` if it is not one."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        return None
    return parts.scheme, parts.hostname.rstrip(".").lower(), port or _DEFAULT_PORTS[parts.scheme]


def check_origins(origins: Sequence[str], name: str = "allowed_origins") -> tuple[str, ...]:
    """The allowed origins, checked (``INVALID_ARGUMENT`` naming the argument ``name``).

    An origin is ``scheme://host[:port]`` (http or https, no path) or ``*`` (any origin).
    """
    if isinstance(origins, str) or not isinstance(origins, Sequence):
        raise InvalidArgumentError(f"{name} must be a list of origins, got {origins!r}")
    checked: list[str] = []
    for origin in origins:
        parsed = _origin(origin) if isinstance(origin, str) else None
        if origin == "*":
            checked.append(origin)
        elif parsed is None:
            raise InvalidArgumentError(
                f"{name}: {origin!r} is not an origin (say 'https://app.example.com' "
                "or 'http://localhost:3000': scheme, host and port, no path)"
            )
        else:
            checked.append(_spelled(*parsed))
    return tuple(checked)


def _spelled(scheme: str, host: str, port: int) -> str:
    """An origin as a browser sends it: lower case, no default port, IPv6 in brackets.

    CORS compares the ``Origin`` header to the allowed ones as strings.
    """
    shown = f"[{host}]" if ":" in host else host
    default = _DEFAULT_PORTS[scheme]
    return f"{scheme}://{shown}" + ("" if port == default else f":{port}")


class SiteGuard:
    """ASGI middleware refusing a foreign ``Host`` (400) and a foreign ``Origin`` (403).

    See the module docstring for the rules; ``hosts`` and ``origins`` are what
    :func:`check_hosts` and :func:`check_origins` return.
    """

    def __init__(self, app: ASGIApp, *, hosts: Sequence[str], origins: Sequence[str]) -> None:
        """Wrap ``app``; ``hosts`` and ``origins`` are the operator's allowed ones."""
        self.app = app
        self.any_host = "*" in hosts
        self.hosts = frozenset(h for h in hosts if not h.startswith("*"))
        self.host_suffixes = tuple(h[1:] for h in hosts if h.startswith("*."))
        self.any_origin = "*" in origins
        self.origins = frozenset(o for o in (_origin(o) for o in origins if o != "*") if o)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request here, or hand it on untouched."""
        if scope["type"] == "http":  # no route takes a WebSocket
            refusal = self._refusal(scope)
            if refusal is not None:
                await send_error(send, refusal)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> Exception | None:
        headers = {k: v.decode("latin-1") for k, v in first_headers(scope, _SITE_HEADERS).items()}
        host = headers.get(b"host")
        parsed = None if host is None else split_host(host)
        if host is not None and self._foreign(parsed, scope):
            return HostNotAllowedError(
                f"Host {host[:100]!r} is not this server's: allow it with --allowed-host "
                "(create_app(allowed_hosts=...)) if clients reach the server by that name"
            )
        if scope.get("method") in _SAFE_METHODS or self.any_origin:
            return None
        origin = headers.get(b"origin")
        if origin is None:
            if headers.get(b"sec-fetch-site") in _CROSS_SITE:
                return OriginNotAllowedError(
                    "a cross-site browser request may not change anything on this server"
                )
            return None
        if self._origin_allowed(origin, parsed):
            return None
        return OriginNotAllowedError(
            f"a page from {origin[:100]!r} may not change anything on this server: allow its "
            "origin with --allowed-origin (create_app(allowed_origins=...)) if it is yours"
        )

    def _foreign(self, parsed: tuple[str, int | None] | None, scope: Scope) -> bool:
        """Whether a request's ``Host`` is refused (``/healthz`` answers any host)."""
        return not self._host_allowed(parsed, scope) and scope.get("path") not in _ANY_HOST_PATHS

    def _host_allowed(self, parsed: tuple[str, int | None] | None, scope: Scope) -> bool:
        if self.any_host:
            return True
        if parsed is None:
            return False
        name = parsed[0]
        if _is_loopback(name) or name in self.hosts:
            return True
        if any(name.endswith(suffix) for suffix in self.host_suffixes):
            return True
        server = scope.get("server")
        return server is not None and name == str(server[0]).lower()  # called by its address

    def _origin_allowed(self, value: str, host: tuple[str, int | None] | None) -> bool:
        origin = _origin(value)
        if origin is None:  # "null" and anything else that is not an origin
            return False
        if origin in self.origins:
            return True
        if host is None:
            return False
        scheme, name, port = origin
        # The server's own page: its origin names the Host it sent. The scheme may differ
        # behind a TLS proxy; a Host without a port has the default port of the origin's.
        return name == host[0] and port == (host[1] or _DEFAULT_PORTS[scheme])
