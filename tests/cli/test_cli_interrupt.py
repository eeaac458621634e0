"""Ctrl-C in ``framework-agents chat``: it stops an answer, and leaves from the prompt."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import select
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("typer", reason="needs the 'cli' extra")
pytest.importorskip("rich", reason="needs the 'cli' extra")

from rich.console import Console

from framework_agents import FunctionModel, Message, ToolSpec
from framework_agents.cli.chat import ChatOptions, run_chat

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_ctrl_c_while_the_model_answers_stops_that_answer_and_keeps_the_chat(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def answer(messages: list[Message], tools: list[ToolSpec]) -> str:
        asked.append(messages[-1].text)
        if len(asked) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered to the chat's handler
            await asyncio.Event().wait()  # a model that would answer forever
        return f"answer to {messages[-1].text} after {len(messages)} messages"

    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    options = ChatOptions(session_id=None, data_dir=tmp_path, system_prompt=None, window=40)
    status = asyncio.run(
        run_chat(console, FunctionModel(answer), options, stdin=io.StringIO("first\nsecond\n"))
    )

    text = out.getvalue()
    assert status == 0
    assert asked == ["first", "second"]
    assert "answer stopped" in text
    # The stopped run left no trace: the second prompt is the first message of the history.
    assert "answer to second after 1 messages" in text
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler removed


def _read_until(fd: int, needle: bytes, seen: bytearray) -> bool:
    """Read the pty until ``needle`` shows up; ``False`` if the process closed it first."""
    while needle not in seen:
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            return False
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not chunk:
            return False
        seen.extend(chunk)
    return True


def _spawn(args: Sequence[str], cwd: Path) -> tuple[subprocess.Popen[bytes], int]:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "framework_agents.cli", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": SRC, "TERM": "dumb", "COLUMNS": "120"},
        start_new_session=True,  # its own session, so the pty becomes its controlling tty
        preexec_fn=lambda: __import__("fcntl").ioctl(0, __import__("termios").TIOCSCTTY, 0),
    )
    os.close(follower)
    return process, leader


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
def test_ctrl_c_at_the_prompt_leaves_at_once(tmp_path: Path) -> None:
    process, leader = _spawn(["chat", "--model", "echo"], tmp_path)
    seen = bytearray()
    try:
        assert _read_until(leader, b"you>", seen), seen.decode(errors="replace")
        os.write(leader, b"hello\r")
        assert _read_until(leader, b"echo #1: hello", seen), seen.decode(errors="replace")
        # Keep what came after the answer: the next prompt may have arrived in that read.
        del seen[: seen.index(b"echo #1: hello") + len(b"echo #1: hello")]
        assert _read_until(leader, b"you>", seen), seen.decode(errors="replace")
        os.write(leader, b"\x03")  # Ctrl-C: the terminal sends SIGINT to the chat
        status = process.wait(timeout=60)  # a bound for a hang, not a timing assertion
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    assert status == 130
