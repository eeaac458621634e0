"""Without OpenTelemetry, or without a provider, nothing is imported and nothing is emitted."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

_BLOCKER = """
import importlib.abc
import sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None

sys.meta_path.insert(0, Blocked())
"""

_RUN = """
import asyncio
from framework_agents import Agent, InMemoryCheckpointer, Message, ScriptedModel, ToolCall, tool

@tool
def add(a: int, b: int) -> int:
    '''Add.'''
    return a + b

call = Message("assistant", "", tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})])
agent = Agent(ScriptedModel([call, "3"]), tools=[add])
result = asyncio.run(agent.run("1+2?", checkpointer=InMemoryCheckpointer(), thread_id="t"))
assert result.text == "3", result.text
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print("LOADED", loaded)
"""


def _run(prelude: str) -> str:
    code = textwrap.dedent(prelude) + textwrap.dedent(_RUN)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_runs_without_opentelemetry_installed() -> None:
    assert "LOADED []" in _run(_BLOCKER)


def test_installed_but_unused_opentelemetry_is_never_imported() -> None:
    # The API is installed in the test environment; the application did not import it,
    # so it set no provider: the framework neither imports the API nor the SDK.
    assert "LOADED []" in _run("import sys\n")


def test_api_imported_without_a_provider_emits_nothing_and_loads_no_sdk() -> None:
    prelude = """
    import sys
    from opentelemetry import trace
    from framework_agents import _telemetry
    assert not _telemetry.active()
    """
    out = _run(prelude)
    assert "opentelemetry.sdk" not in out
    assert "'opentelemetry.trace'" in out
