"""The README's serving examples run as printed against the built-in assistant."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import Served, start_server

from framework_agents.cli._models import EchoModel
from framework_agents.server import create_app
from framework_agents.server._builtin import builtin_factory

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = README.read_text(encoding="utf-8").split("## Serving", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def assistant(tmp_path: Path) -> Iterator[Served]:
    """The built-in assistant on the echo model."""
    app = create_app(builtin_factory(EchoModel()), store=str(tmp_path / "s"), console=False)
    running = start_server(app)
    yield running
    running.stop()


def test_the_python_client_example(assistant: Served, tmp_path: Path) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", SECTION, re.S)
    script = tmp_path / "client.py"
    script.write_text(block.replace("http://127.0.0.1:8000", assistant.url), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert "TASK_STATE_COMPLETED ['echo #1: Hello! (saw 1 messages)']" in result.stdout


def test_the_curl_example(assistant: Served) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    (block,) = re.findall(r"```bash\n(.*?)```", SECTION, re.S)
    commands = block.replace("\\\n", " ").replace("localhost:8000", assistant.url).splitlines()
    outputs = []
    for line in commands:
        argv = shlex.split(line.split("  #", 1)[0])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        outputs.append(done.stdout)
    assert "event: interrupt" in outputs[0]
    assert json.loads(outputs[1])["pending"]["tool"] == "save_note"
    final = json.loads(outputs[2])
    assert final["status"] == "completed"
    again = subprocess.run(
        shlex.split(commands[1].split("  #", 1)[0]), capture_output=True, text=True, check=True
    )
    assert json.loads(again.stdout)["state"] == {"notes": ["buy milk"]}
