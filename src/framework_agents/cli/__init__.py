"""The ``framework-agents`` command: ``chat`` and ``demo`` (extra ``cli``: typer + rich).

``main()`` is the console-script entry point; ``python -m framework_agents.cli`` runs it too.
The command-line modules import typer and rich, so they load only when the command runs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .._install import install_hint

__all__ = ["main"]

_CLI_PACKAGES = {"typer", "rich", "click"}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``framework-agents`` command line (exits the process with its status)."""
    try:
        from .app import build_app
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _CLI_PACKAGES:
            raise
        print(
            f"framework-agents: the command line needs the 'cli' extra: {install_hint('cli')} "
            f"({exc})",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    build_app()(args=list(argv) if argv is not None else None, prog_name="framework-agents")
