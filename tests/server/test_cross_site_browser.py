"""The cross-site attacks made by a real Chromium page against a real tokenless server.

* A page of another origin (``http://localhost:<other port>``, served by a second real
  server) posts ``text/plain`` with ``fetch`` and submits forms (``text/plain`` and
  url-encoded) at the JSON API and AG-UI: run the agent, approve a waiting call.
* DNS rebinding: Chromium resolves ``evil.example`` to 127.0.0.1; the attacker's page is
  delivered for ``http://evil.example:<server port>/`` (what its own DNS answered first),
  and its same-origin ``fetch`` calls then reach our server, with any header, ``Host:
  evil.example:<port>``: list threads, send an A2A message, approve over the JSON API.

Each request's status is read from the network (the page itself sees opaque answers);
what counts is that nothing ran: no thread made, the approval still waiting, no tool run.
The console, served by the same tokenless server, still works.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import PUBLISHED, Served, make_agent, start_server

try:
    from console_support import CHROMIUM, CHROMIUM_ARGS, require_browser
except ImportError:  # tests/server is a package
    from .console_support import (  # type: ignore[no-redef,import-not-found]
        CHROMIUM,
        CHROMIUM_ARGS,
        require_browser,
    )

pytestmark = pytest.mark.browser
require_browser()

import httpx  # noqa: E402
from playwright.sync_api import Browser, Page, Request, expect, sync_playwright  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import HTMLResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from framework_agents.server import create_app  # noqa: E402

#: The attacker's script: every request a page of another site can send without a preflight.
ATTACK_JS = """
async ({target, interruptId}) => {
  const simple = (path, body) => fetch(target + path, {
    method: "POST", mode: "no-cors", body: JSON.stringify(body),
    headers: {"Content-Type": "text/plain", "Accept": "application/json"},
  }).catch((e) => String(e));
  const aguiRun = (threadId, messages, resume) => ({
    threadId, runId: "r-" + threadId, messages, state: {}, tools: [], context: [],
    forwardedProps: {}, ...(resume ? {resume} : {}),
  });
  await simple("/api/threads/fetch-victim/runs", {prompt: "publish fetch-victim"});
  await simple("/api/threads/waiting/resume", {decisions: {publish: "approve"}});
  await simple("/agui", aguiRun("agui-victim", [{id: "m1", role: "user", content: "publish x"}]));
  await simple("/agui", aguiRun("waiting", [], [
    {interruptId, status: "resolved", payload: {approved: true}},
  ]));
  const post = (path, enctype, name, value) => new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.name = "f" + Math.random();
    frame.onload = resolve;
    document.body.append(frame);
    const form = document.createElement("form");
    Object.assign(form, {method: "POST", action: target + path, enctype, target: frame.name});
    const input = Object.assign(document.createElement("input"), {name, value});
    input.type = "hidden";
    form.append(input);
    document.body.append(form);
    form.submit();
  });
  // text/plain sends `name=value`: a name that opens a JSON string the value closes.
  await post("/api/threads/form-victim/runs", "text/plain",
             '{"prompt": "publish form-victim", "pad": "', '"}');
  await post("/api/threads/waiting/resume", "application/x-www-form-urlencoded",
             "decisions", "approve");
  return "sent";
}
"""

#: The rebound page: same-origin for the browser, so it may send and read anything.
REBIND_JS = """
async () => {
  const call = async (path, init) => {
    const response = await fetch(path, init);
    return [response.status, await response.text()];
  };
  const json = {"Content-Type": "application/json"};
  const message = {messageId: "m-rebind", role: "ROLE_USER", contextId: "rebind-victim",
                   parts: [{text: "publish rebind-victim"}]};
  return {
    threads: await call("/api/threads"),
    a2a: await call("/a2a", {method: "POST", headers: {...json, "A2A-Version": "1.0"},
      body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "SendMessage", params: {message}})}),
    resume: await call("/api/threads/waiting/resume", {method: "POST",
      headers: {...json, Accept: "application/json"},
      body: JSON.stringify({decisions: {publish: "approve"}})}),
  };
}
"""


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Served]:
    """The test agent on a tokenless server (the ``serve`` default on loopback)."""
    running = start_server(create_app(make_agent, store=str(tmp_path / "victim")))
    yield running
    running.stop()


@pytest.fixture
def attacker() -> Iterator[str]:
    """Another site: a real server on another port, reached as ``localhost``."""

    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse("<!doctype html><title>cute cats</title><p>cats</p>")

    running = start_server(Starlette(routes=[Route("/", page)]))
    yield running.url.replace("127.0.0.1", "localhost") + "/"
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium; ``evil.example`` resolves to 127.0.0.1 (the rebound name)."""
    args = [
        *CHROMIUM_ARGS,
        "--host-resolver-rules=MAP evil.example 127.0.0.1",
        "--disable-features=LocalNetworkAccessChecks",
    ]
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context and its page."""
    context = browser.new_context()
    yield context.new_page()
    context.close()


def _waiting(victim: Served) -> dict[str, Any]:
    """Thread ``waiting``: a ``publish`` call that waits for a human, asked for by a client.

    Returns the thread as the API shows it.
    """
    with httpx.Client(base_url=victim.url, timeout=30) as client:
        asked = client.post(
            "/api/threads/waiting/runs",
            json={"prompt": "publish waiting"},
            headers={"Accept": "application/json"},
        )
        assert asked.json()["pending"]["tool"] == "publish"
        thread: dict[str, Any] = client.get("/api/threads/waiting").json()
    return thread


def _nothing_ran(victim: Served, before: dict[str, Any], victims: list[str]) -> None:
    with httpx.Client(base_url=victim.url, timeout=30) as client:
        for thread_id in victims:
            assert client.get(f"/api/threads/{thread_id}").status_code == 404, thread_id
        waiting = client.get("/api/threads/waiting").json()
    assert waiting["pending"] == before["pending"]
    assert waiting["messages"] == before["messages"]
    assert not [p for p in PUBLISHED if p["title"] in ("waiting", *victims)]


def test_a_page_of_another_site_neither_runs_the_agent_nor_approves(
    page: Page, victim: Served, attacker: str
) -> None:
    before = _waiting(victim)
    finished: list[Request] = []
    page.on("requestfinished", lambda request: finished.append(request))
    page.on("requestfailed", lambda request: finished.append(request))
    page.goto(attacker)
    interrupt_id = before["pending"]["interrupt_id"]
    assert page.evaluate(ATTACK_JS, {"target": victim.url, "interruptId": interrupt_id})

    def to_victim() -> list[Request]:
        return [r for r in finished if r.url.startswith(victim.url)]

    while len(to_victim()) < 6:  # each answer read to its end (an SSE run: the run's end)
        page.wait_for_event("requestfinished", timeout=30_000)
    statuses = []
    for request in to_victim():
        response = request.response()
        assert response is not None, request.url
        statuses.append((request.url.removeprefix(victim.url), response.status))
    assert {status for _, status in statuses} == {403}, statuses
    _nothing_ran(victim, before, ["fetch-victim", "agui-victim", "form-victim"])


def test_a_rebound_page_reads_nothing_and_runs_nothing(page: Page, victim: Served) -> None:
    before = _waiting(victim)
    port = victim.url.rsplit(":", 1)[1]
    origin = f"http://evil.example:{port}"
    # What the attacker's DNS answered first: its own server, with its page.
    page.route(
        f"{origin}/",
        lambda route: route.fulfill(content_type="text/html", body="<title>cats</title>"),
    )
    page.goto(f"{origin}/")
    answers = page.evaluate(REBIND_JS)
    for name in ("threads", "a2a", "resume"):
        status, body = answers[name]
        assert status == 400, (name, status, body)
        assert json.loads(body)["error"]["code"] == "HOST_NOT_ALLOWED"
        assert "waiting" not in body
    _nothing_ran(victim, before, ["rebind-victim"])


def test_the_tokenless_console_still_runs_and_approves(page: Page, victim: Served) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(victim.url + "/")
    page.get_by_role("button", name="New thread").click()
    expect(page.locator("#main")).to_contain_text("New thread: send the first message")
    composer = page.get_by_role("textbox", name="Message", exact=True)
    composer.fill("publish from the console")
    page.get_by_role("button", name="Send").click()
    approval = page.locator("#approval")
    expect(approval).to_contain_text("publish")
    approval.get_by_role("button", name="Approve", exact=True).click()
    answers = page.locator("#conversation li[data-role=assistant]")
    expect(answers.last).to_contain_text("done: published 'from the console' x3")
    assert {"title": "from the console", "copies": 3} in PUBLISHED
    assert errors == []
