"""The ``framework-agents`` command: ``chat``, ``demo``, ``doctor`` and ``serve``.

``main()`` is the console-script entry point; ``python -m framework_agents.cli`` runs it too.
``chat``, ``demo`` and ``doctor`` need the ``cli`` extra (typer + rich), loaded only when
the command runs; ``serve`` needs the ``server`` extra only (its options are read with
``argparse``), so it is handed to :func:`~.serve.run_serve` before typer is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .._install import install_hint

__all__ = ["main"]

_CLI_PACKAGES = {"typer", "rich", "click"}


def _serve_args(args: list[str]) -> list[str] | None:
    """``serve``'s own arguments when ``args`` runs it (``None`` otherwise).

    The global ``--log-level LEVEL`` before ``serve`` is passed on to it.
    """
    passed: list[str] = []
    rest = list(args)
    while rest and rest[0].startswith("--log-level"):
        option = rest.pop(0)
        if "=" in option:
            passed.append(option)
        elif rest:
            passed += [option, rest.pop(0)]
    if rest[:1] != ["serve"]:
        return None
    return [*passed, *rest[1:]]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``framework-agents`` command line (exits the process with its status)."""
    args = list(sys.argv[1:] if argv is None else argv)
    serve = _serve_args(args)
    if serve is not None:
        from .serve import run_serve

        raise SystemExit(run_serve(serve))
    try:
        from .app import build_app
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _CLI_PACKAGES:
            raise
        print(
            f"framework-agents: the command line needs the 'cli' extra: {install_hint('cli')} "
            f"({exc}); 'framework-agents serve' needs only the 'server' extra",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    build_app()(args=args, prog_name="framework-agents")
