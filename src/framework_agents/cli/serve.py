"""``framework-agents serve``: the server (A2A, AG-UI, JSON API, console) under uvicorn.

``APP`` is ``module:attr`` naming an agent factory; without it the built-in assistant
runs on ``--model``. Without ``--token`` the server listens on loopback only: any other
address is refused before anything starts. ``--allowed-host`` and ``--allowed-origin``
name the hosts clients reach the server by and the other sites whose pages may call it
(``create_app(allowed_hosts=..., allowed_origins=...)``); a ``--host`` name is allowed.
``--bank URL`` serves the memory bank at that URL (any URL ``MemoryBank`` takes; the
``--store`` URL keeps the bank beside the threads) under ``/api/memories`` and in the
console.
"""

from __future__ import annotations

import importlib
import ipaddress
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InvalidArgumentError

__all__ = ["check_listen", "listen_names", "load_factory", "register_serve"]


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


def register_serve(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""

    @app.command()
    def serve(
        target: Annotated[
            str | None, typer.Argument(metavar="[APP]", help="module:attr of an agent factory.")
        ] = None,
        model: Annotated[
            str, typer.Option("--model", "-m", help="local, openai:NAME or anthropic:NAME.")
        ] = "local",
        store: Annotated[
            str, typer.Option(help="Store URL (memory:, a directory, sqlite:///...).")
        ] = ("sqlite:///./.data/agents.db"),
        host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
        token: Annotated[
            str | None,
            typer.Option(envvar="FRAMEWORK_AGENTS_TOKEN", help="Bearer token every client sends."),
        ] = None,
        console: Annotated[bool, typer.Option(help="Serve the web console at /.")] = True,
        bank: Annotated[
            str | None,
            typer.Option(
                help="Memory bank URL to serve under /api/memories (e.g. the --store URL)."
            ),
        ] = None,
        allowed_host: Annotated[
            list[str] | None,
            typer.Option(
                help="A host name clients use, e.g. behind a proxy (repeatable; '*' for any)."
            ),
        ] = None,
        allowed_origin: Annotated[
            list[str] | None,
            typer.Option(
                "--allowed-origin",
                "--cors-origin",
                help="An origin (https://app.example) whose pages may call it (repeatable).",
            ),
        ] = None,
    ) -> None:
        """Serve an agent over A2A, AG-UI and a JSON API (with the web console)."""
        from ._render import make_console

        err = make_console(stderr=True)
        hosts = [*(allowed_host or ()), *listen_names(host)]
        try:
            check_listen(host, token)
            app_ = _build(target, model, store, token, console, bank, hosts, allowed_origin or [])
        except ImportError as exc:
            err.print(f"framework-agents: {exc}")
            raise typer.Exit(1) from None
        except InvalidArgumentError as exc:
            err.print(f"framework-agents: {exc}")
            raise typer.Exit(2) from None
        import uvicorn

        served = f"store {store}" + (f", memory bank {bank}" if bank else "")
        make_console(stderr=True).print(f"serving on http://{host}:{port}/ ({served})")
        uvicorn.run(app_, host=host, port=port, log_level="info")


def _build(
    target: str | None,
    model: str,
    store: str,
    token: str | None,
    console: bool,
    bank: str | None,
    hosts: list[str],
    origins: list[str],
) -> Any:
    from ..server import create_app

    options: dict[str, Any] = {"allowed_hosts": hosts, "allowed_origins": origins, "bank": bank}
    if target is not None:
        factory = load_factory(target)
        return create_app(factory, store=store, token=token, console=console, **options)
    from ..server import builtin_factory
    from ._models import make_model

    return create_app(
        builtin_factory(make_model(model)),
        store=store,
        token=token,
        console=console,
        **options,
        name="framework-agents assistant",
        description="A helpful assistant; /note <text> saves a note after a human approves it.",
    )
