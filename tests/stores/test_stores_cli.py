"""``framework-agents chat --store URL``: sessions kept in a database, resumed next time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import framework_agents

#: The child imports this checkout's package, whatever the working directory.
_ENV = {**os.environ, "PYTHONPATH": str(Path(framework_agents.__file__).parents[1])}

pytest.importorskip("typer", reason="needs the 'cli' extra")


def _chat(cwd: Path, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framework_agents.cli", "chat", "--model", "echo", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=180,
        check=False,
        env=_ENV,
    )


# In `make stress` (two chat processes): in `make test`, tests/cli/test_cli_chat.py resumes a
# session in a second process, test_stores_sessions.py keeps sessions in SQLite, and the
# case below has `--store` reach open_store.
@pytest.mark.slow
def test_chat_keeps_its_session_in_a_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/agents.db"
    first = _chat(tmp_path, "hello\n/exit\n", "--session", "s1", "--store", url)
    assert first.returncode == 0, first.stderr
    second = _chat(tmp_path, "again\n/exit\n", "--session", "s1", "--store", url)
    assert second.returncode == 0, second.stderr
    assert "resumed 2 messages" in second.stdout
    assert "echo #2: again (saw 3 messages)" in second.stdout
    assert not (tmp_path / ".data").exists()  # nothing went to the default directory


def test_chat_with_a_bad_store_url_fails_with_its_code(tmp_path: Path) -> None:
    result = _chat(tmp_path, "hi\n", "--session", "s1", "--store", "mongodb://h/x")
    assert result.returncode == 1
    assert "INVALID_ARGUMENT" in result.stderr and "Traceback" not in result.stderr
