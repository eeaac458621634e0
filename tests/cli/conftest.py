"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest
from serve_support import Refused
from serve_support import refused as run_refused


@pytest.fixture
def refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Refused:
    """``serve --model echo <options>`` run in this process (``serve_support.refused``)."""
    return run_refused(monkeypatch, capsys)
