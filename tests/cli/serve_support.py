"""What the ``serve`` tests share: running ``serve`` in this process for its refusals."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from framework_agents.cli.serve import run_serve

Refused = Callable[..., tuple[int, str]]


def refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Refused:
    """``serve --model echo <options>`` run in this process: its exit status and stderr.

    For options refused before anything starts: what the command does with them is the
    same in this process as in its own (the tests above run it as one), for a fraction of
    the cost. ``run_serve`` configures the root logger; the test's handlers are put back.
    """
    monkeypatch.delenv("FRAMEWORK_AGENTS_TOKEN", raising=False)
    monkeypatch.delenv("FRAMEWORK_AGENTS_LOG_LEVEL", raising=False)
    root = logging.getLogger()

    def run(*options: str) -> tuple[int, str]:
        handlers, level = list(root.handlers), root.level
        try:
            status = run_serve(["--model", "echo", *options])
        except SystemExit as exc:  # argparse's refusals
            status = exc.code if isinstance(exc.code, int) else 2
        finally:
            for handler in root.handlers:
                if handler not in handlers:
                    handler.close()
            root.handlers[:] = handlers
            root.setLevel(level)
        return status, capsys.readouterr().err

    return run
