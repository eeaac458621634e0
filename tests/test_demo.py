"""The demo (``make demo``) runs and shows what it promises."""

from __future__ import annotations

import io
import subprocess
import sys

from framework_agents.demo import main

KEY_LINES = [
    "== 1. Memory: FileMemory survives a restart; windows stay well formed ==",
    "restarted: a new FileMemory loaded 4 messages, same ids: True",
    "on disk: version 2, 4 messages",
    "== 2. SlidingWindowConversationManager: a pin and a tool-heavy history ==",
    "pinned system message kept: True",
    "== 3. SummarizingConversationManager: reduce and last_summary ==",
    "last_summary:",
    "  | Summary of the earlier conversation:",
    "== 4. repair_history: a history with an interrupted call ==",
    "added 1 interrupted result (for #b1), dropped 1 orphaned result",
    "idempotent: True",
    "done.",
]


def test_demo_main_prints_the_walkthrough() -> None:
    out = io.StringIO()
    assert main([], out=out) == 0
    text = out.getvalue()
    for line in KEY_LINES:
        assert line in text, line
    # Every well-formedness claim after a cut or a repair holds; only the broken input fails.
    verdicts = [
        part.split("well formed: ")[1][:5] for part in text.splitlines() if "well formed: " in part
    ]
    assert verdicts.count("False") == 1
    assert (
        "CompactedMemory(max_messages=6) after 10 messages: 6 stored, first is <compaction>" in text
    )
    assert "mentions Paris: True" in text


def test_demo_runs_as_a_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "framework_agents.demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    for line in KEY_LINES:
        assert line in proc.stdout, line
