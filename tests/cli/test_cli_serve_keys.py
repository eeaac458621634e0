"""``framework-agents serve --keys FILE``: a real ``serve`` process seals its store at rest."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serve_support import Refused

from processes import close_process

pytest.importorskip("cryptography", reason="needs the crypto extra (cryptography)")

SRC = str(Path(__file__).resolve().parents[2] / "src")
JSON = {"Accept": "application/json"}
KEY = bytes(range(32))
CANARY = "Zq7canaryWx4"


def _keys_line(key_id: str, key: bytes) -> str:
    return f"{key_id} {base64.b64encode(key).decode()}"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH", "")) if p)
    env.pop("FRAMEWORK_AGENTS_TOKEN", None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_with_keys_seals_its_store(tmp_path: Path) -> None:
    port = _free_port()
    keys = tmp_path / "keys"
    keys.write_text(_keys_line("2026-12", KEY) + "\n")
    root = tmp_path / "store"
    command = [
        sys.executable, "-m", "framework_agents.cli", "serve", "--model", "echo",
        "--store", str(root), "--keys", str(keys), "--port", str(port),
        "--no-console",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, env=_env(), cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        assert process.stderr is not None
        log = b""
        for line in process.stderr:
            log += line
            if b"Application startup complete" in line:
                break
        else:
            pytest.fail("the server did not start:\n" + log.decode(errors="replace"))
        assert b"encrypted at rest (--keys)" in log
        url = f"http://127.0.0.1:{port}"
        ran = httpx.post(
            f"{url}/api/threads/s1/runs", json={"prompt": f"hi {CANARY}"}, headers=JSON, timeout=60
        )
        assert ran.status_code == 200, ran.text
        assert CANARY in ran.text
    finally:
        close_process(process)
    files = [path for path in root.rglob("*") if path.is_file()]
    assert files
    assert [path for path in files if CANARY.encode() in path.read_bytes()] == []


def test_serve_refuses_a_bad_keys_file(tmp_path: Path, refused: Refused) -> None:
    keys = tmp_path / "keys"
    keys.write_text("k1 " + base64.b64encode(b"sixteen byte key").decode() + "\n")
    status, stderr = refused("--store", str(tmp_path / "store"), "--keys", str(keys))
    assert status == 2, stderr
    assert "line 1" in stderr and "32 bytes" in stderr
    assert base64.b64encode(b"sixteen byte key").decode() not in stderr
    assert not (tmp_path / "store").exists()
