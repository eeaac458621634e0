"""``import framework_agents`` works without ``fcntl`` (Windows); file locking says why not."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

_SCRIPT = """
import importlib.abc
import sys

class NoFcntl(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "fcntl":
            raise ModuleNotFoundError("No module named 'fcntl' (blocked by the test)")
        return None

sys.modules.pop("fcntl", None)
sys.meta_path.insert(0, NoFcntl())

import asyncio
import importlib
import pkgutil

import framework_agents
from framework_agents import (
    Agent, AgentError, FileCheckpointer, FileMemory, InMemoryCheckpointer, Message, ScriptedModel,
)

skipped = []
for info in pkgutil.walk_packages(framework_agents.__path__, "framework_agents."):
    if info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError as exc:  # an optional extra that is not installed
        skipped.append(info.name)
assert "fcntl" not in sys.modules

agent = Agent(ScriptedModel(["hello"]))
result = asyncio.run(agent.run("hi", checkpointer=InMemoryCheckpointer(), thread_id="t"))
assert result.text == "hello"

async def file_backends(root):
    codes = []
    try:
        await FileMemory(root / "memory.json").save([Message("user", "x")])
    except AgentError as exc:
        codes.append(exc.code)
    try:
        await Agent(ScriptedModel(["x"])).run(
            "hi", checkpointer=FileCheckpointer(root / "threads"), thread_id="t"
        )
    except AgentError as exc:
        codes.append(exc.code)
    return codes

import pathlib, tempfile
with tempfile.TemporaryDirectory() as tmp:
    print("CODES", asyncio.run(file_backends(pathlib.Path(tmp))))
"""


def test_the_package_imports_and_runs_without_fcntl_and_file_locks_fail_clearly() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "CODES ['FILE_LOCK_UNSUPPORTED', 'FILE_LOCK_UNSUPPORTED']" in done.stdout
