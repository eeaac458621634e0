"""Counting the well-formedness checks a piece of code makes (tests share it)."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import pytest

from framework_agents import history as history_module
from framework_agents.messages import Message


def count_well_formed_checks(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[int]:
    """Make ``module.well_formed_problems`` record the length of every history it checks."""
    checked: list[int] = []
    real = history_module.well_formed_problems

    def counting(messages: Sequence[Message]) -> list[str]:
        checked.append(len(messages))
        return real(messages)

    monkeypatch.setattr(module, "well_formed_problems", counting)
    return checked
