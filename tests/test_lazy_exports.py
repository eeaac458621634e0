"""The package ``__init__`` files import their names on first use (``framework_agents._lazy``).

Each such ``__init__`` lists its names twice: as imports under ``if TYPE_CHECKING:`` (what
mypy and the editors read) and as the table handed to ``_lazy.install`` (what runs). The
two must agree; ``import framework_agents`` must stay cheap (no pydantic, no submodule);
and what an eager ``__init__`` gave (subpackages as attributes, ``AttributeError`` for
anything else) still holds.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import framework_agents

SRC = Path(framework_agents.__file__).parent
LAZY_INITS = sorted(
    path
    for path in SRC.rglob("__init__.py")
    if "_lazy.install(" in path.read_text(encoding="utf-8")
)


def _type_checking_imports(tree: ast.Module) -> dict[str, list[str]]:
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            imports: dict[str, list[str]] = {}
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
                module = "." * stmt.level + (stmt.module or "")
                imports.setdefault(module, []).extend(a.name for a in stmt.names)
            return imports
    raise AssertionError("no `if TYPE_CHECKING:` block")


def _installed(tree: ast.Module) -> dict[str, list[str]]:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "install"
        ):
            table = ast.literal_eval(node.args[1])
            return {module: list(names) for module, names in table.items()}
    raise AssertionError("no _lazy.install(...) call")


def test_the_lazy_packages_are_found() -> None:
    names = {p.parent.name for p in LAZY_INITS}
    assert {"framework_agents", "agent", "checkpoint", "memory", "sessions", "stores"} <= names


@pytest.mark.parametrize("path", LAZY_INITS, ids=lambda p: str(p.relative_to(SRC.parent)))
def test_the_type_checkers_and_the_runtime_see_the_same_names(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert _installed(tree) == _type_checking_imports(tree)


def test_a_missing_name_is_an_attribute_error() -> None:
    assert not hasattr(framework_agents, "NoSuchName")
    with pytest.raises(ImportError):
        exec("from framework_agents.checkpoint import NoSuchName", {})


def test_importing_the_package_loads_nothing_until_a_name_is_used() -> None:
    code = (
        "import sys, framework_agents\n"
        "print(sorted(m for m in sys.modules if m.startswith('framework_agents.')))\n"
        "print('pydantic' in sys.modules)\n"
        "assert framework_agents.stores.__name__ == 'framework_agents.stores'\n"
        "from framework_agents import AgentError\n"
        "print('framework_agents.agent' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["['framework_agents._lazy']", "False", "False"]


def test_a_name_that_is_no_identifier_is_no_attribute() -> None:
    import framework_agents

    assert getattr(framework_agents, "x.y", None) is None
    assert not hasattr(framework_agents, "no-such-module")
