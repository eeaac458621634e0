"""Every function in the package stays under cyclomatic complexity 15 by radon's count.

Ruff's C90 (configured in pyproject.toml) counts branches only; radon also counts boolean
operators and comprehensions' conditions, which is what makes a function hard to follow.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

import framework_agents

LIMIT = 15
PACKAGE = Path(framework_agents.__file__).parent


def _too_complex() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity >= LIMIT:
                where = path.relative_to(PACKAGE.parent)
                found.append(f"{where}:{block.lineno} {block.fullname} ({block.complexity})")
    return found


def test_every_function_is_under_the_complexity_limit() -> None:
    assert _too_complex() == []


def test_the_check_sees_a_complex_function() -> None:
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(LIMIT))
    blocks = cc_visit(f"def f(x):\n{branches}\n    return -1\n")
    assert [b.complexity for b in blocks] == [LIMIT + 1]
