"""Every version constant in the package follows the one naming rule of ``_persist._version``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import framework_agents

PACKAGE = Path(framework_agents.__file__).parent
RULE = re.compile(r"_?[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_FORMAT_VERSION")


def _version_constants() -> dict[str, str]:
    """Module-level names with ``VERSION`` in them -> the module that assigns them."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name) and "VERSION" in target.id:
                    found[target.id] = str(path.relative_to(PACKAGE))
    return found


def test_version_constants_are_named_document_format_version() -> None:
    found = _version_constants()
    assert "MEMORY_FORMAT_VERSION" in found and "DATABASE_FORMAT_VERSION" in found
    assert {name: where for name, where in found.items() if not RULE.fullmatch(name)} == {}
