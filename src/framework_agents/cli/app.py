"""The typer application behind ``framework-agents``: ``chat``, ``demo`` and ``serve``."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ..errors import AgentError
from ..models import Model
from ._models import MODEL_HELP, make_model
from ._render import make_console
from .chat import ChatOptions, run_chat
from .demo import run_demo
from .doctor import POSTGRES_ENV, REDIS_ENV, run_doctor
from .serve import register_serve

__all__ = ["build_app"]


def _fail(message: str, status: int) -> typer.Exit:
    make_console(stderr=True).print(f"[bold red]framework-agents:[/bold red] {escape(message)}")
    return typer.Exit(status)


def _model(spec: str, base_url: str | None, max_tokens: int | None) -> Model:
    try:
        return make_model(spec, base_url=base_url, max_tokens=max_tokens)
    except ImportError as exc:  # a missing extra: the message says what to install
        raise _fail(str(exc), 1) from None
    except AgentError as exc:
        raise _fail(str(exc), 2) from None


def _run(main: Callable[[], Coroutine[Any, Any, int]]) -> None:
    try:
        status = asyncio.run(main())
    except AgentError as exc:
        raise _fail(str(exc), 1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(status)


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _show_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"framework-agents {__version__}")
        raise typer.Exit(0)


def _configure_logging(level: str) -> None:
    """Log records of ``level`` and above to stderr (the library itself sets no handler)."""
    if level.lower() not in _LOG_LEVELS:
        raise typer.BadParameter(f"{level!r} is not one of {', '.join(_LOG_LEVELS)}")
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


def build_app() -> typer.Typer:
    """The ``framework-agents`` command line."""
    app = typer.Typer(
        name="framework-agents",
        help="LLM agents whose memory and sessions stay correct, durable and fast.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def options(
        version: Annotated[
            bool,
            typer.Option(
                "--version", is_eager=True, callback=_show_version, help="Print the version."
            ),
        ] = False,
        log_level: Annotated[
            str,
            typer.Option(
                "--log-level",
                envvar="FRAMEWORK_AGENTS_LOG_LEVEL",
                help="Log to stderr from this level: debug, info, warning, error, critical.",
            ),
        ] = "warning",
    ) -> None:
        """LLM agents whose memory and sessions stay correct, durable and fast."""
        _configure_logging(log_level)

    @app.command()
    def doctor(
        postgres: Annotated[
            str | None, typer.Option(help=f"PostgreSQL URL to check (default: ${POSTGRES_ENV}).")
        ] = None,
        redis: Annotated[
            str | None, typer.Option(help=f"Redis URL to check (default: ${REDIS_ENV}).")
        ] = None,
        timeout: Annotated[float, typer.Option(min=0.1, help="Seconds per store.")] = 3.0,
    ) -> None:
        """Show what is installed, which extras work, which stores answer, what to install."""
        postgres = postgres or os.environ.get(POSTGRES_ENV) or None
        redis = redis or os.environ.get(REDIS_ENV) or None
        _run(lambda: run_doctor(make_console(), postgres=postgres, redis=redis, seconds=timeout))

    @app.command()
    def chat(
        model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = "local",
        base_url: Annotated[
            str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")
        ] = None,
        session: Annotated[
            str | None, typer.Option(help="Keep the conversation as session ID and resume it.")
        ] = None,
        data_dir: Annotated[
            Path, typer.Option(help="Where sessions are stored (in <data-dir>/sessions).")
        ] = Path(".data"),
        system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
        window: Annotated[
            int, typer.Option(min=1, help="Sliding window: messages kept in the history.")
        ] = 40,
        max_tokens: Annotated[
            int | None, typer.Option(min=1, help="Longest answer, in tokens.")
        ] = None,
        store: Annotated[
            str | None,
            typer.Option(
                help="Keep sessions in this store instead of <data-dir>/sessions: a directory, "
                "sqlite:///<path>, postgresql://... or redis://..."
            ),
        ] = None,
    ) -> None:
        """Chat with an agent; one prompt per line of standard input (/exit to leave)."""
        chosen = _model(model, base_url, max_tokens)
        options = ChatOptions(
            session_id=session, data_dir=data_dir, system_prompt=system, window=window, store=store
        )
        _run(lambda: run_chat(make_console(), chosen, options))

    @app.command()
    def demo(
        model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)] = "local",
        data_dir: Annotated[
            Path, typer.Option(help="Where the demo session is stored (<data-dir>/sessions).")
        ] = Path(".data"),
        max_tokens: Annotated[int, typer.Option(min=1, help="Longest answer, in tokens.")] = 48,
        part: Annotated[int, typer.Option(hidden=True, min=1, max=2)] = 1,
    ) -> None:
        """Show a conversation that survives a restart, and the context manager at work."""
        _model(model, None, max_tokens)  # fail early, before any output, on a bad --model
        _run(
            lambda: run_demo(
                make_console(),
                model_spec=model,
                data_dir=data_dir,
                max_tokens=max_tokens,
                part=part,
            )
        )

    register_serve(app)
    return app
