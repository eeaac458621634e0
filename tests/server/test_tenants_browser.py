"""The console of each tenant in real Chromium: its own 30 threads, nothing of the others.

One server (``create_app(tokens=...)``, a directory store) holds 3 tenants x 30 threads,
made over the JSON API; 10 thread ids are used by every tenant (each its own thread).
Each tenant's console, signed in with its token, pages through exactly its 30 threads;
another tenant's thread id opens as the empty new thread an unused id opens as, and a
message sent there lands in the caller's own thread, leaving the other's untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    from console_support import TOKEN_KEY, ServerThread, new_page, require_browser
    from server_support import make_agent
except ImportError:  # tests/server is a package
    from .console_support import (  # type: ignore[no-redef,import-not-found]
        TOKEN_KEY,
        ServerThread,
        new_page,
        require_browser,
    )
    from .server_support import make_agent  # type: ignore[no-redef,import-not-found]

pytestmark = pytest.mark.browser
require_browser()

import httpx  # noqa: E402
from playwright.sync_api import Browser, Page, expect  # noqa: E402

TOKENS = {"console-alpha-K2": "alpha", "console-beta-J7": "beta", "console-gamma-Q4": "gamma"}
TOKEN_OF = {tenant: token for token, tenant in TOKENS.items()}
TENANTS = sorted(TOKEN_OF)
SHARED = [f"shared-{i}" for i in range(10)]


def own_ids(tenant: str) -> list[str]:
    """The 30 thread ids of ``tenant``."""
    return SHARED + [f"{tenant}-{i:02d}" for i in range(20)]


def _api(server: str, tenant: str, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN_OF[tenant]}", "Accept": "application/json"}
    response = httpx.request(method, server + path, json=body, headers=headers, timeout=60)
    response.raise_for_status()
    return response.json() if response.content else None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tenants' server, each tenant's 30 threads made."""
    from framework_agents.server import create_app

    store: Path = tmp_path_factory.mktemp("tenants-console")
    thread = ServerThread(create_app(make_agent, store=str(store), tokens=TOKENS))
    url = thread.start()
    try:
        for tenant in TENANTS:
            for thread_id in own_ids(tenant):
                prompt = f"{tenant} note of {thread_id}"
                _api(url, tenant, "POST", f"api/threads/{thread_id}/runs", {"prompt": prompt})
        yield url
    finally:
        thread.stop()


def _page_of(browser: Browser, tenant: str) -> tuple[Page, list[str]]:
    page, errors = new_page(browser, signed_in=False)
    page.context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, {TOKEN_OF[tenant]!r})")
    return page, errors


def _listed(page: Page) -> list[tuple[str, str]]:
    """The (thread id, row text) pairs of the list's current page."""
    rows = page.locator("#thread-list a")
    return [
        (str(rows.nth(i).get_attribute("data-thread-id")), rows.nth(i).inner_text())
        for i in range(rows.count())
    ]


# One tenant's console in make test, the other two in make stress (a browser page each).
@pytest.mark.parametrize(
    "tenant", [TENANTS[0], *(pytest.param(t, marks=pytest.mark.slow) for t in TENANTS[1:])]
)
def test_each_tenants_console_lists_exactly_its_own_threads(
    browser: Browser, server: str, tenant: str
) -> None:
    page, errors = _page_of(browser, tenant)
    try:
        page.goto(server)
        rows = page.locator("#thread-list a")
        expect(rows).to_have_count(20)  # a page of the console
        seen = _listed(page)
        page.get_by_role("button", name="Next").click()
        expect(page.locator("#page-info")).to_have_text("Page 2")
        expect(rows).to_have_count(10)
        expect(page.get_by_role("button", name="Next")).to_be_disabled()
        seen += _listed(page)
        assert sorted(thread_id for thread_id, _text in seen) == sorted(own_ids(tenant))
        for thread_id, text in seen:  # every title is the tenant's own prompt
            assert f"{tenant} note of {thread_id}" in text
            assert not [o for o in TENANTS if o != tenant and o in text], text
        # A search runs in the tenant's own index: another tenant's words find nothing.
        for other in TENANTS:
            if other != tenant:
                page.get_by_label("Search threads").fill(f"{other} note")
                page.keyboard.press("Enter")
                expect(page.locator("#threads-status")).to_contain_text(f'matching "{other} note"')
                expect(rows).to_have_count(0)
    finally:
        page.context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def test_a_foreign_thread_id_opens_as_an_unused_id_and_a_message_stays_home(
    browser: Browser, server: str
) -> None:
    before = _api(server, "beta", "GET", "api/threads/beta-04")["messages"]
    page, errors = _page_of(browser, "alpha")
    try:
        views = {}
        for thread_id in ("beta-04", "never-04"):
            page.goto(f"{server}#/t/{thread_id}")
            expect(page.locator("#thread-title")).to_have_text(f"Thread {thread_id}")
            expect(page.locator("#conversation li[data-role]")).to_have_count(0)
            views[thread_id] = page.locator("#main").inner_text().replace(thread_id, "<id>")
        assert views["beta-04"] == views["never-04"]
        assert "beta note" not in views["beta-04"]
        page.goto(f"{server}#/t/beta-04")
        expect(page.locator("#thread-title")).to_have_text("Thread beta-04")
        page.get_by_role("textbox", name="Message", exact=True).fill(
            "alpha writes from the console"
        )
        page.get_by_role("button", name="Send").click()
        answers = page.locator("#conversation li[data-role=assistant]")
        expect(answers.last).to_contain_text("echo: alpha writes from the console")
    finally:
        page.context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"
    mine = _api(server, "alpha", "GET", "api/threads/beta-04")["messages"]
    assert [m["content"] for m in mine] == [
        "alpha writes from the console",
        "echo: alpha writes from the console",
    ]
    assert _api(server, "beta", "GET", "api/threads/beta-04")["messages"] == before
