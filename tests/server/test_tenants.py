"""Tenants kept apart: 3 tenants x 30 threads through the JSON API, AG-UI, A2A, MCP and memories.

One real server (uvicorn, a directory store, ``create_app(tokens=...)``) serves three
tenants. Each tenant has 30 threads: 10 whose ids every tenant uses (``shared-N``: each
tenant has its own thread under that id) and 20 of its own (``<tenant>-NN``). Every
prompt a tenant sends starts with the tenant's name, so one invariant says there was no
cross-tenant read or write: every user message of every thread a tenant can read names
that tenant and no other. Another tenant's id is 404 with the body of an id nobody used (the id
itself aside), over every route that takes one.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from a2a.client import Client as A2AClient
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_text_parts, new_text_part
from a2a.types import a2a_pb2
from a2a.utils.errors import TaskNotFoundError
from mcp.client.streamable_http import streamable_http_client
from server_support import Served, make_agent, start_server

from framework_agents import Agent, FunctionModel, Message, ToolCall, tool
from framework_agents.bank import MemoryBank
from framework_agents.errors import InvalidArgumentError
from framework_agents.server import create_app
from mcp import Client

TOKENS = {"tok-alpha-7f3a": "alpha", "tok-beta-91c2": "beta", "tok-gamma-05be": "gamma"}
TOKEN_OF = {tenant: token for token, tenant in TOKENS.items()}
TENANTS = sorted(TOKEN_OF)
SHARED = [f"shared-{i}" for i in range(10)]
JSON = {"Accept": "application/json"}


def own_ids(tenant: str) -> list[str]:
    """The 30 thread ids of ``tenant``."""
    return SHARED + [f"{tenant}-{i:02d}" for i in range(20)]


def foreign_ids(tenant: str) -> list[str]:
    """The ids only other tenants have."""
    return [f"{other}-{i:02d}" for other in TENANTS if other != tenant for i in range(20)]


def auth(tenant: str) -> dict[str, str]:
    """The header ``tenant`` sends."""
    return {"Authorization": f"Bearer {TOKEN_OF[tenant]}"}


def api(served: Served, tenant: str) -> httpx.Client:
    """A JSON API client of ``tenant``."""
    return httpx.Client(base_url=served.url, headers=auth(tenant), timeout=60)


def same_body(response: httpx.Response, thread_id: str) -> str:
    """The response's status and body with ``thread_id`` written as ``<id>``."""
    return f"{response.status_code} {response.text.replace(thread_id, '<id>')}"


@pytest.fixture(scope="module")
def bank() -> MemoryBank:
    """The memory bank the server serves (in this process)."""
    return MemoryBank()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, bank: MemoryBank) -> Iterator[Served]:
    """Three tenants on one server, each with its 30 threads made over the JSON API."""
    store = tmp_path_factory.mktemp("tenants") / "store"
    app = create_app(make_agent, store=str(store), tokens=TOKENS, bank=bank, mcp=True)
    running = start_server(app)
    try:
        for tenant in TENANTS:
            with api(running, tenant) as client:
                for thread_id in own_ids(tenant):
                    prompt = f"{tenant} secret of {thread_id}"
                    answer = client.post(
                        f"/api/threads/{thread_id}/runs", json={"prompt": prompt}, headers=JSON
                    )
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["text"] == f"echo: {prompt}"
        yield running
    finally:
        running.stop()


def read(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    """``GET /api/threads/{id}`` (200 expected)."""
    answer = client.get(f"/api/threads/{thread_id}")
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def assert_only_own(served: Served, tenant: str) -> None:
    """Every thread ``tenant`` lists and reads holds only what ``tenant`` sent."""
    with api(served, tenant) as client:
        listed = list_all(client)
        assert set(own_ids(tenant)) <= set(listed)
        for thread_id in listed:
            thread = read(client, thread_id)
            assert thread["thread_id"] == thread_id
            users = [m for m in thread["messages"] if m["role"] == "user"]
            assert users, thread_id
            for message in users:
                text = str(message["content"])
                assert tenant in text, (tenant, message)
                assert not [o for o in TENANTS if o != tenant and o in text], (tenant, text)


def list_all(client: httpx.Client, **params: str) -> list[str]:
    """Every thread id of the paged index (7 a page), following ``next_cursor``."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        query = {"limit": "7", **params, **({"cursor": cursor} if cursor else {})}
        answer = client.get("/api/threads", params=query)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        ids += [line["thread_id"] for line in page["threads"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


# -- the JSON API -----------------------------------------------------------------------


def test_each_tenant_lists_exactly_its_own_thirty_threads(served: Served) -> None:
    for tenant in TENANTS:
        with api(served, tenant) as client:
            listed = list_all(client)
            assert sorted(listed) == sorted(set(listed))  # each once
            assert set(listed) >= set(own_ids(tenant))
            assert not set(listed) & set(foreign_ids(tenant))
            # The filters run inside the tenant's own index too.
            searched = list_all(client, q="secret")
            assert set(searched) >= set(own_ids(tenant))
            assert not set(searched) & set(foreign_ids(tenant))
            for other in TENANTS:
                if other != tenant:  # every title of another tenant names it
                    assert list_all(client, q=f"{other} secret") == []
            finished = list_all(client, state="finished")
            assert not set(finished) & set(foreign_ids(tenant))
            assert list_all(client, state="waiting") == []


def test_a_cursor_of_one_tenant_pages_only_the_other_tenants_threads(served: Served) -> None:
    with api(served, "alpha") as alpha:
        page = alpha.get("/api/threads", params={"limit": "3"}).json()
        cursor = page["next_cursor"]
        assert cursor is not None and {t["thread_id"] for t in page["threads"]} <= set(
            own_ids("alpha")
        )
    with api(served, "beta") as beta:
        answer = beta.get("/api/threads", params={"limit": "500", "cursor": cursor})
        assert answer.status_code == 200, answer.text
        ids = {t["thread_id"] for t in answer.json()["threads"]}
        assert not ids & set(foreign_ids("beta"))
        assert all(t["title"].startswith("beta ") for t in answer.json()["threads"])


def test_every_thread_a_tenant_reads_holds_only_its_own_messages(served: Served) -> None:
    for tenant in TENANTS:
        assert_only_own(served, tenant)
        with api(served, tenant) as client:
            for thread_id in SHARED:  # one id, three threads: each tenant its own
                thread = read(client, thread_id)
                assert thread["messages"][0]["content"] == f"{tenant} secret of {thread_id}"


def test_another_tenants_id_is_404_with_the_body_of_an_unknown_id(served: Served) -> None:
    with api(served, "alpha") as alpha:
        for number, foreign in enumerate(foreign_ids("alpha")):
            unknown = f"never-{number:02d}"
            calls = [
                ("GET", "/api/threads/{}", None),
                ("DELETE", "/api/threads/{}", None),
                ("POST", "/api/threads/{}/resume", {"decisions": {"publish": "approve"}}),
                ("PATCH", "/api/threads/{}/messages/m1", {"content": "x"}),
                ("POST", "/api/threads/{}/branches", {"message_id": "m1"}),
            ]
            for method, path, body in calls:
                seen = alpha.request(method, path.format(foreign), json=body)
                expected = alpha.request(method, path.format(unknown), json=body)
                assert seen.status_code == 404, (method, path, seen.text)
                assert same_body(seen, foreign) == same_body(expected, unknown)
    for tenant in ("beta", "gamma"):  # their threads are as they were
        with api(served, tenant) as client:
            for thread_id in own_ids(tenant)[10:]:
                thread = read(client, thread_id)
                assert len(thread["messages"]) >= 2
                assert thread["messages"][0]["content"] == f"{tenant} secret of {thread_id}"


def test_a_run_on_another_tenants_id_makes_the_callers_own_thread(served: Served) -> None:
    with api(served, "gamma") as gamma:
        before = read(gamma, "gamma-19")
    with api(served, "alpha") as alpha:
        answer = alpha.post(
            "/api/threads/gamma-19/runs", json={"prompt": "alpha writes here"}, headers=JSON
        )
        assert answer.status_code == 200, answer.text
        mine = read(alpha, "gamma-19")
        assert [m["content"] for m in mine["messages"]] == [
            "alpha writes here",
            "echo: alpha writes here",
        ]
        assert alpha.delete("/api/threads/gamma-19").status_code == 204
        assert alpha.get("/api/threads/gamma-19").status_code == 404
    with api(served, "gamma") as gamma:
        assert read(gamma, "gamma-19")["messages"] == before["messages"]


def test_approvals_stay_with_their_tenant(served: Served) -> None:
    """An approval waits in beta's thread; alpha's resume of that id finds nothing."""
    with api(served, "beta") as beta:
        waiting = beta.post(
            "/api/threads/beta-approval/runs", json={"prompt": "publish beta-post"}, headers=JSON
        ).json()
        assert waiting["status"] == "interrupted"
        assert list_all(beta, state="waiting") == ["beta-approval"]
    with api(served, "alpha") as alpha:
        assert list_all(alpha, state="waiting") == []
        refused = alpha.post(
            "/api/threads/beta-approval/resume",
            json={"decisions": {"publish": "approve"}},
            headers=JSON,
        )
        assert refused.status_code == 404
        assert refused.json()["error"]["code"] == "CHECKPOINT_MISSING"
    with api(served, "beta") as beta:
        assert read(beta, "beta-approval")["pending"]["tool"] == "publish"
        done = beta.post(
            "/api/threads/beta-approval/resume",
            json={"decisions": {"publish": {"reject": "beta says no"}}},
            headers=JSON,
        )
        assert done.status_code == 200, done.text


def test_an_unknown_or_missing_token_is_401_and_names_no_tenant(served: Served) -> None:
    for headers in ({}, {"Authorization": "Bearer tok-alpha-7f3"}, {"Authorization": "tok"}):
        answer = httpx.get(f"{served.url}/api/threads", headers=headers)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "UNAUTHORIZED"
        for tenant in TENANTS:
            assert tenant not in answer.text
    # The open routes need no token and reach no tenant's data.
    assert httpx.get(f"{served.url}/healthz").status_code == 200
    assert httpx.get(f"{served.url}/readyz").status_code == 200


# -- AG-UI ------------------------------------------------------------------------------


def agui_run(client: httpx.Client, thread_id: str, text: str) -> list[dict[str, Any]]:
    """One AG-UI run of ``text`` on ``thread_id``: its events."""
    body = {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    answer = client.post("/agui", json=body)
    assert answer.status_code == 200, answer.text
    return [json.loads(b[6:]) for b in answer.text.split("\n\n") if b.startswith("data: ")]


# 90 AG-UI runs (seconds): make stress; the foreign-id AG-UI run below stays in make test
@pytest.mark.slow
def test_agui_turns_on_all_ninety_threads_stay_with_their_tenant(served: Served) -> None:
    for tenant in TENANTS:
        with api(served, tenant) as client:
            for thread_id in own_ids(tenant):
                events = agui_run(client, thread_id, f"{tenant} over agui")
                assert events[0]["type"] == "RUN_STARTED"
                assert events[0]["threadId"] == thread_id
                (snapshot,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
                users = [m["content"] for m in snapshot["messages"] if m["role"] == "user"]
                assert users[0] == f"{tenant} secret of {thread_id}"
                assert all(text.startswith(f"{tenant} ") for text in users)
    for tenant in TENANTS:
        assert_only_own(served, tenant)


def test_an_agui_run_on_a_foreign_thread_id_acts_in_the_callers_namespace(
    served: Served,
) -> None:
    with api(served, "beta") as beta:
        before = read(beta, "beta-07")["messages"]
    with api(served, "gamma") as gamma:
        events = agui_run(gamma, "beta-07", "gamma over agui on a foreign id")
        (snapshot,) = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
        assert [m["content"] for m in snapshot["messages"]] == [
            "gamma over agui on a foreign id",
            "echo: gamma over agui on a foreign id",
        ]
    with api(served, "beta") as beta:
        assert read(beta, "beta-07")["messages"] == before


# -- A2A (the official a2a-sdk client) ---------------------------------------------------


async def a2a_client(
    served: Served, tenant: str, *, streaming: bool = False
) -> tuple[A2AClient, httpx.AsyncClient]:
    """The SDK's client for ``tenant`` (blocking calls), and its HTTP client to close."""
    http = httpx.AsyncClient(headers=auth(tenant), timeout=60)
    config = ClientConfig(streaming=streaming, httpx_client=http)
    return await create_client(served.url, client_config=config), http


async def a2a_send(client: A2AClient, text: str, context_id: str) -> a2a_pb2.Task:
    """Send ``text`` in ``context_id``; the task as the answer holds it."""
    message = a2a_pb2.Message(
        message_id=str(uuid.uuid4()),
        role=a2a_pb2.Role.ROLE_USER,
        parts=[new_text_part(text)],
        context_id=context_id,
    )
    task: a2a_pb2.Task | None = None
    async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
        if response.HasField("task"):
            task = response.task
    assert task is not None
    return task


# 90 A2A sends and the paged lists (seconds): make stress; the foreign-task message and
# the REST binding's lookups below stay in make test
@pytest.mark.slow
def test_a2a_tasks_list_get_and_cancel_only_the_callers_own(served: Served) -> None:
    async def scenario() -> None:
        tasks: dict[str, list[a2a_pb2.Task]] = {}
        clients: dict[str, tuple[A2AClient, httpx.AsyncClient]] = {}
        try:
            for tenant in TENANTS:
                clients[tenant] = await a2a_client(served, tenant)
                client = clients[tenant][0]
                tasks[tenant] = [
                    await a2a_send(client, f"{tenant} over a2a", thread_id)
                    for thread_id in own_ids(tenant)
                ]
                for task in tasks[tenant]:
                    assert task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
                    assert get_text_parts(list(task.status.message.parts)) == [
                        f"echo: {tenant} over a2a"
                    ]
            for tenant in TENANTS:
                client = clients[tenant][0]
                listed: list[a2a_pb2.Task] = []
                token = ""
                while True:  # ListTasks, paged
                    page = await client.list_tasks(
                        a2a_pb2.ListTasksRequest(page_size=8, page_token=token)
                    )
                    listed += page.tasks
                    token = page.next_page_token
                    if not token:
                        break
                assert {t.id for t in listed} == {t.id for t in tasks[tenant]}
                assert page.total_size == 30
                assert {t.context_id for t in listed} == set(own_ids(tenant))
                by_context = await client.list_tasks(a2a_pb2.ListTasksRequest(context_id=SHARED[0]))
                assert [t.id for t in by_context.tasks] == [tasks[tenant][0].id]
                for other in TENANTS:
                    if other == tenant:
                        continue
                    for task in tasks[other][::7]:  # GetTask, CancelTask: not found
                        for call in (
                            client.get_task(a2a_pb2.GetTaskRequest(id=task.id)),
                            client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id)),
                        ):
                            with pytest.raises(TaskNotFoundError) as foreign:
                                await call
                            unknown_id = str(uuid.uuid4())
                            with pytest.raises(TaskNotFoundError) as unknown:
                                await client.get_task(a2a_pb2.GetTaskRequest(id=unknown_id))
                            assert str(foreign.value) == str(unknown.value)
                    owner = clients[other][0]  # the owner still reads its task
                    kept = await owner.get_task(a2a_pb2.GetTaskRequest(id=tasks[other][3].id))
                    assert kept.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        finally:
            for client, http in clients.values():
                await client.close()
                await http.aclose()

    asyncio.run(scenario())
    for tenant in TENANTS:
        assert_only_own(served, tenant)


def test_an_a2a_message_naming_a_foreign_task_finds_nothing(served: Served) -> None:
    async def scenario() -> None:
        alpha, alpha_http = await a2a_client(served, "alpha")
        beta, beta_http = await a2a_client(served, "beta")
        try:
            task = await a2a_send(alpha, "alpha task", "alpha-a2a-only")
            message = a2a_pb2.Message(
                message_id=str(uuid.uuid4()),
                role=a2a_pb2.Role.ROLE_USER,
                parts=[new_text_part("beta tries alpha's task")],
                task_id=task.id,
            )
            with pytest.raises(TaskNotFoundError):
                async for _ in beta.send_message(a2a_pb2.SendMessageRequest(message=message)):
                    pass
            assert (
                await beta.list_tasks(a2a_pb2.ListTasksRequest(context_id=task.context_id))
            ).tasks == []
            again = await alpha.get_task(a2a_pb2.GetTaskRequest(id=task.id))
            assert again.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED
        finally:
            for client, http in ((alpha, alpha_http), (beta, beta_http)):
                await client.close()
                await http.aclose()

    asyncio.run(scenario())
    with api(served, "beta") as beta_api:
        assert beta_api.get("/api/threads/alpha-a2a-only").status_code == 404


# -- MCP and the memory bank -----------------------------------------------------------


async def mcp_call(served: Served, tenant: str, tool: str, **args: Any) -> str:
    """Call ``tool`` on ``/mcp`` as ``tenant``; its text."""
    async with httpx2.AsyncClient(headers=auth(tenant)) as http:
        transport = streamable_http_client(f"{served.url}/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            result = await client.call_tool(tool, args)
            (block,) = result.content
            assert isinstance(block, types.TextContent)
            return block.text


def test_mcp_ask_and_memory_tools_reach_only_the_callers_own(
    served: Served, bank: MemoryBank
) -> None:
    async def scenario() -> dict[str, str]:
        ids: dict[str, str] = {}
        for tenant in TENANTS:
            answer = await mcp_call(
                served, tenant, "ask", thread_id="shared-3", text=f"{tenant} mcp"
            )
            assert answer == f"echo: {tenant} mcp"
            said = await mcp_call(
                served, tenant, "memory_remember", text=f"{tenant} lives in {tenant}ville"
            )
            ids[tenant] = said.removeprefix("Remembered as ").removesuffix(".")
        for tenant in TENANTS:
            found = await mcp_call(served, tenant, "memory_search", query="lives in")
            assert f"{tenant}ville" in found
            for other in TENANTS:
                if other != tenant:
                    assert f"{other}ville" not in found
                    refused = await mcp_call(served, tenant, "memory_forget", record_id=ids[other])
                    assert refused == f"No record {ids[other]}."
                    # decide on another tenant's thread: as on an id nobody used.
                    foreign, unknown = f"{other}-01", "never-used"
                    seen = await mcp_call(
                        served,
                        tenant,
                        "decide",
                        thread_id=foreign,
                        interrupt_id="i",
                        decision="approve",
                    )
                    never = await mcp_call(
                        served,
                        tenant,
                        "decide",
                        thread_id=unknown,
                        interrupt_id="i",
                        decision="approve",
                    )
                    assert seen.startswith("[CHECKPOINT_MISSING]")
                    assert seen.replace(foreign, "<id>") == never.replace(unknown, "<id>")
        return ids

    ids = asyncio.run(scenario())
    for tenant, record_id in ids.items():  # nothing forgotten across tenants

        async def namespace_of(record_id: str = record_id) -> tuple[str, ...] | None:
            record = await bank.get(record_id)
            return None if record is None else record.namespace

        assert asyncio.run(namespace_of()) == (f"tenant:{tenant}", "mcp")
    for tenant in TENANTS:
        assert_only_own(served, tenant)


def test_memory_routes_show_only_the_callers_records(served: Served, bank: MemoryBank) -> None:
    async def remember() -> dict[str, str]:
        made = {}
        for tenant in TENANTS:
            record = await bank.remember(
                f"{tenant} prefers tea", namespace=(f"tenant:{tenant}", "prefs", "drinks")
            )
            made[tenant] = record.id
        return made

    ids = asyncio.run(remember())
    for tenant in TENANTS:
        with api(served, tenant) as client:
            listed = client.get("/api/memories", params={"namespace": "prefs"}).json()
            assert [r["id"] for r in listed["records"]] == [ids[tenant]]
            assert listed["records"][0]["namespace"] == ["prefs", "drinks"]
            hits = client.get("/api/memories", params={"namespace": "prefs", "q": "tea"}).json()
            assert [h["record"]["id"] for h in hits["hits"]] == [ids[tenant]]
            mine = client.get(f"/api/memories/{ids[tenant]}")
            assert mine.status_code == 200 and mine.json()["namespace"] == ["prefs", "drinks"]
            unknown = "mem-" + uuid.uuid4().hex
            for other in TENANTS:
                if other == tenant:
                    continue
                foreign = ids[other]
                for method in ("GET", "DELETE"):
                    seen = client.request(method, f"/api/memories/{foreign}")
                    expected = client.request(method, f"/api/memories/{unknown}")
                    assert seen.status_code == 404
                    assert same_body(seen, foreign) == same_body(expected, unknown)
                after = client.get("/api/memories", params={"namespace": "prefs", "after": foreign})
                never = client.get("/api/memories", params={"namespace": "prefs", "after": unknown})
                assert after.status_code == never.status_code == 400
                assert same_body(after, foreign) == same_body(never, unknown)
    for tenant, record_id in ids.items():  # still there: no foreign DELETE went through
        assert asyncio.run(bank.get(record_id)) is not None, tenant


# -- create_app's tokens ----------------------------------------------------------------


SECRET = "s3cr3t-Zq8"


@pytest.mark.parametrize(
    ("tokens", "token"),
    [
        ({}, None),
        ({f"{SECRET} x": "alpha"}, None),
        ({SECRET: "bad.tenant"}, None),
        ({SECRET: "con"}, None),
        ({SECRET: ""}, None),
        ({SECRET: 7}, None),
        ({SECRET: "alpha"}, "single"),
        ([SECRET], None),
    ],
    ids=[
        "empty",
        "space-in-token",
        "dot-in-tenant",
        "device-name",
        "empty-tenant",
        "not-a-str",
        "both",
        "list",
    ],
)
def test_bad_tokens_are_invalid_argument_without_the_token(
    tmp_path: Path, tokens: Any, token: str | None
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        create_app(make_agent, store=str(tmp_path), tokens=tokens, token=token)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert SECRET not in str(refused.value)


def test_the_a2a_rest_binding_and_subscribe_find_no_foreign_task(served: Served) -> None:
    async def scenario() -> str:
        alpha, http = await a2a_client(served, "alpha")
        beta, beta_http = await a2a_client(served, "beta", streaming=True)
        try:
            task = await a2a_send(alpha, "alpha rest task", "alpha-rest-only")
            for task_id in (task.id, str(uuid.uuid4())):
                with pytest.raises(TaskNotFoundError):
                    async for _ in beta.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id)):
                        pass
            return task.id
        finally:
            for client, closing in ((alpha, http), (beta, beta_http)):
                await client.close()
                await closing.aclose()

    task_id = asyncio.run(scenario())
    unknown = str(uuid.uuid4())
    headers = {**auth("beta"), "A2A-Version": "1.0"}
    for method, path in (("GET", "/a2a/rest/tasks/{}"), ("POST", "/a2a/rest/tasks/{}:cancel")):
        body: dict[str, Any] | None = {} if method == "POST" else None
        seen = httpx.request(method, served.url + path.format(task_id), json=body, headers=headers)
        never = httpx.request(method, served.url + path.format(unknown), json=body, headers=headers)
        assert seen.status_code == never.status_code == 404
        assert same_body(seen, task_id) == same_body(never, unknown)
    mine = httpx.get(
        f"{served.url}/a2a/rest/tasks/{task_id}", headers={**auth("alpha"), "A2A-Version": "1.0"}
    )
    assert mine.status_code == 200


def test_a_thread_id_too_long_for_the_tenant_prefix_is_thread_id_invalid(served: Served) -> None:
    with api(served, "gamma") as gamma:
        fits = "x" * (128 - len("gamma."))
        ran = gamma.post(f"/api/threads/{fits}/runs", json={"prompt": "gamma long"}, headers=JSON)
        assert ran.status_code == 200, ran.text
        too_long = fits + "y"
        refused = gamma.post(
            f"/api/threads/{too_long}/runs", json={"prompt": "gamma long"}, headers=JSON
        )
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "THREAD_ID_INVALID"
        assert f"at most {128 - len('gamma.')} characters" in error["message"]
        assert "gamma." not in error["message"]  # the stored form is not shown
        assert gamma.delete(f"/api/threads/{fits}").status_code == 204


def test_a_run_in_progress_shows_to_its_tenant_only(tmp_path: Path) -> None:
    """No existence leak through ``THREAD_BUSY`` or the running list."""
    started, release = threading.Event(), threading.Event()

    @tool
    async def hold() -> str:
        """Wait for the test to let go."""
        started.set()
        await asyncio.to_thread(release.wait, 60)
        return "held"

    def answer(messages: list[Message], tools: list[Any]) -> Message:
        last = messages[-1]
        if last.role == "tool":
            return Message(role="assistant", content=f"done: {last.text}")
        if last.text.endswith("hold"):
            return Message(role="assistant", tool_calls=[ToolCall("h1", "hold", {})])
        return Message(role="assistant", content=f"echo: {last.text}")

    def factory() -> Agent:
        return Agent(FunctionModel(answer), tools=[hold])

    running = start_server(
        create_app(factory, store=str(tmp_path / "store"), tokens=TOKENS, console=False)
    )
    results: list[httpx.Response] = []
    try:
        with api(running, "alpha") as alpha, api(running, "beta") as beta:

            def hold_run() -> None:
                with api(running, "alpha") as own:
                    prompt = {"prompt": "alpha hold"}
                    results.append(own.post("/api/threads/busy/runs", json=prompt, headers=JSON))

            holder = threading.Thread(target=hold_run)
            holder.start()
            assert started.wait(60)
            # The running line is written beside the run: wait for it (bounded).
            deadline = time.monotonic() + 30
            while list_all(alpha, state="running") != ["busy"]:
                assert time.monotonic() < deadline, "the run was never listed as running"
                time.sleep(0.02)
            assert (
                alpha.post(
                    "/api/threads/busy/runs", json={"prompt": "alpha again"}, headers=JSON
                ).status_code
                == 409
            )
            assert list_all(beta, state="running") == []
            seen, never = beta.get("/api/threads/busy"), beta.get("/api/threads/idle")
            assert same_body(seen, "busy") == same_body(never, "idle")
            ran = beta.post("/api/threads/busy/runs", json={"prompt": "beta hi"}, headers=JSON)
            assert ran.status_code == 200 and ran.json()["text"] == "echo: beta hi"
            release.set()
            holder.join(60)
            assert results[0].status_code == 200 and results[0].json()["text"] == "done: held"
    finally:
        release.set()
        running.stop()
