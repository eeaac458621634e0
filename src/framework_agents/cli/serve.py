"""``framework-agents serve``: the server (A2A, AG-UI, JSON API, console) under uvicorn.

``APP`` is ``module:attr`` naming an agent factory; without it the built-in assistant
runs on ``--model``. Without ``--token`` (or ``--tokens``) the server listens on loopback
only: any other address is refused before anything starts. ``--tokens FILE`` serves
tenants: one ``TOKEN TENANT`` pair a line (``create_app(tokens=...)``); a line of another
shape is refused with its line number (never its token), and the workers of
``--workers`` read the file themselves (no token travels in their environment).
``--keys FILE`` seals everything at rest (``create_app(cipher=...)``, extra ``crypto``):
one ``KEY_ID BASE64_KEY`` pair a line, the last one current; the workers read it too.
``--allowed-host`` and ``--allowed-origin`` name the hosts clients reach the server by
and the other sites whose pages may call it (``create_app(allowed_hosts=...,
allowed_origins=...)``); a ``--host`` name is allowed.
``--bank URL`` serves the memory bank at that URL (any URL ``MemoryBank`` takes; the
``--store`` URL keeps the bank beside the threads) under ``/api/memories`` and in the
console. ``--mcp`` serves the agent over MCP at ``/mcp`` too (with ``--bank``, the memory
tools in the bank namespace ``--mcp-namespace``, ``mcp`` unless given).

The command needs the ``server`` extra only: its options are read with ``argparse`` and
its messages printed plainly, so it runs without the ``cli`` extra's typer and rich
(``framework-agents`` hands ``serve`` to :func:`run_serve` before loading them).

Before it listens, ``serve`` reads its store once (connecting, creating or checking the
schema) and refuses to start on one it cannot reach (exit status 1). ``--lease`` is how
long a thread stays locked by a server that died holding it. ``--workers N`` runs N
uvicorn worker processes on one socket (refused for ``memory:``, which one process
holds). On SIGTERM the server stops taking runs (503 ``SHUTTING_DOWN``), lets the runs in
flight finish within ``--grace`` seconds, stops the rest at their last checkpoint (a
resumable thread) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import ipaddress
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._util import redact
from ..errors import AgentError, InvalidArgumentError

if TYPE_CHECKING:
    import typer

__all__ = [
    "check_listen",
    "check_store",
    "listen_names",
    "load_factory",
    "register_serve",
    "run_serve",
    "serve_parser",
    "worker_app",
]

#: The environment variable that carries ``serve``'s options to its worker processes.
_WORKER_OPTIONS = "FRAMEWORK_AGENTS_SERVE_OPTIONS"
#: Seconds ``serve`` waits for its store at start-up before refusing to start.
STORE_CHECK_SECONDS = 10.0
#: Seconds past the grace that uvicorn lets the streams of stopped runs send their end.
_STREAM_END_SECONDS = 5.0
_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def check_listen(host: str, token: str | None) -> None:
    """``INVALID_ARGUMENT`` unless ``host`` is loopback or a token guards the server."""
    if token:
        return
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidArgumentError(
            f"refusing to listen on {host!r} without --token: anyone who can reach it could "
            "run the agent. Pass --token (or FRAMEWORK_AGENTS_TOKEN), or listen on 127.0.0.1."
        )


def listen_names(host: str) -> list[str]:
    """The ``Host`` names a listen address stands for: a name itself, nothing for an address.

    A client reaching ``--host agents.internal`` sends that name; addresses (and the
    all-interfaces ``0.0.0.0`` / ``::``) are allowed by the server as the address reached.
    """
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return [host] if host else []
    return []


def load_factory(spec: str) -> Any:
    """The object ``module:attr`` names (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidArgumentError(f"APP must be module:attr, got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgumentError(f"cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise InvalidArgumentError(f"{module_name!r} has no attribute {attr!r}")
    if not callable(target):
        raise InvalidArgumentError(f"{spec!r} is not callable (an agent factory)")
    return target


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return int(text)


def _workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers (1 to 64)")
    return int(text)


def serve_parser() -> argparse.ArgumentParser:
    """The options of ``framework-agents serve`` (standard library only)."""
    parser = argparse.ArgumentParser(
        prog="framework-agents serve",
        description="Serve an agent over A2A, AG-UI and a JSON API (with the web console).",
    )
    add = parser.add_argument
    add("target", nargs="?", metavar="APP", help="module:attr of an agent factory.")
    add("--model", "-m", default="local", help="local, echo, openai:NAME or anthropic:NAME.")
    add(
        "--store",
        default="sqlite:///./.data/agents.db",
        help="Store URL (memory:, a directory, sqlite:///..., postgresql://..., redis://...).",
    )
    add("--host", default="127.0.0.1", help="Address to listen on.")
    add("--port", type=_port, default=8000, help="Port to listen on.")
    add(
        "--token",
        default=os.environ.get("FRAMEWORK_AGENTS_TOKEN") or None,
        help="Bearer token every client sends (default: $FRAMEWORK_AGENTS_TOKEN).",
    )
    add(
        "--tokens",
        metavar="FILE",
        help="Serve tenants: a file of 'TOKEN TENANT' lines, one tenant per token.",
    )
    add(
        "--keys",
        metavar="FILE",
        help="Encrypt at rest: a file of 'KEY_ID BASE64_KEY' lines, the last one current.",
    )
    add(
        "--console",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Serve the web console at /.",
    )
    add("--bank", help="Memory bank URL to serve under /api/memories (e.g. the --store URL).")
    add("--mcp", action="store_true", help="Serve the agent over MCP at /mcp too.")
    add("--mcp-namespace", default="mcp", help="Bank namespace of the MCP tools, parts by '/'.")
    add(
        "--allowed-host",
        action="append",
        default=[],
        help="A host name clients use, e.g. behind a proxy (repeatable; '*' for any).",
    )
    add(
        "--allowed-origin",
        "--cors-origin",
        dest="allowed_origin",
        action="append",
        default=[],
        help="An origin (https://app.example) whose pages may call it (repeatable).",
    )
    add("--workers", type=_workers, default=1, help="uvicorn worker processes (not memory:).")
    add(
        "--lease",
        type=_seconds,
        default=30.0,
        help="Seconds a thread stays locked by a server that died running it (default 30).",
    )
    add(
        "--grace",
        type=_seconds,
        default=30.0,
        help="On SIGTERM, seconds runs in flight have to finish (default 30).",
    )
    add(
        "--log-level",
        choices=_LOG_LEVELS,
        default=None,
        help="Log to stderr from this level (default: $FRAMEWORK_AGENTS_LOG_LEVEL, else "
        "warning for the library and info for uvicorn's lines).",
    )
    return parser


def _say(message: str) -> None:
    print(f"framework-agents: {message}", file=sys.stderr, flush=True)


async def check_store(
    url: str, *, lease: float, seconds: float = STORE_CHECK_SECONDS, cipher: Any = None
) -> None:
    """Open the store ``url`` names, read it once and close it (``BACKEND_UNAVAILABLE`` &c.).

    The read connects, creates the schema if there is none and refuses a newer one, so
    a server that passes this can serve; one that does not, never listens.
    """
    from ..server._base import probe_store, resolve_store

    store = resolve_store(url, lease=lease, cipher=cipher)
    try:
        await probe_store(store, seconds)
    finally:
        await store.close()


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """What the workers need to build the app: plain JSON (it crosses processes)."""
    return {
        "target": args.target,
        "model": args.model,
        "store": args.store,
        "token": args.token,
        "tokens_file": None if args.tokens is None else str(Path(args.tokens).resolve()),
        "keys_file": None if args.keys is None else str(Path(args.keys).resolve()),
        "console": args.console,
        "bank": args.bank,
        "mcp": args.mcp,
        "mcp_namespace": args.mcp_namespace,
        "allowed_hosts": [*args.allowed_host, *listen_names(args.host)],
        "allowed_origins": list(args.allowed_origin),
        "lease": args.lease,
        "grace": args.grace,
    }


def _build(options: dict[str, Any], cipher: Any) -> Any:
    """The ASGI app ``options`` describe, sealed by ``cipher`` (``--keys``, read once)."""
    from ..server import create_app
    from ..server._base import resolve_store

    extra: dict[str, Any] = {
        "allowed_hosts": options["allowed_hosts"],
        "allowed_origins": options["allowed_origins"],
        "bank": options["bank"],
        "shutdown_grace": options["grace"],
    }
    if options["mcp"]:
        from ..server._base import parse_namespace

        extra |= {"mcp": True, "mcp_namespace": parse_namespace(options["mcp_namespace"])}
    if options.get("tokens_file"):
        from ..server._base import read_tokens_file

        extra["tokens"] = read_tokens_file(options["tokens_file"])
    if cipher is not None:
        extra["cipher"] = cipher  # the bank URL's records; the store is sealed below
    store = resolve_store(options["store"], lease=options["lease"], cipher=cipher)
    common = {"store": store, "token": options["token"], "console": options["console"]}
    if options["target"] is not None:
        return create_app(load_factory(options["target"]), **common, **extra)
    from ..server import builtin_factory
    from ._models import make_model

    return create_app(
        builtin_factory(make_model(options["model"])),
        **common,
        **extra,
        name="framework-agents assistant",
        description="A helpful assistant; /note <text> saves a note after a human approves it.",
    )


def _cipher(keys_file: str | None) -> Any:
    """The :class:`~framework_agents.Cipher` of ``--keys FILE``, or ``None`` without it."""
    if not keys_file:
        return None
    from .._crypto import read_keys_file

    return read_keys_file(keys_file)


def worker_app() -> Any:
    """The app of one ``--workers`` process, built from the options ``serve`` passed on."""
    options = json.loads(os.environ[_WORKER_OPTIONS])
    return _build(options, _cipher(options.get("keys_file")))


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        from .._install import install_hint

        raise ImportError(
            f"framework-agents serve needs the 'server' extra: {install_hint('server')}",
            name=exc.name,
        ) from exc
    return uvicorn


def run_serve(argv: Sequence[str]) -> int:
    """Run ``framework-agents serve`` with ``argv`` (its options); the exit status."""
    args = serve_parser().parse_args(list(argv))
    level = args.log_level or os.environ.get("FRAMEWORK_AGENTS_LOG_LEVEL", "").lower() or None
    if level not in (None, *_LOG_LEVELS):
        _say(f"FRAMEWORK_AGENTS_LOG_LEVEL={level!r} is not one of {', '.join(_LOG_LEVELS)}")
        return 2
    logging.basicConfig(
        level=(level or "warning").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    options = _options(args)
    try:
        _check_together(args)
        uvicorn = _uvicorn()
        cipher = _cipher(options["keys_file"])  # read once: the app and the store check
        app = _build(options, cipher)  # bad options, missing extras: before the store
    except ImportError as exc:
        _say(str(exc))
        return 1
    except InvalidArgumentError as exc:
        _say(str(exc))
        return 2
    try:
        asyncio.run(check_store(args.store, lease=args.lease, cipher=cipher))
    except (AgentError, OSError) as exc:
        _say(f"refusing to start: the store {redact(args.store)} cannot be used: {exc}")
        return 1
    _say(f"serving on http://{args.host}:{args.port}/ ({_served(args)})")
    return _run(uvicorn, app, args, options, level or "info")


def _check_together(args: argparse.Namespace) -> None:
    """Refuse options that do not go together (``INVALID_ARGUMENT``), before any is used."""
    if args.tokens is not None and args.token:
        raise InvalidArgumentError(
            "give --token (one client) or --tokens FILE (tenants), not both "
            "(FRAMEWORK_AGENTS_TOKEN sets --token)"
        )
    check_listen(args.host, args.token or args.tokens)
    if args.workers > 1 and args.store == "memory:":
        raise InvalidArgumentError(
            "--workers needs a store the worker processes share: 'memory:' lives in one "
            "process (use a directory, sqlite:///..., postgresql://... or redis://...)"
        )


def _run(
    uvicorn: Any, app: Any, args: argparse.Namespace, options: dict[str, Any], level: str
) -> int:
    """Serve until stopped: ``app`` in this process, or ``--workers`` processes; the status."""
    common = {"host": args.host, "port": args.port, "log_level": level}
    if args.workers > 1:
        os.environ[_WORKER_OPTIONS] = json.dumps(options)
        # uvicorn's supervisor passes SIGTERM on to every worker (each drains as below).
        uvicorn.run(
            f"{__name__}:worker_app",
            factory=True,
            workers=args.workers,
            timeout_graceful_shutdown=args.grace + _STREAM_END_SECONDS,
            **common,
        )
        return 0
    server = _drained_server(uvicorn)(
        uvicorn.Config(app, timeout_graceful_shutdown=args.grace + _STREAM_END_SECONDS, **common)
    )
    server.run()
    return 0 if server.started else 1


def _served(args: argparse.Namespace) -> str:
    """What the server serves, for the line it says at start."""
    served = f"store {redact(args.store)}" + (f", memory bank {args.bank}" if args.bank else "")
    served += ", MCP at /mcp" if args.mcp else ""
    served += ", tenants from --tokens" if args.tokens else ""
    served += ", encrypted at rest (--keys)" if args.keys else ""
    served += f", {args.workers} workers" if args.workers > 1 else ""
    return served


def _drained_server(uvicorn: Any) -> Any:
    """Uvicorn's server, exiting 0 after a SIGTERM it drained (it re-raises it otherwise)."""

    class DrainedServer(uvicorn.Server):  # type: ignore[misc]
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and isinstance(captured, list) and sig in captured:
                captured.remove(sig)  # a drained stop is a clean exit, not a death by signal

    return DrainedServer


def register_serve(app: typer.Typer) -> None:
    """Add ``serve`` to the typer ``app``: its options are read by :func:`run_serve`."""
    import typer

    def serve(ctx: Any) -> None:
        """Serve an agent over A2A, AG-UI and a JSON API (with the web console)."""
        raise typer.Exit(run_serve(ctx.args))

    # typer finds its context by the annotation, evaluated here (this module's typer is
    # imported only for the type checker).
    serve.__annotations__["ctx"] = typer.Context
    app.command(
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(serve)
