"""``framework-agents serve`` as a real process: the built-in assistant and its approval tool.

Options refused before anything starts are tried in this process (``run_serve``, what the
command's process runs): a process each cost a second apiece.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_support import Refused

from framework_agents.bank import MemoryBank
from framework_agents.cli.serve import listen_names
from processes import close_process

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FRAMEWORK_AGENTS_TOKEN", None)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _started(process: subprocess.Popen[str]) -> list[str]:
    """The server's log lines up to the one saying it listens (a failure if it never does)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "Uvicorn running on" in line:
            return seen
    process.wait(10)
    pytest.fail("the server did not start:\n" + "".join(seen))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``serve --model echo`` on a free port, until its log says it listens."""
    port = _free_port()
    command = [sys.executable, "-m", "framework_agents.cli", "serve", "--model", "echo"]
    command += ["--store", str(tmp_path / "store"), "--port", str(port), "--no-console"]
    process = subprocess.Popen(
        command, env=_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    _started(process)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    assert process.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it caught
    close_process(process)


def test_builtin_assistant_chats_and_asks_before_saving_a_note(server: str) -> None:
    accept = {"Accept": "application/json"}
    with httpx.Client(base_url=server, timeout=60) as client:
        chat = client.post("/api/threads/c1/runs", json={"prompt": "hello"}, headers=accept)
        assert chat.json()["text"].startswith("echo #1: hello")
        note = client.post(
            "/api/threads/c1/runs", json={"prompt": "/note buy milk"}, headers=accept
        )
        pending = note.json()["pending"]
        assert note.json()["status"] == "interrupted"
        assert (pending["tool"], pending["args"]) == ("save_note", {"text": "buy milk"})
        done = client.post(
            "/api/threads/c1/resume",
            json={"decisions": {pending["tool_call_id"]: {"edit": {"text": "buy oat milk"}}}},
            headers=accept,
        )
        assert done.json()["status"] == "completed"
        thread = client.get("/api/threads/c1").json()
        assert thread["state"] == {"notes": ["buy oat milk"]}
        assert client.get("/.well-known/agent-card.json").json()["name"] == (
            "framework-agents assistant"
        )


def test_refuses_a_public_address_without_a_token(tmp_path: Path, refused: Refused) -> None:
    status, stderr = refused("--host", "0.0.0.0", "--store", str(tmp_path))
    assert status == 2
    assert "--token" in stderr
    assert not any(tmp_path.iterdir())  # nothing was opened or written


@pytest.mark.parametrize(
    "flag", [["--allowed-origin", "app.example.com"], ["--allowed-host", "https://x.example"]]
)
def test_a_malformed_allowed_host_or_origin_stops_serve_before_it_starts(
    tmp_path: Path, flag: list[str], refused: Refused
) -> None:
    status, stderr = refused("--store", str(tmp_path), *flag)
    assert status == 2
    assert flag[0].removeprefix("--").replace("-", "_") in stderr
    assert not any(tmp_path.iterdir())


def test_a_listen_name_is_an_allowed_host_and_an_address_is_not_needed() -> None:
    assert listen_names("agents.internal") == ["agents.internal"]
    for address in ("127.0.0.1", "0.0.0.0", "::", "[::1]", "10.1.2.3"):
        assert listen_names(address) == []


def test_serves_an_app_factory_named_module_attr(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(
        "from framework_agents import Agent, ScriptedModel\n"
        "def factory():\n"
        "    return Agent(ScriptedModel(['from my app']))\n"
    )
    port = _free_port()
    command = [sys.executable, "-m", "framework_agents.cli", "serve", "myapp:factory"]
    command += ["--store", "memory:", "--port", str(port), "--no-console"]
    command += ["--allowed-host", "agents.example.com", "--cors-origin", "http://localhost:3000"]
    command += ["--allowed-origin", "https://app.example.com"]
    process = subprocess.Popen(command, env=_env(), cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    try:
        for line in process.stderr:
            if "Uvicorn running on" in line:
                break
        url = f"http://127.0.0.1:{port}/api/threads/a/runs"
        answer = httpx.post(url, json={"prompt": "x"}, headers={"Accept": "application/json"})
        assert answer.json()["text"] == "from my app"
        for origin in ("https://app.example.com", "http://localhost:3000"):
            # a page of an allowed origin, through a proxy that keeps the Host it was sent
            site = {"Host": "agents.example.com", "Origin": origin}
            allowed = httpx.post(url, json={"prompt": "x"}, headers=site, timeout=60)
            assert allowed.status_code == 200, allowed.text
        refused = httpx.post(url, json={"prompt": "x"}, headers={"Origin": "https://evil.example"})
        assert refused.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"
        rebound = httpx.get(
            f"http://127.0.0.1:{port}/api/threads", headers={"Host": "evil.example"}
        )
        assert rebound.json()["error"]["code"] == "HOST_NOT_ALLOWED"
    finally:
        process.terminate()
        process.wait(30)
        close_process(process)


def test_serves_the_memory_bank_named_by_bank(tmp_path: Path) -> None:
    async def remember() -> str:
        async with MemoryBank(tmp_path / "data") as bank:
            record = await bank.remember("Ada prefers the window seat", namespace=("ada",))
            return record.id

    record_id = asyncio.run(remember())
    port = _free_port()
    command = [sys.executable, "-m", "framework_agents.cli", "serve", "--model", "echo"]
    command += ["--store", str(tmp_path / "data"), "--bank", str(tmp_path / "data")]
    command += ["--port", str(port), "--no-console"]
    process = subprocess.Popen(command, env=_env(), stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    try:
        seen = _started(process)
        assert any(f"memory bank {tmp_path / 'data'}" in line for line in seen), seen
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            assert client.get("/api/info").json()["bank"] is True
            found = client.get("/api/memories", params={"namespace": "ada", "q": "window"})
            assert [hit["record"]["id"] for hit in found.json()["hits"]] == [record_id]
            assert client.delete(f"/api/memories/{record_id}").status_code == 204
            # the threads of the same store are served beside the bank
            chat = client.post(
                "/api/threads/t/runs", json={"prompt": "hi"}, headers={"Accept": "application/json"}
            )
            assert chat.json()["status"] == "completed"
    finally:
        process.terminate()
        process.wait(30)
        close_process(process)
    assert not list((tmp_path / "data" / "bank" / "records").iterdir())  # forgotten on disk


# A serve process driven by an MCP client (seconds): make stress. make test keeps MCP
# serving in tests/server/test_mcp_serve.py and serve's --mcp-namespace check below.
@pytest.mark.slow
def test_mcp_serves_the_agent_and_the_bank_in_the_namespace_given(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    port = _free_port()
    command = [sys.executable, "-m", "framework_agents.cli", "serve", "--model", "echo"]
    command += ["--store", str(tmp_path / "data"), "--bank", str(tmp_path / "data"), "--mcp"]
    command += ["--mcp-namespace", "team/ada", "--port", str(port), "--no-console"]
    process = subprocess.Popen(command, env=_env(), stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None

    async def use() -> tuple[list[str], str]:
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp")) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            await client.call_tool("memory_remember", {"text": "Ada likes tea"})
            answer = await client.call_tool("ask", {"thread_id": "m", "text": "hi"})
            block = answer.content[0]
            return names, getattr(block, "text", "")

    try:
        seen = _started(process)
        assert any("MCP at /mcp" in line for line in seen), seen
        names, answer = asyncio.run(use())
        assert names == ["ask", "decide", "memory_forget", "memory_remember", "memory_search"]
        assert answer  # the echo model's answer
    finally:
        process.terminate()
        process.wait(30)
        close_process(process)

    async def stored() -> list[str]:
        async with MemoryBank(tmp_path / "data") as bank:
            return [r.text for r in await bank.list(("team", "ada"))]

    assert asyncio.run(stored()) == ["Ada likes tea"]


def test_a_bad_mcp_namespace_stops_serve_before_it_starts(tmp_path: Path, refused: Refused) -> None:
    status, stderr = refused("--store", str(tmp_path), "--mcp", "--mcp-namespace", "a//b")
    assert status == 2
    assert "mcp_namespace" in stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("memory", "'memory:'"),
        ("file://elsewhere/srv/agents", "file:///"),
        ("sqlite", "sqlite:///"),
    ],
)
def test_a_store_url_open_store_refuses_stops_serve_before_it_starts(
    tmp_path: Path, url: str, says: str, refused: Refused, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--store memory`` (for ``memory:``) served from a ``./memory`` directory store."""
    monkeypatch.chdir(tmp_path)
    status, stderr = refused("--store", url)
    assert status == 2
    assert says in stderr and "Traceback" not in stderr
    assert not any(tmp_path.iterdir())
