"""``framework-agents serve --tokens FILE``: tenants from a file, in a real ``serve`` process.

Each test runs ``python -m framework_agents.cli serve`` (the ``framework-agents`` command)
on this checkout. A good file serves its tenants apart, and the process's whole log, at
debug level, never holds a token; a bad file is refused before anything listens, with
``INVALID_ARGUMENT``, the file and the line, and never the token it read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from serve_support import Refused

from processes import close_process

SRC = str(Path(__file__).resolve().parents[2] / "src")
JSON = {"Accept": "application/json"}
ALPHA = "alpha-tok-Qk3v9w"
BETA = "beta-tok-Zr81mx"
OTHER = "never-seen-tok-77Lq"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH", "")) if p)
    env.pop("FRAMEWORK_AGENTS_TOKEN", None)
    env.pop("FRAMEWORK_AGENTS_LOG_LEVEL", None)
    return env


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "framework_agents.cli", "serve", *args]


async def _mcp_ask(url: str, headers: dict[str, str]) -> str:
    import httpx2
    import mcp_types as types
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async with httpx2.AsyncClient(headers=headers) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            result = await client.call_tool("ask", {"thread_id": "m1", "text": "from mcp"})
            (block,) = result.content
            assert isinstance(block, types.TextContent)
            return block.text


def test_a_tokens_file_serves_each_tenant_apart_and_no_token_is_logged(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(
        f"# token tenant\n\n{ALPHA} alpha\n  {BETA}\tbeta  \nalpha-second-tok-Pp2 alpha\n"
    )
    port = _free_port()
    command = _command(
        "--model", "echo", "--store", str(tmp_path / "store"), "--tokens", str(tokens),
        "--port", str(port), "--no-console", "--log-level", "debug", "--mcp",
    )  # fmt: skip
    process = subprocess.Popen(
        command, env=_env(), cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    log: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line)
            if "Application startup complete" in line:
                break
        else:
            pytest.fail("the server did not start:\n" + "".join(log))
        stderr, stdout = process.stderr, process.stdout
        assert stdout is not None
        # Read both pipes to their end meanwhile: a debug log fills a pipe nobody reads.
        readers = [
            threading.Thread(target=lambda: log.append(stderr.read()), daemon=True),
            threading.Thread(target=lambda: log.append(stdout.read()), daemon=True),
        ]
        for reader in readers:
            reader.start()
        url = f"http://127.0.0.1:{port}"
        alpha = {"Authorization": f"Bearer {ALPHA}"}
        beta = {"Authorization": f"Bearer {BETA}"}
        second = {"Authorization": "Bearer alpha-second-tok-Pp2"}
        ran = httpx.post(f"{url}/api/threads/t1/runs", json={"prompt": "hi"}, headers=alpha | JSON)
        assert ran.status_code == 200, ran.text
        # Two tokens of one tenant see the same threads; another tenant sees none of them.
        assert httpx.get(f"{url}/api/threads/t1", headers=second).status_code == 200
        foreign = httpx.get(f"{url}/api/threads/t1", headers=beta)
        unknown = httpx.get(f"{url}/api/threads/t2", headers=beta)
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.text.replace("t1", "<id>") == unknown.text.replace("t2", "<id>")
        assert httpx.get(f"{url}/api/threads", headers=beta).json()["threads"] == []
        listed = httpx.get(f"{url}/api/threads", headers=alpha).json()["threads"]
        assert [t["thread_id"] for t in listed] == ["t1"]
        refused = httpx.get(f"{url}/api/threads", headers={"Authorization": f"Bearer {OTHER}"})
        assert refused.status_code == 401
        # A2A and MCP too, at debug level: their SDKs log requests of their own.
        a2a = {"A2A-Version": "1.0"}
        send = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hey"}]},
                "configuration": {"blocking": True},
            },
        }
        sent = httpx.post(f"{url}/a2a", json=send, headers=alpha | a2a).json()
        task_id = sent["result"]["task"]["id"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        found = httpx.post(f"{url}/a2a", json=get, headers=beta | a2a).json()
        assert found["error"]["message"] == "Task not found"
        assert asyncio.run(_mcp_ask(url, beta)).startswith("echo #1: from mcp")
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        for reader in readers:
            reader.join(60)
        everything = "".join(log)
    finally:
        close_process(process)
    assert "GET /api/threads" in everything  # the access log was on
    for secret in (ALPHA, BETA, OTHER, "alpha-second-tok-Pp2"):
        assert secret not in everything


@pytest.mark.parametrize(
    ("content", "line", "why"),
    [
        (f"# tenants\n{ALPHA} alpha\n{BETA}\n", 3, "two fields"),
        (f"{ALPHA} alpha extra\n", 1, "two fields"),
        (f"{ALPHA} alpha\n\n{ALPHA} beta\n", 3, "already on line 1"),
        (f"{ALPHA} al.pha\n", 1, "not a tenant name"),
        (f"{ALPHA} nul\n", 1, "not a tenant name"),
        (f"{ALPHA} alpha\n{BETA} béta\n", 2, "not a tenant name"),
    ],
    ids=["one-field", "three-fields", "repeated-token", "dotted-tenant", "device", "non-ascii"],
)
def test_a_bad_tokens_file_is_refused_with_its_line_number(
    tmp_path: Path, content: str, line: int, why: str, refused: Refused
) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(content, encoding="utf-8")
    status, stderr = refused("--store", "memory:", "--tokens", str(tokens))
    assert status == 2, stderr
    assert "INVALID_ARGUMENT" in stderr
    assert f"line {line}:" in stderr and why in stderr
    assert str(tokens) in stderr
    assert ALPHA not in stderr and BETA not in stderr
    assert "Traceback" not in stderr and "Uvicorn running" not in stderr


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda path: path.write_text("# nothing\n\n"), "holds no 'TOKEN TENANT' line"),
        (lambda path: None, "cannot read the tokens file"),
        (lambda path: path.write_bytes(b"\xff\xfe tok alpha\n"), "cannot read the tokens file"),
    ],
    ids=["empty", "missing", "not-utf8"],
)
def test_an_empty_or_unreadable_tokens_file_is_invalid_argument(
    tmp_path: Path, make: Callable[[Path], object], says: str, refused: Refused
) -> None:
    tokens = tmp_path / "tokens.txt"
    make(tokens)
    status, stderr = refused("--store", "memory:", "--tokens", str(tokens))
    assert status == 2, stderr
    assert "INVALID_ARGUMENT" in stderr and says in stderr
    assert "Traceback" not in stderr


def test_token_and_tokens_together_are_refused(tmp_path: Path, refused: Refused) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{ALPHA} alpha\n")
    status, stderr = refused("--store", "memory:", "--tokens", str(tokens), "--token", BETA)
    assert status == 2
    assert "not both" in stderr and BETA not in stderr


def test_tokens_let_serve_listen_beyond_loopback(tmp_path: Path) -> None:
    from framework_agents.cli.serve import check_listen
    from framework_agents.errors import InvalidArgumentError

    check_listen("0.0.0.0", str(tmp_path / "tokens.txt"))  # a tokens file guards it
    with pytest.raises(InvalidArgumentError):
        check_listen("0.0.0.0", None)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


# Two worker processes behind serve (seconds): make stress. make test keeps the tokens file
# served by one process (above) and tests/cli/test_cli_serve_lifecycle.py's workers.
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux's /proc")
def test_workers_read_the_tokens_file_and_get_no_token_in_their_environment(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{ALPHA} alpha\n{BETA} beta\n")
    port = _free_port()
    command = _command(
        "--model", "echo", "--store", f"sqlite:///{tmp_path / 'agents.db'}",
        "--tokens", str(tokens), "--workers", "2", "--port", str(port), "--no-console",
    )  # fmt: skip
    process = subprocess.Popen(
        command, env=_env(), cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        assert process.stderr is not None
        started = 0
        seen: list[bytes] = []
        for line in process.stderr:
            seen.append(line)
            started += b"Application startup complete" in line
            if started == 2:
                break
        else:
            pytest.fail("the workers did not start:\n" + b"".join(seen).decode())
        workers = _children(process.pid)
        assert workers, "no worker process found"
        for pid in workers:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            assert b"FRAMEWORK_AGENTS_SERVE_OPTIONS=" in environ  # the options they build from
            assert str(tokens).encode() in environ  # the file, which each worker reads
            assert ALPHA.encode() not in environ and BETA.encode() not in environ
        url = f"http://127.0.0.1:{port}"
        alpha = {"Authorization": f"Bearer {ALPHA}"}
        beta = {"Authorization": f"Bearer {BETA}"}
        for i in range(4):  # spread over both workers
            ran = httpx.post(
                f"{url}/api/threads/w{i}/runs", json={"prompt": "hi"}, headers=alpha | JSON
            )
            assert ran.status_code == 200, ran.text
        for i in range(4):
            assert httpx.get(f"{url}/api/threads/w{i}", headers=beta).status_code == 404
            assert httpx.get(f"{url}/api/threads/w{i}", headers=alpha).status_code == 200
    finally:
        _stop_with_workers(process)


def _stop_with_workers(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``serve`` (it stops its workers), then kill whatever is left of them.

    A SIGKILL to the supervisor alone leaves its workers running, orphaned, holding the port.
    """
    workers = _children(process.pid) if process.poll() is None else []
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):  # killed below
            process.wait(timeout=30)
    close_process(process)
    for pid in workers:
        with contextlib.suppress(OSError):  # gone (the usual case)
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
