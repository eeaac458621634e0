"""A tool's question (an MCP server's elicitation) in the console, in real Chromium.

The test agent's ``reserve_room`` asks how to reserve (``console_support.ROOM``: a field of
every kind). The page shows the question and a form built from the schema, checks the
fields before sending, and answers, declines or cancels over AG-UI; the server's checked
answer reaches the tool. The form is saved as ``docs/console/elicitation.png``
(``FA_CONSOLE_SCREENSHOTS=1``). ``make test`` drives the answer; the refusal, decline and
cancel (marked ``slow``) run in ``make stress``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import SCREENSHOTS, TOKEN, ServerThread, make_agent, require_browser

pytestmark = pytest.mark.browser
require_browser()

import httpx  # noqa: E402
from playwright.sync_api import Page, expect  # noqa: E402

from framework_agents.server import create_app  # noqa: E402

QUESTION = "How should I reserve your room in Lisbon?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The console's server (a token, a directory store) for this module."""
    app = create_app(make_agent, store=str(tmp_path_factory.mktemp("elicit-store")), token=TOKEN)
    thread = ServerThread(app)
    url = thread.start()
    yield url
    thread.stop()


def _thread(server: str, thread_id: str) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    response = httpx.get(f"{server}api/threads/{thread_id}", headers=headers, timeout=30)
    response.raise_for_status()
    return response.json()


def _ask(page: Page, server: str, thread_id: str) -> Any:
    """Open ``thread_id``, ask for a hotel and return the question's form once shown."""
    page.goto(f"{server}#/t/{thread_id}")
    expect(page.locator("#thread-title")).to_have_text(f"Thread {thread_id}")
    page.get_by_role("textbox", name="Message", exact=True).fill("find me a hotel")
    page.get_by_role("button", name="Send").click()
    form = page.locator("#elicitation")
    expect(form).to_be_visible()
    return form


def test_the_question_is_a_form_from_its_schema_checked_then_answered(
    page: Page, server: str
) -> None:
    form = _ask(page, server, "hotel-answer")
    expect(form.get_by_role("heading")).to_have_text("Question from reserve_room")
    expect(form.locator("#elicitation-message")).to_have_text(QUESTION)
    expect(page.locator(".thread-head .badge-wait")).to_have_text("Waiting for an answer")
    expect(page.get_by_role("status")).to_have_text("Waiting for your answer")
    expect(page.get_by_role("textbox", name="Message", exact=True)).to_be_disabled()
    nights = form.get_by_label("Nights (required)")
    expect(nights).to_be_focused()  # the first field, ready to type
    # one control per property, of the kind its schema says
    expect(nights).to_have_attribute("type", "number")
    expect(nights).to_have_attribute("step", "1")
    expect(nights).to_have_attribute("max", "14")
    meal = form.get_by_label("Meal (required)")
    assert meal.evaluate("el => [...el.options].map(o => o.value)") == [
        "",
        "none",
        "breakfast",
        "half board",
    ]
    view = form.get_by_label("View")
    assert view.evaluate("el => [...el.options].map(o => o.text)") == [
        "(none)",
        "Sea view",
        "City view",
    ]
    expect(form.get_by_label("Budget per night")).to_have_attribute("step", "any")
    expect(form.get_by_label("Travelling with a pet")).to_have_attribute("type", "checkbox")
    expect(form.get_by_label("Arrival")).to_have_attribute("type", "date")
    expect(form.get_by_role("group", name="Extras")).to_be_visible()
    expect(form.get_by_label("Note")).to_have_attribute("maxlength", "40")
    expect(form.locator("[data-field=note] .hint")).to_have_text(
        "Anything the hotel should know. At most 40 characters."
    )
    # what the page can check is checked before anything is sent
    form.get_by_role("button", name="Answer").click()
    expect(form.locator("[data-field=nights] .field-error")).to_have_text("Nights is required.")
    expect(form.locator("[data-field=meal] .field-error")).to_have_text("Meal choose one.")
    expect(nights).to_have_attribute("aria-invalid", "true")
    expect(nights).to_be_focused()
    nights.fill("40")
    expect(nights).not_to_have_attribute("aria-invalid", "true")  # corrected: unmarked
    meal.select_option("breakfast")
    expect(form.locator("[data-field=meal] .field-error")).to_be_hidden()
    form.get_by_role("button", name="Answer").click()
    expect(form.locator("[data-field=nights] .field-error")).to_have_text("Nights must be 1 to 14.")
    for extra in ("parking", "late checkout", "crib"):
        form.get_by_label(extra).check()
    form.get_by_role("button", name="Answer").click()
    expect(form.locator("[data-field=extras] .field-error")).to_have_text(
        "Extras pick at most 2 choices."
    )
    assert _thread(server, "hotel-answer")["pending"]["kind"] == "elicitation"  # not sent
    nights.fill("3")
    form.get_by_label("crib").uncheck()
    view.select_option("sea")
    form.get_by_label("Budget per night").fill("99.5")
    form.get_by_label("Travelling with a pet").check()
    form.get_by_label("Arrival").fill("2026-12-24")
    form.get_by_label("Note").fill("late arrival")
    _shot(page, "elicitation")
    form.get_by_role("button", name="Answer").click()
    answer = {
        "arrival": "2026-12-24",
        "budget": 99.5,
        "extras": ["parking", "late checkout"],
        "meal": "breakfast",
        "nights": 3,
        "note": "late arrival",
        "pets": True,
        "view": "sea",
    }
    reserved = f"reserved in Lisbon: {json.dumps(answer, sort_keys=True)}"
    expect(page.locator(".call[data-call-id] .call-result")).to_have_text(reserved)
    expect(page.locator("#elicitation")).to_have_count(0)
    expect(page.get_by_role("status")).to_have_text("Answer complete")
    expect(page.get_by_role("textbox", name="Message", exact=True)).to_be_enabled()
    thread = _thread(server, "hotel-answer")
    assert thread["pending"] is None
    assert thread["messages"][-1]["content"] == f"Done. The booking tool said: {reserved}"


@pytest.mark.slow
def test_a_refused_answer_keeps_the_form_then_decline_and_cancel(page: Page, server: str) -> None:
    form = _ask(page, server, "hotel-refused")
    form.get_by_label("Nights (required)").fill("2")
    form.get_by_label("Meal (required)").select_option("none")
    form.get_by_label("Call me at").fill("tomorrow morning")  # only the server checks this
    form.get_by_role("button", name="Answer").click()
    expect(page.locator("#error-banner .error-code")).to_have_text("HITL_DECISION")
    expect(page.locator("#error-banner .error-message")).to_contain_text("call_at")
    form = page.locator("#elicitation")
    expect(form.get_by_label("Nights (required)")).to_have_value("2")  # what was typed stays
    expect(form.get_by_label("Call me at")).to_have_value("tomorrow morning")
    assert _thread(server, "hotel-refused")["pending"]["kind"] == "elicitation"
    form.get_by_role("button", name="Decline").click()
    result = page.locator(".call[data-call-id] .call-result")
    expect(result).to_have_text("no room reserved (decline)")
    expect(page.locator("#elicitation")).to_have_count(0)

    _ask(page, server, "hotel-cancelled").get_by_role("button", name="Cancel").click()
    expect(result).to_have_text("no room reserved (cancel)")
    assert _thread(server, "hotel-cancelled")["pending"] is None


def _shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path: Path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_axe_finds_no_accessibility_violations_in_the_question(page: Page, server: str) -> None:
    axe_module = pytest.importorskip(
        "axe_playwright_python.sync_playwright",
        reason="axe-playwright-python (the axe-core engine) is missing: pip install it",
    )
    form = _ask(page, server, "hotel-axe")
    form.get_by_role("button", name="Answer").click()  # with its field errors shown
    expect(form.locator("[data-field=nights] .field-error")).to_be_visible()
    results = axe_module.Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


def test_the_threads_list_tells_a_question_from_an_approval(page: Page, server: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    for thread_id, prompt in (("list-asks", "find me a hotel"), ("list-approves", "book a seat")):
        response = httpx.post(
            f"{server}api/threads/{thread_id}/runs", json={"prompt": prompt}, headers=headers
        )
        assert response.json()["status"] == "interrupted"
    listed = httpx.get(f"{server}api/threads", headers=headers, params={"q": "list-"}).json()
    kinds = {t["thread_id"]: t["pending_kind"] for t in listed["threads"]}
    assert kinds == {"list-asks": "elicitation", "list-approves": "tool_call"}
    page.goto(server)
    page.get_by_label("Search threads").fill("list-")
    page.get_by_role("button", name="Search").click()
    asks = page.locator('#thread-list a[data-thread-id="list-asks"] .badge-wait')
    expect(asks).to_have_text("Waiting for an answer")
    approves = page.locator('#thread-list a[data-thread-id="list-approves"] .badge-wait')
    expect(approves).to_have_text("Waiting for approval")
