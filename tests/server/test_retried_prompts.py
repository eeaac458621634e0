"""A prompt sent again under its message id: answered once, decided under the thread's lock.

Seen in the replica test (``test_replicas.py``): a replica died after the prompt was saved
in the thread, before the model answered it; the client sent it again under its id, the
server took the id once and ran nothing, so the prompt was never answered (AG-UI showed
the thread ending in it, A2A failed the task ``INVALID_ARGUMENT``). And a check of the
id made before the thread's lock let two replicas retrying one prompt both append it.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.helpers.proto_helpers import get_text_parts, new_text_part
from a2a.types import a2a_pb2
from server_support import Served, a2a_send, answer, make_agent, rewrite_thread
from test_agui import agui, kinds, run_input

from async_helper import arun
from framework_agents import Agent, FunctionModel, InMemoryCheckpointer, InMemoryStorage, Message
from framework_agents.checkpoint.model import ThreadCheckpoint
from framework_agents.server._runner import RunHandle, ThreadRunner
from framework_agents.server._store import ServerStore

State = a2a_pb2.TaskState


def _left_unanswered(store_dir: Path, thread_id: str, message: Message) -> None:
    """The thread as a replica that died after saving ``message``, before the answer, left it."""
    rewrite_thread(
        store_dir,
        thread_id,
        lambda checkpoint: {"messages": [*checkpoint.messages, message], "finished": False},
    )


def _thread(served: Served, thread_id: str) -> list[tuple[str, str]]:
    thread = httpx.get(f"{served.url}/api/threads/{thread_id}").json()
    return [(m["role"], m["content"]) for m in thread["messages"]]


def test_agui_a_prompt_left_unanswered_is_answered_when_sent_again(
    served: Served, store_dir: Path
) -> None:
    hello = {"id": "m-hello", "role": "user", "content": "hello"}
    again = {"id": "m-again", "role": "user", "content": "again"}
    with httpx.Client(base_url=served.url, timeout=30) as client:
        agui(client, run_input("left", [hello]))
        _left_unanswered(store_dir, "left", Message(role="user", content="again", id="m-again"))
        events = agui(client, run_input("left", [hello, again]))
        # the same messages sent again: the prompt the thread ends in is answered, once
        assert "TEXT_MESSAGE_CONTENT" in kinds(events), events
        assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == [
            "echo: again"
        ]
        caught_up = agui(client, run_input("left", [hello, again]))  # and never twice
        assert "TEXT_MESSAGE_CONTENT" not in kinds(caught_up)
    assert _thread(served, "left") == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "again"),
        ("assistant", "echo: again"),
    ]


async def _send(url: str, text: str, context_id: str, message_id: str) -> a2a_pb2.Task:
    message = a2a_pb2.Message(
        message_id=message_id,
        role=a2a_pb2.Role.ROLE_USER,
        parts=[new_text_part(text)],
        context_id=context_id,
    )
    task: a2a_pb2.Task = await a2a_send(url, message)
    return task


def test_a2a_a_prompt_left_unanswered_is_answered_when_sent_again(
    served: Served, store_dir: Path
) -> None:
    context = f"left-{uuid.uuid4().hex[:8]}"
    first = arun(_send(served.url, "hello", context, "a-hello"))
    assert first.status.state == State.TASK_STATE_COMPLETED
    _left_unanswered(store_dir, context, Message(role="user", content="again", id="a-again"))
    again = arun(_send(served.url, "again", context, "a-again"))
    assert again.status.state == State.TASK_STATE_COMPLETED, again.status
    assert get_text_parts(list(again.status.message.parts)) == ["echo: again"]
    once_more = arun(_send(served.url, "again", context, "a-again"))  # answered from the thread
    assert get_text_parts(list(once_more.status.message.parts)) == ["echo: again"]
    assert _thread(served, context) == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("user", "again"),
        ("assistant", "echo: again"),
    ]


class _Held:
    """A model that answers like the test agent's, the first call held until released."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, messages: list[Message], tools: list[Any]) -> Message:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            await self.release.wait()
        return answer(messages, tools)


def _replicas(model: _Held) -> tuple[ThreadRunner, ThreadRunner]:
    """Two runners on one store, as two replicas: each has its own runs, the lock is shared."""
    store = ServerStore(InMemoryCheckpointer(), InMemoryStorage())

    def factory() -> Agent:
        return Agent(FunctionModel(model), tools=make_agent().tools)

    return ThreadRunner(factory, store), ThreadRunner(factory, store)


async def _events(handle: RunHandle) -> list[str]:
    return [type(e).__name__ async for e in handle.events()]


@pytest.mark.parametrize("left", [False, True], ids=["new-prompt", "left-unanswered"])
def test_two_replicas_retrying_one_prompt_answer_it_once(left: bool) -> None:
    model = _Held()
    one, two = _replicas(model)
    prompt = Message(role="user", content="hello", id="m-retried")

    async def scenario() -> tuple[list[str], list[str], RunHandle, list[Message]]:
        if left:  # a replica died after saving the prompt, before the model answered
            await one.checkpointer.save(ThreadCheckpoint("t", None, [prompt], {}))
        first = await one.start_run("t", prompt)
        await model.entered.wait()  # the first run holds the thread, its model answering
        second = await two.start_run("t", prompt)  # waits for the lock, then decides
        model.release.set()
        return await _events(first), await _events(second), second, await _messages(one)

    first, second, handle, messages = arun(scenario())
    assert model.calls == 1
    assert [(m.role, m.id if m.role == "user" else m.text) for m in messages] == [
        ("user", "m-retried"),
        ("assistant", "echo: hello"),
    ]
    assert first[-1] == "RunFinishedEvent"
    assert second == [] and handle.taken  # nothing ran: the message was taken meanwhile


def test_a_prompt_answered_already_is_never_answered_again() -> None:
    model = _Held()
    model.release.set()
    one, two = _replicas(model)
    prompt = Message(role="user", content="hello", id="m-done")

    async def scenario() -> tuple[RunHandle, list[Message]]:
        await (await one.start_run("t", prompt)).wait()
        again = await two.start_run("t", prompt)
        await again.wait()
        return again, await _messages(two)

    again, messages = arun(scenario())
    assert model.calls == 1
    assert [m.role for m in messages] == ["user", "assistant"]
    assert again.taken


async def _messages(runner: ThreadRunner) -> list[Message]:
    checkpoint = await runner.checkpointer.load("t")
    assert checkpoint is not None
    return list(checkpoint.messages)
