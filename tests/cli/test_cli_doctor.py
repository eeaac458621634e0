"""``framework-agents doctor``, ``--version`` and ``--log-level`` in a real process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("typer", reason="needs the 'cli' extra")

from framework_agents import __version__

SRC = str(Path(__file__).resolve().parents[2] / "src")
POSTGRES = os.environ.get(
    "FRAMEWORK_AGENTS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("FRAMEWORK_AGENTS_TEST_REDIS", "redis://127.0.0.1:6379/0")
#: What the store checks need no model SDK for. ``doctor`` imports every extra's modules for
#: its extras table, and in a fresh process ``anthropic`` and ``openai`` take most of its time
#: (about 2 of 2.5 s); blocked, they show as missing extras and the stores' lines are the same.
NO_MODEL_SDKS = "import sys\nsys.modules.update(anthropic=None, openai=None)"


def cli(*args: str, prelude: str = "", stdin: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}\nfrom framework_agents.cli import main\nmain({list(args)!r})\n"
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"}
    for name in ("FRAMEWORK_AGENTS_POSTGRES_URL", "FRAMEWORK_AGENTS_REDIS_URL"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


def test_version_prints_the_package_version() -> None:
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"framework-agents {__version__}"


def test_doctor_lists_extras_with_versions_and_what_to_install() -> None:
    result = cli("doctor", prelude="import sys\nsys.modules['anthropic'] = None")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"framework-agents {__version__}" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert " no " in lines["anthropic"]
    assert " ok " in lines["cli"]
    assert "anthropic: pip install 'anthropic>=2.16'" in out  # the hint, not the PyPI name
    assert "framework-agents[" not in out
    assert "not checked (give --postgres URL" in out


@pytest.mark.slow  # connects to both servers from a CLI process; the failing case stays
@pytest.mark.postgres
@pytest.mark.redis
def test_doctor_reports_stores_that_answer() -> None:
    if not (answers("127.0.0.1", 5432) and answers("127.0.0.1", 6379)):
        pytest.skip("needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379")
    result = cli("doctor", "--postgres", POSTGRES, "--redis", REDIS, prelude=NO_MODEL_SDKS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "answers (PostgreSQL" in result.stdout
    assert "answers (Redis" in result.stdout


def test_doctor_fails_for_a_named_store_that_does_not_answer_and_hides_its_password() -> None:
    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/0"
    result = cli("doctor", "--redis", url, "--timeout", "1", prelude=NO_MODEL_SDKS)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "does not answer" in result.stdout
    assert "s3cret" not in result.stdout
    assert "user:***@127.0.0.1" in result.stdout


def test_log_level_shows_the_library_logs_on_stderr(tmp_path: Path) -> None:
    chat = ("chat", "--model", "echo", "--session", "s1", "--data-dir", str(tmp_path))
    quiet = cli(*chat, stdin="hi\n")
    loud = cli("--log-level", "debug", *chat, stdin="hi\n")
    assert quiet.returncode == loud.returncode == 0, loud.stderr
    assert "framework_agents." not in quiet.stderr
    assert "DEBUG framework_agents.sessions.local: stored session/s1/" in loud.stderr


def test_an_unknown_log_level_is_a_usage_error() -> None:
    result = cli("--log-level", "loud", "doctor")
    assert result.returncode == 2
    assert "loud" in result.stderr
