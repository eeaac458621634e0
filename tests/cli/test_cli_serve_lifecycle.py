"""``serve`` as a production process: its extras, its store at start-up, SIGTERM, workers, lease.

Each test starts ``python -m framework_agents.cli serve`` and drives it over HTTP. The app
they serve (written into the test's directory) has one slow tool, ``hold``, that writes
``started`` and then waits for the file ``gate``: a run is known to be in flight (the file
exists) without a sleep, and it ends when the test opens the gate.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from processes import close_process

SRC = str(Path(__file__).resolve().parents[2] / "src")
JSON = {"Accept": "application/json"}

APP = """
import asyncio, os
from pathlib import Path
from framework_agents import Agent, FunctionModel, Message, ToolCall, tool

HERE = Path(os.environ["HOLD_DIR"])

@tool
async def hold() -> str:
    '''Wait for the test's gate.'''
    (HERE / "started").write_text(str(os.getpid()))
    while not (HERE / "gate").exists():
        await asyncio.sleep(0.02)
    return "held"

def answer(messages, tools):
    last = messages[-1]
    if last.role == "tool":
        return Message(role="assistant", content=f"done: {last.text}")
    if last.text == "wait":
        turn = sum(1 for m in messages if m.role == "user")
        return Message(role="assistant", tool_calls=[ToolCall(f"h-{turn}", "hold", {})])
    return Message(role="assistant", content=f"echo: {last.text}")

def factory():
    return Agent(FunctionModel(answer), tools=[hold])
"""

#: Modules a stand-in package makes unimportable (``ModuleNotFoundError`` naming them).
_BLOCKER = "raise ModuleNotFoundError(f'No module named {__name__!r}', name=__name__)\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env(tmp_path: Path, *, blocked: tuple[str, ...] = ()) -> dict[str, str]:
    env = dict(os.environ)
    paths = [SRC, env.get("PYTHONPATH", "")]
    if blocked:
        stubs = tmp_path / "blocked"
        for name in blocked:
            (stubs / name).mkdir(parents=True, exist_ok=True)
            (stubs / name / "__init__.py").write_text(_BLOCKER)
        paths.insert(0, str(stubs))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["HOLD_DIR"] = str(tmp_path)
    env.pop("FRAMEWORK_AGENTS_TOKEN", None)
    env.pop("FRAMEWORK_AGENTS_LOG_LEVEL", None)
    return env


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "framework_agents.cli", "serve", *args]


class Server:
    """A ``serve`` process of a test and its base URL."""

    #: Every server started by the running test (closed by the ``servers`` fixture).
    started: ClassVar[list[Server]] = []

    def __init__(self, tmp_path: Path, *args: str, blocked: tuple[str, ...] = ()) -> None:
        (tmp_path / "holdapp.py").write_text(APP)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = _command(*args, "--port", str(self.port), "--no-console")
        self.process = subprocess.Popen(
            command,
            env=_env(tmp_path, blocked=blocked),
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        Server.started.append(self)
        self.log: list[str] = []
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if "Application startup complete" in line:
                return
        self.process.wait(10)
        pytest.fail("the server did not start:\n" + "".join(self.log))

    def rest_of_log(self) -> str:
        assert self.process.stderr is not None
        return "".join(self.log) + self.process.stderr.read()

    def close(self) -> None:
        close_process(self.process)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    Server.started = []
    yield Server.started
    for server in Server.started:
        server.close()


def _wait_for(path: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_serve_runs_without_the_cli_extra(tmp_path: Path, servers: list[Server]) -> None:
    blocked = ("typer", "rich")  # click stays: uvicorn needs it
    server = Server(tmp_path, "--model", "echo", "--store", str(tmp_path / "s"), blocked=blocked)
    answer = httpx.post(f"{server.url}/api/threads/a/runs", json={"prompt": "hi"}, headers=JSON)
    assert answer.json()["text"].startswith("echo #1: hi")
    # the commands that need the cli extra still say so
    chat = subprocess.run(
        [sys.executable, "-m", "framework_agents.cli", "chat"],
        env=_env(tmp_path, blocked=blocked),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert chat.returncode == 1
    assert "needs the 'cli' extra" in chat.stderr


def test_a_missing_server_extra_names_what_to_install(tmp_path: Path) -> None:
    env = _env(tmp_path, blocked=("starlette",))
    imported = subprocess.run(
        [sys.executable, "-c", "import framework_agents.server"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.returncode == 1
    last = imported.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: framework_agents.server needs the 'server' extra")
    assert "starlette" in last and "pip install '.[server]'" in last
    served = subprocess.run(
        _command("--model", "echo", "--store", "memory:"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 1
    assert "needs the 'server' extra" in served.stderr
    assert "Traceback" not in served.stderr


# The Redis case runs in `make stress`: the refusal is the same code path, and
# tests/server/test_readiness.py finds both stores unreachable in-process.
@pytest.mark.parametrize(
    "store",
    [
        "postgresql://postgres@127.0.0.1:1/test",  # nothing listens on port 1
        pytest.param("redis://127.0.0.1:1/0", marks=pytest.mark.slow),
    ],
)
def test_serve_refuses_to_start_on_a_store_it_cannot_reach(tmp_path: Path, store: str) -> None:
    result = subprocess.run(
        _command("--model", "echo", "--store", store, "--port", str(_free_port())),
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "refusing to start" in result.stderr
    assert "BACKEND_UNAVAILABLE" in result.stderr
    assert "Uvicorn running" not in result.stderr
    assert "Traceback" not in result.stderr


def test_workers_are_refused_on_a_memory_store(tmp_path: Path) -> None:
    result = subprocess.run(
        _command("--model", "echo", "--store", "memory:", "--workers", "2"),
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--workers" in result.stderr and "memory:" in result.stderr


def test_sigterm_lets_the_run_in_flight_finish_then_exits_0(
    tmp_path: Path, servers: list[Server]
) -> None:
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    server = Server(
        tmp_path, "holdapp:factory", "--store", store, "--grace", "60", "--log-level", "info"
    )
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        client.stream("POST", "/api/threads/t/runs", json={"prompt": "wait"}) as stream,
    ):
        lines = stream.iter_lines()
        _wait_for(tmp_path / "started")
        server.process.send_signal(signal.SIGTERM)
        (tmp_path / "gate").write_text("open")
        body = "\n".join(lines)
    assert "done: held" in body
    assert "event: run_finished" in body
    assert server.process.wait(60) == 0
    assert "draining: 1 run(s) in flight" in server.rest_of_log()


# Two serve processes, the first stopped past its grace (seconds): make stress. make test
# keeps SIGTERM's drain of the run in flight (above).
@pytest.mark.slow
def test_sigterm_stops_a_run_past_the_grace_at_its_checkpoint_and_exits_0(
    tmp_path: Path, servers: list[Server]
) -> None:
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    first = Server(tmp_path, "holdapp:factory", "--store", store, "--grace", "0.5")
    with httpx.Client(base_url=first.url, timeout=60) as client:
        done = client.post("/api/threads/t/runs", json={"prompt": "before"}, headers=JSON)
        assert done.json()["status"] == "completed"
        with client.stream("POST", "/api/threads/t/runs", json={"prompt": "wait"}) as stream:
            lines = stream.iter_lines()
            _wait_for(tmp_path / "started")
            started = time.monotonic()
            first.process.send_signal(signal.SIGTERM)
            body = "\n".join(lines)  # the stream ends with a coded error, then the server
    assert "event: run_error" in body and "SHUTTING_DOWN" in body
    assert first.process.wait(60) == 0
    assert time.monotonic() - started < 30  # the grace, not the tool, decided the end
    (tmp_path / "gate").write_text("open")
    second = Server(tmp_path, "holdapp:factory", "--store", store)
    with httpx.Client(base_url=second.url, timeout=60) as client:
        thread = client.get("/api/threads/t")
        assert thread.status_code == 200
        # the thread stands at its last checkpoint (the stopped run saved nothing: its
        # client was told SHUTTING_DOWN and retries it), and its lock was let go
        users = [m for m in thread.json()["messages"] if m["role"] == "user"]
        assert [str(m["content"]) for m in users] == ["before"]
        again = client.post("/api/threads/t/runs", json={"prompt": "after"}, headers=JSON)
        assert again.status_code == 200, again.text
        assert again.json()["text"] == "echo: after"


# In `make stress`: in `make test`, tests/server/test_unknown_outcome_after_crash.py's
# SQLite case has a second server take a SIGKILLed one's threads after a 1 s lease, and
# tests/stores/test_stores_fencing.py a waiting lock taken once a holder's lease ended.
@pytest.mark.slow
def test_a_restarted_server_gets_a_dead_holders_thread_after_lease(
    tmp_path: Path, servers: list[Server]
) -> None:
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    first = Server(tmp_path, "holdapp:factory", "--store", store, "--lease", "1")
    with (
        httpx.Client(base_url=first.url, timeout=60) as client,
        client.stream("POST", "/api/threads/t/runs", json={"prompt": "wait"}) as stream,
    ):
        next(stream.iter_lines())
        _wait_for(tmp_path / "started")
        first.process.kill()  # a crash: the thread's lock is never released
    first.process.wait(30)
    (tmp_path / "gate").write_text("open")
    second = Server(tmp_path, "holdapp:factory", "--store", store, "--lease", "1")
    with httpx.Client(base_url=second.url, timeout=60) as client:
        started = time.monotonic()
        answer = client.post("/api/threads/t/runs", json={"prompt": "hi"}, headers=JSON)
        waited = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == "echo: hi"
    assert waited < 9  # not the 10 s lock wait a 30 s lease costs


def test_workers_serve_one_store_and_stop_cleanly(tmp_path: Path, servers: list[Server]) -> None:
    store = f"sqlite:///{tmp_path / 'agents.db'}"
    server = Server(tmp_path, "holdapp:factory", "--store", store, "--workers", "2")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for i in range(6):  # new connections: the kernel spreads them over the workers
            with httpx.Client(base_url=server.url, timeout=60) as fresh:
                reply = fresh.post(f"/api/threads/w{i}/runs", json={"prompt": "x"}, headers=JSON)
                assert reply.json()["text"] == "echo: x"
        listed = client.get("/api/threads").json()["threads"]
        assert sorted(t["thread_id"] for t in listed) == [f"w{i}" for i in range(6)]
        assert client.get("/readyz").json() == {"status": "ready"}
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(60) == 0
