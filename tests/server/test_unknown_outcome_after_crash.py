"""A server SIGKILLed in approved calls: the next server shows each as a settleable interrupt.

One ``framework-agents serve`` process runs three approved calls (one approved over the
JSON API, one over AG-UI, one over A2A) whose tool blocks; it is SIGKILLed while they
run. A second process on the same store shows each call as the open interrupt of its
thread, of unknown outcome and with an id of its own: the JSON API's GET and thread list,
AG-UI's interrupt outcome (a client catching up), A2A's ``input-required`` task. A
replayed approval does not settle it; a decision naming the interrupt does. The tool
logs ``start`` and ``done`` lines: no call finishes twice, and a call runs again only on
the decision that says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import a2a_send

from processes import close_process

SRC = str(Path(__file__).resolve().parents[2] / "src")
JSON = {"Accept": "application/json"}

APP = """
import asyncio
import os
from pathlib import Path
from framework_agents import Agent, FunctionModel, Message, ToolCall, tool

LOG = Path(os.environ["PUBLISH_LOG"])
HOLD = Path(os.environ["PUBLISH_HOLD"])

@tool(requires_approval=True)
async def publish(title: str) -> str:
    '''Publish a post (a human approves it).'''
    with LOG.open("a") as log:
        log.write(f"start {title}\\n")
    if HOLD.exists():  # the first server dies here, in the call
        await asyncio.Event().wait()
    with LOG.open("a") as log:
        log.write(f"done {title}\\n")
    return f"published {title}"

def answer(messages, tools):
    last = messages[-1]
    if last.role == "tool":
        return Message(role="assistant", content=f"after: {last.text}")
    call = ToolCall("call-" + last.text.split()[-1], "publish", {"title": last.text.split()[-1]})
    return Message(role="assistant", tool_calls=[call])

def factory():
    return Agent(FunctionModel(answer), tools=[publish])
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(tmp_path: Path, store: str, lease: str) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env["PUBLISH_LOG"] = str(tmp_path / "published.log")
    env["PUBLISH_HOLD"] = str(tmp_path / "hold")
    env.pop("FRAMEWORK_AGENTS_TOKEN", None)
    command = [sys.executable, "-m", "framework_agents.cli", "serve", "crashapp:factory"]
    command += ["--store", store, "--port", str(port), "--no-console", "--lease", lease]
    process = subprocess.Popen(
        command, env=env, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "Application startup complete" in line:
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, f"http://127.0.0.1:{port}"
    close_process(process)
    pytest.fail("the server did not start:\n" + "".join(seen))


def _log(tmp_path: Path) -> list[str]:
    path = tmp_path / "published.log"
    return path.read_text().splitlines() if path.exists() else []


def _until(check: Callable[[], bool], what: str) -> None:
    """Wait for a condition another process brings about (a bounded poll, not a timing)."""
    for _ in range(12000):  # up to two minutes on a loaded machine
        if check():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"never happened: {what}")


def _in_background(call: Callable[[], Any]) -> threading.Thread:
    """Run a request whose server will die under it (its error is expected)."""

    def run() -> None:
        with contextlib.suppress(Exception):
            call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _agui_body(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def _agui(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/agui", json=body)
    assert response.status_code == 200, response.text
    return [json.loads(b[6:]) for b in response.text.split("\n\n") if b.startswith("data: ")]


def _a2a_message(text: str | None = None, data: Any = None, **ids: str) -> Any:
    from a2a.helpers.proto_helpers import new_data_part, new_text_part
    from a2a.types import a2a_pb2

    part = new_text_part(text) if text is not None else new_data_part(data)
    return a2a_pb2.Message(
        message_id=str(uuid.uuid4()), role=a2a_pb2.Role.ROLE_USER, parts=[part], **ids
    )


async def _a2a_get(url: str, task_id: str) -> Any:
    from a2a.client import ClientConfig, create_client
    from a2a.types import a2a_pb2

    client = await create_client(url, client_config=ClientConfig(streaming=False))
    try:
        return await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
    finally:
        await client.close()


def _approval(task: Any) -> dict[str, Any]:
    from a2a.helpers.proto_helpers import get_data_parts
    from a2a.types import a2a_pb2

    assert task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED, task.status
    parts = get_data_parts(list(task.status.message.parts))
    assert len(parts) == 1, task
    approval: dict[str, Any] = parts[0]
    return approval


# make test crashes the server on SQLite; the directory store's run (a killed server and
# its successor: seconds) is in make stress.
@pytest.fixture(params=[pytest.param("directory", marks=pytest.mark.slow), "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A directory store (its thread lock dies with the process) or SQLite (leased)."""
    if request.param == "directory":
        return str(tmp_path / "store")
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def crashed(tmp_path: Path, store: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A second server on ``store`` after the first was SIGKILLed in three approved calls."""
    (tmp_path / "crashapp.py").write_text(APP)
    (tmp_path / "hold").write_text("")
    lease = "1"
    first, url = _serve(tmp_path, store, lease)
    seen: dict[str, Any] = {}
    waiting: list[threading.Thread] = []
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            done = client.post("/api/threads/j1/runs", json={"prompt": "publish J"}, headers=JSON)
            seen["json_call"] = done.json()["pending"]["tool_call_id"]
            body = {"decisions": {seen["json_call"]: "approve"}}
            waiting.append(
                _in_background(lambda: httpx.post(f"{url}/api/threads/j1/resume", json=body))
            )
            seen["agui_messages"] = [{"id": "u-g", "role": "user", "content": "publish G"}]
            events = _agui(client, _agui_body("g1", seen["agui_messages"]))
            (interrupt,) = events[-1]["outcome"]["interrupts"]
            entry = {"interruptId": interrupt["id"], "status": "resolved"}
            resume = _agui_body("g1", [], resume=[{**entry, "payload": {"approved": True}}])
            waiting.append(_in_background(lambda: httpx.post(f"{url}/agui", json=resume)))
        task = asyncio.run(a2a_send(url, _a2a_message("publish A")))
        seen["a2a_task"] = task.id
        approve = _a2a_message(
            data={"decision": "approve", "toolCallId": _approval(task)["toolCallId"]},
            task_id=task.id,
            context_id=task.context_id,
        )
        waiting.append(_in_background(lambda: asyncio.run(a2a_send(url, approve))))
        started = {"start J", "start G", "start A"}
        _until(lambda: started <= set(_log(tmp_path)), "the three calls started")
        first.send_signal(signal.SIGKILL)  # dies in the three calls
        first.wait(30)
        for request in waiting:
            request.join(60)
    finally:
        close_process(first)
    (tmp_path / "hold").unlink()
    second, url = _serve(tmp_path, store, lease)
    try:
        yield url, seen
    finally:
        close_process(second)


def _pending_when_free(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    """The thread's pending call once no run holds it (a dead holder's lease runs out)."""
    shown: dict[str, Any] = {}

    def check() -> bool:
        shown.update(client.get(f"/api/threads/{thread_id}").json())
        return shown.get("pending") is not None

    _until(check, f"thread {thread_id} shows its call")
    return shown


def test_calls_of_a_killed_server_are_shown_and_settled_on_every_protocol(
    crashed: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    from a2a.types import a2a_pb2

    url, seen = crashed
    assert sorted(_log(tmp_path)) == ["start A", "start G", "start J"]
    with httpx.Client(base_url=url, timeout=60) as client:
        # JSON API: GET and the list show the call, waiting, with an id of its own.
        thread = _pending_when_free(client, "j1")
        pending = thread["pending"]
        assert pending["outcome_unknown"] is True and pending["tool"] == "publish"
        assert pending["interrupt_id"].startswith("interrupt-")
        assert pending["tool_call_id"] == seen["json_call"]
        rows = {r["thread_id"]: r for r in client.get("/api/threads").json()["threads"]}
        assert (rows["j1"]["state"], rows["j1"]["pending"]) == ("waiting", True)
        waiting = client.get("/api/threads", params={"state": "waiting"}).json()["threads"]
        assert "j1" in {r["thread_id"] for r in waiting}
        # The approval given before the crash, replayed, does not run the call again: it is
        # answered with the call's new interrupt, to settle it by.
        replayed = client.post(
            "/api/threads/j1/resume",
            json={"decisions": {seen["json_call"]: "approve"}},
            headers=JSON,
        )
        assert replayed.status_code == 200, replayed.text
        assert replayed.json()["status"] == "interrupted"
        assert replayed.json()["pending"]["interrupt_id"] == pending["interrupt_id"]
        settled = client.post(
            "/api/threads/j1/resume",
            json={"decisions": {pending["interrupt_id"]: {"reject": "it may have run"}}},
            headers=JSON,
        ).json()
        assert settled["status"] == "completed", settled
        after = client.get("/api/threads/j1").json()
        assert after["pending"] is None
        assert [m["role"] for m in after["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert "it may have run" in after["messages"][2]["content"]

        # The list alone (no GET of the thread) shows the AG-UI thread waiting.
        def listed_waiting() -> bool:
            rows = client.get("/api/threads", params={"state": "waiting"}).json()["threads"]
            return "g1" in {r["thread_id"] for r in rows}

        _until(listed_waiting, "the list shows g1 waiting")
        # AG-UI: a client catching up (no new message) is shown the interrupt.
        events = _agui(client, _agui_body("g1", seen["agui_messages"]))
        assert [e["type"] for e in events] == [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED",
        ]
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        assert interrupt["metadata"]["outcomeUnknown"] is True
        assert interrupt["id"].startswith("interrupt-")
        entry = {"interruptId": interrupt["id"], "status": "resolved"}
        done = _agui(
            client, _agui_body("g1", [], resume=[{**entry, "payload": {"approved": True}}])
        )
        assert done[-1]["type"] == "RUN_FINISHED" and "outcome" not in done[-1]
        assert client.get("/api/threads/g1").json()["messages"][-1]["content"] == (
            "after: published G"
        )

    # A2A: the task the dead server was working on asks for input again.
    task = asyncio.run(_a2a_get(url, seen["a2a_task"]))
    with httpx.Client(base_url=url, timeout=60) as client:
        _pending_when_free(client, task.context_id)
    task = asyncio.run(_a2a_get(url, seen["a2a_task"]))
    approval = _approval(task)
    assert approval["outcomeUnknown"] is True
    assert approval["interruptId"].startswith("interrupt-")
    decision = {
        "decision": "reject",
        "toolCallId": approval["toolCallId"],
        "interruptId": approval["interruptId"],
    }
    message = _a2a_message(data=decision, task_id=task.id, context_id=task.context_id)
    finished = asyncio.run(a2a_send(url, message))
    assert finished.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED, finished.status

    # No call finished twice; the one approved again ran once more, on that decision.
    log = _log(tmp_path)
    assert sorted(log) == ["done G", "start A", "start G", "start G", "start J"], log
