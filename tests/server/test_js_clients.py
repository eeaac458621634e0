"""The official JS clients (@a2a-js/sdk, @ag-ui/client) against a real server, under node --test.

Needs Node.js 20 and ``npm ci`` in ``tests/js`` (``.ci/run`` does it); skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from server_support import Served

JS_DIR = Path(__file__).resolve().parents[1] / "js"


@pytest.mark.node
def test_js_clients_drive_a2a_agui_and_the_json_api(served: Served) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Node.js 20 runs the JS client tests)")
    if not (JS_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir():
        pytest.skip(f"the JS clients are not installed: run `npm ci --prefix {JS_DIR}`")
    env = {**os.environ, "FA_SERVER_URL": served.url}
    tests = sorted(str(p.name) for p in JS_DIR.glob("*.test.mjs"))
    result = subprocess.run(
        [node, "--test", *tests], cwd=JS_DIR, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout and "# pass 7" in result.stdout
