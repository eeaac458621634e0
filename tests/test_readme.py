"""The README's quickstart runs as printed (twice: the second run resumes the session)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_runs_and_resumes(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no python block"
    script = tmp_path / "quickstart.py"
    script.write_text(blocks[0], encoding="utf-8")
    outputs = [
        subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.splitlines()
        for _ in range(2)
    ]
    # The first run starts the session; the second restores it from disk (2 -> 4 messages).
    shown = "approve? publish {'title': 'Hello'}"  # the call the approval then runs
    assert outputs[0] == ["Hello Ada! 2", shown, "Done: it is live."]
    assert outputs[1] == ["Hello Ada! 4", shown, "Done: it is live."]
