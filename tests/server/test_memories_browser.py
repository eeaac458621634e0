"""The console's memory view in real Chromium, against the real server and a real bank.

The page lists a namespace's records, searches them and forgets one after a confirmation;
the bank itself is then asked whether the record is gone. The view is saved as
``docs/console/memories.png`` (``FA_CONSOLE_SCREENSHOTS=1``). As for the other console
pages, ``make test`` drives one page (the whole list, search and forget) and the rest,
marked ``slow`` (a server without a bank, axe), runs in ``make stress``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from console_support import (
    SCREENSHOTS,
    TOKEN,
    ServerThread,
    make_agent,
    new_page,
    require_browser,
)

pytestmark = pytest.mark.browser
require_browser()

from playwright.sync_api import Browser, Page, expect  # noqa: E402

from framework_agents.bank import MemoryBank, MemoryRecord  # noqa: E402
from framework_agents.server import create_app  # noqa: E402

T = TypeVar("T")
SPRING = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _run(work: Coroutine[Any, Any, T]) -> T:
    """Run a bank call to its end on a loop of its own (Playwright's holds this thread)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


async def _fill(bank: MemoryBank) -> dict[str, MemoryRecord]:
    """What a travel assistant learnt about Ada, and one record of another user."""
    day = timedelta(days=1)
    return {
        "seat": await bank.remember(
            "Ada prefers a window seat on long flights",
            namespace=("ada",),
            kind="preference",
            key="seat",
            valid_from=SPRING,
        ),
        "old-city": await bank.remember(
            "Ada lives in Lyon", namespace=("ada",), key="home", valid_from=SPRING + day
        ),
        "city": await bank.remember(
            "Ada moved to Paris in the summer",
            namespace=("ada",),
            key="home",
            valid_from=SPRING + 120 * day,
        ),
        "trip": await bank.remember(
            "Booked a flight to Oslo for the conference in March",
            namespace=("ada", "trips"),
            kind="episode",
            valid_from=SPRING + 2 * day,
        ),
        "tea": await bank.remember(
            "Ada drinks green tea, never coffee", namespace=("ada",), valid_from=SPRING + 3 * day
        ),
        "stranger": await bank.remember("Bob prefers an aisle seat", namespace=("bob",)),
    }


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryBank, Any]]:
    """A directory bank with :func:`_fill`'s records."""
    opened = MemoryBank(tmp_path_factory.mktemp("console-bank"))
    records = _run(_fill(opened))
    yield opened, records
    _run(opened.close())


def _serve(app: Any) -> Iterator[str]:
    thread = ServerThread(app)
    url = thread.start()
    yield url
    thread.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, bank: tuple[MemoryBank, Any]) -> Iterator[str]:
    store = tmp_path_factory.mktemp("console-bank-store")
    yield from _serve(create_app(make_agent, store=str(store), token=TOKEN, bank=bank[0]))


def _records(page: Page) -> Any:
    return page.locator("#memory-list > li")


def _search(page: Page) -> None:
    page.locator("#memory-form").get_by_role("button", name="Search").click()


def test_the_memory_view_lists_searches_and_forgets_after_a_confirmation(
    page: Page, server: str, bank: tuple[MemoryBank, Any]
) -> None:
    opened, records = bank
    page.goto(server)
    link = page.get_by_role("link", name="Memories")
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("#memories-title")).to_be_focused()
    expect(page.locator("#memory-status")).to_contain_text("Enter a namespace")
    # The namespace's records and those under it, in the order they were recorded.
    page.get_by_label("Namespace").fill("ada")
    _search(page)
    expect(page.locator("#memory-status")).to_have_text("5 records in ada")
    assert page.evaluate("location.hash") == "#/memories/ada"
    expect(_records(page).locator(".memory-text")).to_have_text(
        [records[n].text for n in ("seat", "old-city", "city", "trip", "tea")]
    )
    seat = page.locator(f'li[data-record-id="{records["seat"].id}"]')
    expect(seat.locator(".memory-meta")).to_contain_text("preference")
    expect(seat.locator(".memory-meta")).to_contain_text("key seat")
    expect(seat.locator(".memory-meta")).to_contain_text("valid since 2026-03-01 09:00:00 UTC")
    expect(seat.locator(".memory-meta")).to_contain_text("revision 1")
    lyon = page.locator(f'li[data-record-id="{records["old-city"].id}"]')
    expect(lyon.locator(".badge-past")).to_have_text("past")  # superseded by Paris
    expect(lyon.locator(".memory-meta")).to_contain_text("to 2026-06-29 09:00:00 UTC")
    trip = page.locator(f'li[data-record-id="{records["trip"].id}"]')
    expect(trip.locator(".memory-meta")).to_contain_text("in ada/trips")
    # A search ranks by relevance, shows scores, and stays in the namespace (not Bob's seat).
    page.get_by_label("Search memories").fill("window seat")
    _search(page)
    expect(page.locator("#memory-status")).to_have_text('1 record matching "window seat" in ada')
    expect(_records(page).locator(".memory-text")).to_have_text([records["seat"].text])
    expect(seat.locator(".memory-meta")).to_contain_text("score ")
    page.get_by_label("Search memories").fill("")
    _search(page)
    expect(page.locator("#memory-status")).to_have_text("5 records in ada")
    # Forget asks first; Keep it keeps the record.
    tea = page.locator(f'li[data-record-id="{records["tea"].id}"]')
    tea.get_by_role("button", name="Forget").click()
    expect(tea.locator(".forget-confirm")).to_contain_text("for good")
    expect(tea.get_by_role("button", name="Keep it")).to_be_focused()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SCREENSHOTS / "memories.png"))
    tea.get_by_role("button", name="Keep it").click()
    expect(tea.locator(".forget-confirm")).to_be_empty()
    expect(tea.get_by_role("button", name="Forget")).to_be_focused()
    assert _run(opened.get(records["tea"].id)) == records["tea"]
    tea.get_by_role("button", name="Forget").click()
    tea.get_by_role("button", name="Forget for good").click()
    expect(tea).to_have_count(0)
    expect(page.locator("#memory-status")).to_have_text("Forgotten. 4 records in ada")
    expect(page.locator("#memories-title")).to_be_focused()
    assert _run(opened.get(records["tea"].id)) is None
    page.reload()  # the address names the namespace: the view comes back without the record
    expect(page.locator("#memory-status")).to_have_text("4 records in ada")
    expect(page.get_by_label("Namespace")).to_have_value("ada")


@pytest.mark.slow
def test_a_server_without_a_bank_shows_no_memory_view(browser: Browser, tmp_path: Path) -> None:
    app = create_app(make_agent, store=str(tmp_path), token=TOKEN)
    for url in _serve(app):
        page, errors = new_page(browser, signed_in=True)
        page.goto(url)
        expect(page.locator("#threads-status")).to_contain_text("thread")
        expect(page.locator("#memories-link")).to_be_hidden()
        page.goto(url + "#/memories/ada")
        expect(page.locator("#no-bank")).to_contain_text("no memory bank")
        page.context.close()
        assert errors == []


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390], ids=["wide", "narrow"])
def test_axe_finds_no_violations_in_the_memory_view(
    browser: Browser, server: str, width: int
) -> None:
    axe_module = pytest.importorskip(
        "axe_playwright_python.sync_playwright",
        reason="axe-playwright-python (the axe-core engine) is missing: pip install it",
    )
    page, errors = new_page(browser, signed_in=True, width=width)
    page.goto(server + "#/memories/ada")
    expect(page.locator("#memory-status")).to_contain_text("records in ada")
    page.locator("#memory-list li button").first.click()  # the confirmation too
    results = axe_module.Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.context.close()
    assert errors == []
