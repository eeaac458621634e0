"""``create_app``: one Starlette application serving A2A, AG-UI, the JSON API and the console.

Given a memory bank, the JSON API also serves it under ``/api/memories`` (``_memories``);
``GET /api/info`` tells the console whether it does. With ``mcp=True``, ``/mcp`` serves the
agent over MCP (``_mcp``), behind the same guards as every other route.

Every protocol runs threads through one :class:`~._runner.ThreadRunner`, so an A2A
``contextId``, an AG-UI ``threadId`` and a ``/api`` thread id name the same checkpointer
thread. Around the routes, outermost first:

* the site guard (``_site``): a ``Host`` that is not loopback or allowed is 400, a
  state-changing request from a foreign ``Origin`` 403 (the tokenless server is reachable
  by every page its user opens);
* CORS answers for the allowed origins (their preflights carry no token);
* the body guard: with a token, every route but the agent card, ``/healthz`` and the
  console's static files needs ``Authorization: Bearer <token>`` (compared in constant
  time), else 401; with ``tokens=`` the token names the tenant the request is served as
  (``_tenants``); the ``Authorization`` header goes no further (no route, SDK or log
  line sees the token); a request body is JSON only as ``application/json`` (415 otherwise: a
  page can post ``text/plain`` and forms to another site without a preflight); a body
  larger than ``max_body`` bytes is refused with 413 before the route sees it (the body is
  read up to the bound, then handed on).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._install import install_hint
from ..bank import MemoryBank
from ..bank._base import check_namespace
from ..errors import AgentError, InvalidArgumentError
from ._agui import agui_routes
from ._api import api_routes, error_response, send_error
from ._errors import (
    BodyTooLargeError,
    NotFoundError,
    ShuttingDownError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
)
from ._memories import memory_routes
from ._runner import AgentFactory, ThreadRunner
from ._site import SiteGuard, check_hosts, check_origins, first_headers
from ._store import DEFAULT_STORE, ServerStore, probe_store, resolve_store
from ._tenants import TokenTable, check_tokens, serving_tenant, tenant_store

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_MCP_NAMESPACE", "DEFAULT_SHUTDOWN_GRACE", "create_app"]

#: Largest request body accepted by default (1 MiB).
DEFAULT_MAX_BODY = 1 << 20

#: The bank namespace of the MCP memory tools unless ``create_app(mcp_namespace=...)`` says.
DEFAULT_MCP_NAMESPACE: tuple[str, ...] = ("mcp",)

#: Seconds runs in flight have to end once the server is told to stop (SIGTERM).
DEFAULT_SHUTDOWN_GRACE = 30.0
#: Seconds ``/readyz`` waits for the store before answering 503.
READY_SECONDS = 5.0

CONSOLE_DIR = Path(__file__).parent / "console"
_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/.well-known/agent-card.json", "/"})


def _is_open(path: str) -> bool:
    return path in _OPEN_PATHS or path.startswith("/console/")


logger = logging.getLogger(__name__)


class _AccessLog:
    """One INFO line per HTTP request: method, path, status and duration (outermost)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            logger.info(
                "%s %s %d %.1f ms",
                scope.get("method", "?"),
                scope.get("path", "?"),
                status,
                (time.perf_counter() - started) * 1000,
            )


#: The headers the body guard reads (one pass over them).
_GUARD_HEADERS = frozenset({b"authorization", b"content-length", b"content-type"})


def _is_json(content_type: bytes) -> bool:
    """``application/json`` or ``application/<something>+json``, any parameters."""
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


class _Guard:
    """Bearer token, JSON media type and body size bound, before any route (module docstring).

    With ``tokens`` (``{token: tenant}``), the request is served as the tenant its token
    names (:func:`~._tenants.serving_tenant`); an open path is served as no tenant (it
    reaches no tenant's data).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body: int,
        tokens: dict[str, str] | None = None,
    ) -> None:
        self.app = app
        # Hashed, as every tokens= entry: the comparison does not reveal the token's length.
        self.expected = hashlib.sha256(f"Bearer {token}".encode()).digest() if token else None
        self.table = TokenTable(tokens) if tokens else None
        self.max_body = max_body

    def _authorized(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[bool, str | None]:
        """Whether the request may go on, and as which tenant."""
        if _is_open(scope.get("path", "")):
            return True, None
        if self.table is not None:
            tenant = self.table.tenant_of(headers.get(b"authorization", b""))
            return tenant is not None, tenant
        if self.expected is None:
            return True, None
        given = hashlib.sha256(headers.get(b"authorization", b"")).digest()
        return hmac.compare_digest(given, self.expected), None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = first_headers(scope, _GUARD_HEADERS)
        authorized, tenant = self._authorized(scope, headers)
        if not authorized:
            await send_error(send, UnauthorizedError("a valid 'Authorization: Bearer' is needed"))
            return
        with serving_tenant(tenant):
            await self._checked(_without_authorization(scope), receive, send, headers)

    async def _checked(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        """The media type and body size checks, then the route."""
        if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        refusal = self._refused_before_the_body(headers)
        if refusal is not None:
            await send_error(send, refusal)
            return
        body = await self._read_body(receive)
        if body is None:
            await send_error(send, self._too_large())
            return
        if body and b"content-type" not in headers:
            await send_error(send, _not_json(b""))
            return
        await self.app(scope, _replay(body, receive), send)

    def _refused_before_the_body(self, headers: dict[bytes, bytes]) -> Exception | None:
        """A declared body too large, or not JSON: refused before reading it."""
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return self._too_large()
        content_type = headers.get(b"content-type")
        if content_type is not None and not _is_json(content_type):
            return _not_json(content_type)
        return None

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, read up to the bound (``None``: larger than ``max_body``)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client left before sending its body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _too_large(self) -> BodyTooLargeError:
        return BodyTooLargeError(f"the request body is larger than {self.max_body} bytes")


def _without_authorization(scope: Scope) -> Scope:
    """``scope`` without its ``Authorization`` header: the token stops at the guard.

    No route needs it once the guard has read it, and the SDKs behind some routes log
    their requests' headers at DEBUG (the a2a-sdk's call context holds them all).
    """
    headers = scope.get("headers") or []
    if not any(name == b"authorization" for name, _value in headers):
        return scope
    return {**scope, "headers": [(n, v) for n, v in headers if n != b"authorization"]}


def _not_json(content_type: bytes) -> UnsupportedMediaTypeError:
    given = repr(content_type.decode("latin-1")[:100]) if content_type else "no Content-Type"
    return UnsupportedMediaTypeError(
        f"a request body must be sent as 'Content-Type: application/json' (got {given})"
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # then the disconnect, when it comes

    return replay


async def _healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def _readyz_route(runner: ThreadRunner, store: ServerStore) -> Route:
    """``GET /readyz``: 200 when ``store`` answers and its schema is current, else 503.

    A draining server (SIGTERM) is not ready: 503 ``SHUTTING_DOWN``, so a proxy's health
    check sends no more work its way. ``store`` is the store itself, not a tenant's view
    of it (the probe belongs to no tenant).
    """

    async def readyz(request: Request) -> Response:
        try:
            if runner.drain_deadline is not None:
                raise ShuttingDownError("this server is shutting down")
            await probe_store(store, READY_SECONDS)
        except AgentError as exc:
            return error_response(exc)
        return JSONResponse({"status": "ready"})

    return Route("/readyz", readyz, methods=["GET"])


@asynccontextmanager
async def _drained_on_sigterm(runner: ThreadRunner, grace: float) -> AsyncIterator[None]:
    """While the app runs, SIGTERM first drains ``runner`` (then the server's own handler).

    Only where a server (uvicorn) handles SIGTERM in Python, from the main thread: the
    handler it set is kept and called after the runner stops taking runs.
    """
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous):
        yield
        return
    handler = previous

    def on_sigterm(sig: int, frame: Any) -> None:
        runner.drain(grace)
        handler(sig, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is on_sigterm:
            signal.signal(signal.SIGTERM, handler)


def _info_route(name: str, *, bank: bool) -> Route:
    """``GET /api/info``: what this server offers beside threads (the console reads it)."""

    async def info(request: Request) -> Response:
        return JSONResponse({"name": name, "bank": bank})

    return Route("/api/info", info, methods=["GET"])


def _resolve_bank(bank: MemoryBank | str | None) -> tuple[MemoryBank | None, bool]:
    """The bank to serve, and whether the app opened it (and so closes it)."""
    if bank is None or isinstance(bank, MemoryBank):
        return bank, False
    if isinstance(bank, str) and bank:
        return MemoryBank(bank), True
    raise InvalidArgumentError(
        f"bank must be a MemoryBank, a URL MemoryBank takes, or None, not {bank!r:.100}"
    )


def _console_routes() -> list[BaseRoute]:
    async def index(request: Request) -> Response:
        page = CONSOLE_DIR / "index.html"
        if not page.is_file():
            raise NotFoundError("the console is not installed")
        return FileResponse(page, media_type="text/html")

    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Mount("/console", StaticFiles(directory=CONSOLE_DIR, check_dir=False), name="console"),
    ]


async def _http_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException) and exc.status_code == 405:
        return JSONResponse(
            {"error": {"code": "METHOD_NOT_ALLOWED", "message": "method not allowed"}},
            status_code=405,
        )
    if isinstance(exc, HTTPException) and exc.status_code != 404:
        return JSONResponse(
            {"error": {"code": "BAD_REQUEST", "message": str(exc.detail)}},
            status_code=exc.status_code,
        )
    return error_response(NotFoundError(f"no route {request.url.path!r}"))


def _check_token_and_body(token: object, tokens: object, max_body: object) -> dict[str, str] | None:
    """The checked ``tokens`` (``None`` without them); ``INVALID_ARGUMENT`` for bad ones."""
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise InvalidArgumentError("token must be a non-empty string or None")
    if token is not None and tokens is not None:
        raise InvalidArgumentError(
            "give token= (one client) or tokens= (a tenant per token), not both"
        )
    if not isinstance(max_body, int) or max_body < 1:
        raise InvalidArgumentError(f"max_body must be a positive int, got {max_body!r}")
    return None if tokens is None else check_tokens(tokens)


def _check_mcp(mcp: object, mcp_namespace: Sequence[str]) -> Sequence[str]:
    """The namespace the MCP memory tools use (``()`` when MCP is off)."""
    if not isinstance(mcp, bool):
        raise InvalidArgumentError(f"mcp must be a bool, not {mcp!r:.40}")
    return check_namespace(mcp_namespace, "mcp_namespace") if mcp else ()


def _check_grace(shutdown_grace: object) -> None:
    if not isinstance(shutdown_grace, int | float) or not 0 <= shutdown_grace < float("inf"):
        raise InvalidArgumentError(
            f"shutdown_grace must be a number of seconds >= 0, got {shutdown_grace!r:.40}"
        )


def _a2a_routes(
    runner: ThreadRunner, *, name: str, description: str
) -> tuple[list[BaseRoute], Callable[[], Awaitable[None]]]:
    """The A2A routes and their closer (the ``server`` extra's a2a-sdk imported here)."""
    try:
        from ._a2a import a2a_routes
    except ImportError as exc:
        raise ImportError(
            f"create_app(a2a=True) needs the 'server' extra's a2a-sdk ({exc.name} is "
            f"missing): {install_hint('server')}",
            name=exc.name,
        ) from exc
    return a2a_routes(runner, name=name, description=description)


def _mcp_routes(
    runner: ThreadRunner,
    *,
    name: str,
    bank: MemoryBank | None,
    namespace: Sequence[str],
    tenants: bool,
) -> tuple[list[Route], Callable[[], AbstractAsyncContextManager[None]]]:
    """The MCP routes and their running context (the ``mcp`` extra imported here)."""
    try:
        from ._mcp import mcp_routes
    except ImportError as exc:
        raise ImportError(
            f"create_app(mcp=True) needs the 'mcp' extra (the MCP SDK): {install_hint('mcp')}"
        ) from exc
    return mcp_routes(runner, name=name, bank=bank, namespace=namespace, tenants=tenants)


def create_app(
    agent_factory: AgentFactory,
    *,
    store: str | ServerStore = DEFAULT_STORE,
    token: str | None = None,
    tokens: Mapping[str, str] | None = None,
    name: str = "framework-agents",
    description: str = "An agent served by framework-agents (A2A, AG-UI and a JSON API).",
    console: bool = True,
    max_body: int = DEFAULT_MAX_BODY,
    a2a: bool = True,
    keepalive: float = 15.0,
    cors_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    bank: MemoryBank | str | None = None,
    mcp: bool = False,
    mcp_namespace: Sequence[str] = DEFAULT_MCP_NAMESPACE,
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
) -> Starlette:
    """The ASGI application that serves ``agent_factory``'s agents on ``store``.

    Args:
        agent_factory: ``() -> Agent`` (sync or async); called for every run.
        store: a store URL (``"memory:"``, a directory, ``sqlite:///...`` with
            ``framework_agents.stores``) or a resolved :class:`ServerStore`.
        token: the bearer token every protected route needs (``None``: no token; then
            serve on loopback only, which ``framework-agents serve`` enforces).
        tokens: ``{token: tenant}``: several clients, each a tenant that sees only its own
            threads, tasks, memories and console listing (another tenant's id is 404, as
            an id nobody used); thread ids, storage keys and bank namespaces are scoped
            by tenant inside the store (``docs/security.md``). Not with ``token``.
        name: the agent's name on its A2A card.
        description: the agent's description on its A2A card.
        console: serve the web console at ``/`` and ``/console/``.
        max_body: the largest request body accepted, in bytes.
        a2a: serve A2A (``/a2a``, ``/a2a/rest``, the agent card).
        keepalive: seconds without an event after which an SSE stream of the JSON API or
            AG-UI sends a keep-alive comment.
        cors_origins: the older name of ``allowed_origins`` (both lists count).
        allowed_hosts: host names clients reach the server by, besides loopback names and
            the address a connection reached (``"agents.example.com"``, ``"*.example.com"``,
            or ``"*"`` for any: a proxy that checks ``Host`` itself); any other ``Host``
            is 400 ``HOST_NOT_ALLOWED`` (DNS rebinding).
        allowed_origins: origins whose browser pages may call the server besides its own
            (``"http://localhost:3000"``: a React app on another port, say; ``"*"`` for
            any): their state-changing requests pass the origin check (else 403
            ``ORIGIN_NOT_ALLOWED``) and their preflights are answered before the token
            check; every other request still needs the token.
        bank: a :class:`~framework_agents.bank.MemoryBank` to serve under
            ``/api/memories`` (list, search, read, forget; the console's memory view), or a
            URL the app opens as ``MemoryBank(url)`` and closes when it stops (a bank
            passed in stays the caller's to close). ``None``: those routes answer 404.
        mcp: serve the agent over MCP at ``/mcp`` (streamable HTTP, stateless; extra
            ``mcp``): the tools ``ask`` and ``decide``, and with a bank ``memory_search``,
            ``memory_remember`` and ``memory_forget`` (``docs/mcp.md``).
        mcp_namespace: the bank namespace the MCP memory tools read and write. It is the
            server's choice, never a client's: every holder of the token reaches it
            (with ``tokens``, each tenant its own copy, under its tenant part).
        shutdown_grace: seconds runs in flight have to end when the server stops. Under a
            server that handles SIGTERM (uvicorn), the signal first stops the app taking
            runs (503 ``SHUTTING_DOWN``, ``/readyz`` 503); at the app's shutdown the runs
            still going after the grace are stopped at their last checkpoint (resumable).
    """
    table = _check_token_and_body(token, tokens, max_body)
    hosts = check_hosts(allowed_hosts)
    origins = check_origins(allowed_origins) + check_origins(cors_origins, "cors_origins")
    served_bank, own_bank = _resolve_bank(bank)
    namespace = _check_mcp(mcp, mcp_namespace)
    _check_grace(shutdown_grace)
    resolved = store if isinstance(store, ServerStore) else resolve_store(store)
    served_store = resolved if table is None else tenant_store(resolved)
    runner = ThreadRunner(agent_factory, served_store, keepalive=keepalive)
    routes: list[BaseRoute] = [
        Route("/healthz", _healthz, methods=["GET"]),
        _readyz_route(runner, resolved),
    ]
    routes.append(_info_route(name, bank=served_bank is not None))
    routes += api_routes(runner)
    routes += memory_routes(served_bank, tenants=table is not None)
    routes += agui_routes(runner)
    closers: list[Any] = []
    if own_bank and served_bank is not None:
        closers.append(served_bank.close)
    if a2a:
        a2a_list, a2a_close = _a2a_routes(runner, name=name, description=description)
        routes += a2a_list
        closers.append(a2a_close)
    running: list[Callable[[], AbstractAsyncContextManager[None]]] = []
    if mcp:
        mcp_list, mcp_running = _mcp_routes(
            runner, name=name, bank=served_bank, namespace=namespace, tenants=table is not None
        )
        routes += mcp_list
        running.append(mcp_running)
    if console:
        routes += _console_routes()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with AsyncExitStack() as stack:
                await stack.enter_async_context(_drained_on_sigterm(runner, shutdown_grace))
                for run in running:
                    await stack.enter_async_context(run())
                yield
        finally:
            for close in closers:
                await close()
            await runner.aclose(shutdown_grace)

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.runner = runner
    app.add_middleware(_Guard, token=token, max_body=max_body, tokens=table)
    if origins:  # outside the token check: a preflight carries no token
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Accept", "A2A-Version"],
        )
    app.add_middleware(SiteGuard, hosts=hosts, origins=origins)
    app.add_middleware(_AccessLog)  # outermost: every request, refused ones included
    return app
