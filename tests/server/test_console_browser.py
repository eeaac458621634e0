"""The web console in real Chromium, against the real server (Playwright, Debian's Chromium).

Each test drives the page like a person would: the token prompt, a streamed answer, an
approval edited then approved, a rejection with a reason, the threads list, branch, edit and
compare, the server's errors and a connection lost mid-run. Every main view is saved as a
screenshot under ``docs/console/`` (shown by ``docs/console.md``).

A page load in Chromium costs a second or more, so ``make test`` drives one page of each
kind (the token prompt, a streamed answer, an approval, the server's errors, a narrow
window, the page modules) and the other pages, marked ``slow``, run in ``make stress``
(CI runs both). The server calls those pages make are tested without a browser in
tests/server; what only the page does there (the marks, the badges, the keyboard order,
axe) is checked in ``make stress`` only.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

try:
    from console_support import (
        SCREENSHOTS,
        STREAM_GATES,
        TOKEN,
        TOKEN_KEY,
        ServerThread,
        StreamGate,
        make_agent,
        new_page,
        require_browser,
    )
except ImportError:  # tests/server is a package
    from .console_support import (  # type: ignore[no-redef,import-not-found]
        SCREENSHOTS,
        STREAM_GATES,
        TOKEN,
        TOKEN_KEY,
        ServerThread,
        StreamGate,
        make_agent,
        new_page,
        require_browser,
    )

pytestmark = pytest.mark.browser
require_browser()

import httpx  # noqa: E402
from playwright.sync_api import Browser, Page, Route, expect  # noqa: E402


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's directory store (FileCheckpointer layout: threads/<id>/checkpoint.json)."""
    return tmp_path_factory.mktemp("console-store")


@pytest.fixture(scope="module")
def server(store_root: Path) -> Iterator[str]:
    from framework_agents.server import create_app

    app = create_app(make_agent, store=str(store_root), token=TOKEN)
    thread = ServerThread(app)
    url = thread.start()
    yield url
    thread.stop()


def _shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.read_bytes().startswith(b"\x89PNG")


def _api(server: str, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    response = httpx.request(method, server + path, json=body, headers=headers, timeout=60)
    response.raise_for_status()
    return response.json() if response.content else None


def _open_thread(page: Page, server: str, thread_id: str) -> None:
    page.goto(f"{server}#/t/{thread_id}")
    expect(page.locator("#thread-title")).to_have_text(f"Thread {thread_id}")


def _composer(page: Page) -> Any:
    return page.get_by_role("textbox", name="Message", exact=True)


def _send(page: Page, prompt: str) -> None:
    _composer(page).fill(prompt)
    page.get_by_role("button", name="Send").click()


def _assistant(page: Page) -> Any:
    return page.locator("#conversation li[data-role=assistant]")


def test_token_is_asked_once_and_kept_for_the_tab(browser: Browser, server: str) -> None:
    page, errors = new_page(browser, signed_in=False)
    page.goto(server)
    dialog = page.locator("#token-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("needs an access token")
    expect(page.get_by_label("Token", exact=True)).to_be_focused()
    page.get_by_label("Token", exact=True).fill("wrong-token")
    page.get_by_role("button", name="Save token").click()
    expect(dialog).to_contain_text("refused the token")
    _shot(page, "token")
    page.get_by_label("Token", exact=True).fill(TOKEN)
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    # The dialog's close event (which stores the token) is dispatched after it hides.
    page.wait_for_function(f"sessionStorage.getItem({TOKEN_KEY!r}) === {TOKEN!r}")
    expect(page.locator("#threads-status")).to_contain_text("thread")
    page.reload()  # the same tab keeps the token: no second prompt
    expect(page.locator("#threads-status")).to_contain_text("thread")
    expect(dialog).to_be_hidden()
    page.context.close()
    assert errors == []


def test_a_new_thread_streams_the_answer_with_folded_reasoning(page: Page, server: str) -> None:
    page.goto(server)
    page.get_by_role("button", name="New thread").click()
    expect(page.locator("#thread-title")).to_contain_text("Thread thread-")
    expect(page.locator("#main")).to_contain_text("New thread: send the first message")
    gate = StreamGate()
    STREAM_GATES["Hi there, console"] = gate
    _send(page, "Hi there, console")
    # The run is held after three words: the page shows them while the run goes on.
    live = page.locator("#conversation .live-text")
    expect(live).to_have_text("Hello from the ")
    expect(page.locator("#run-status")).to_have_text("Running...")
    expect(_composer(page)).to_be_disabled()
    gate.opened.set()
    answer = "Hello from the scripted agent. You said: Hi there, console"
    expect(_assistant(page).last).to_contain_text(answer)
    expect(_composer(page)).to_be_focused()  # ready for the next prompt
    expect(page.get_by_role("status")).to_have_text("Answer complete")
    # Stored view after the run: user + assistant, reasoning folded, a run on the timeline.
    expect(page.locator("#conversation li[data-role=user] .msg-text")).to_have_text(
        "Hi there, console"
    )
    reasoning = _assistant(page).last.locator("details.reasoning")
    expect(reasoning).not_to_have_attribute("open", "")
    expect(reasoning.locator(".msg-text")).to_be_hidden()
    reasoning.locator("summary").click()
    expect(reasoning.locator(".msg-text")).to_contain_text("friendly echo")
    expect(page.locator("#timeline-panel li[data-kind=run]")).to_have_count(1)
    tree = page.locator("#state-tree")
    expect(tree).to_contain_text('name: "Ada"')
    expect(tree).to_contain_text("vip: false")
    tags = tree.locator("details", has_text="tags:").last
    expect(tags.locator("summary")).to_contain_text("[2 items]")
    expect(tags).to_contain_text('1: "console"')
    tags.locator("summary").click()  # folds with the keyboard-accessible summary
    expect(tags.get_by_text('"console"')).to_be_hidden()
    thread_id = page.locator("#thread-title").inner_text().removeprefix("Thread ")
    expect(page.locator(f'#thread-list a[data-thread-id="{thread_id}"]')).to_be_visible()
    _shot(page, "thread")


def test_an_approval_is_edited_validated_and_approved(page: Page, server: str) -> None:
    _open_thread(page, server, "trip-to-rome")
    _send(page, "Please book a flight")
    approval = page.locator("#approval")
    expect(approval).to_be_visible()
    expect(approval.get_by_role("heading")).to_have_text("Approval needed: book_flight")
    args = page.get_by_label("Arguments (JSON, editable)")
    assert json.loads(args.input_value()) == {"city": "Paris", "seats": 1}
    expect(
        page.locator('#thread-list a[data-thread-id="trip-to-rome"] .badge-wait')
    ).to_be_visible()
    expect(_composer(page)).to_be_disabled()
    expect(page.locator("#approve")).to_be_focused()
    _shot(page, "approval")
    # Invalid JSON is caught in the page, before anything is sent.
    args.fill('{"city": "Rome", "seats": ')
    page.get_by_role("button", name="Approve edited arguments").click()
    expect(approval.locator(".field-error")).to_contain_text("Invalid arguments")
    expect(args).to_have_attribute("aria-invalid", "true")
    expect(args).to_be_focused()
    # While the approval waits, the server refuses an edit of the thread: its code is shown.
    user = page.locator("#conversation li[data-role=user]").first
    user.get_by_role("button", name="Edit").click()
    page.get_by_role("textbox", name="Edit message", exact=True).fill("Please book a train")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#error-banner .error-code")).to_have_text("APPROVAL_PENDING")
    page.get_by_role("button", name="Cancel").click()
    expect(user.locator(".msg-text")).to_have_text("Please book a flight")
    args.fill("[1, 2]")
    page.get_by_role("button", name="Approve edited arguments").click()
    expect(approval.locator(".field-error")).to_contain_text("must be a JSON object")
    args.fill('{"city": "Rome", "seats": 2}')
    page.get_by_role("button", name="Approve edited arguments").click()
    result = page.locator(".call[data-call-id] .call-result")
    expect(result).to_have_text("booked 2 seat(s) to Rome")
    edited = page.locator(".call .call-edited-args")
    expect(edited).to_be_visible()
    assert json.loads(edited.inner_text()) == {"city": "Rome", "seats": 2}
    expect(_assistant(page).last).to_contain_text(
        "Done. The booking tool said: booked 2 seat(s) to Rome"
    )
    expect(approval).to_have_count(0)
    expect(_composer(page)).to_be_enabled()
    expect(page.locator('#thread-list a[data-thread-id="trip-to-rome"] .badge-wait')).to_have_count(
        0
    )
    _shot(page, "tool-result")


@pytest.mark.slow
def test_a_run_of_another_client_shows_in_progress_then_its_answer(page: Page, server: str) -> None:
    _api(server, "POST", "api/threads/other-client/runs", {"prompt": "first words"})
    gate = StreamGate()
    STREAM_GATES["answer me slowly"] = gate
    prompt = {"prompt": "answer me slowly"}
    worker = threading.Thread(
        target=_api, args=(server, "POST", "api/threads/other-client/runs", prompt)
    )
    worker.start()
    assert gate.reached.wait(30), "the other client's run never started"
    page.clock.install()  # the page's timers, on a clock the test can move on
    _open_thread(page, server, "other-client")
    expect(page.locator("#running-badge")).to_have_text("Run in progress")
    expect(_composer(page)).to_be_disabled()
    gate.opened.set()
    worker.join(30)
    # The page looks again by itself while the run lasts (a 1.5 s timer: the clock is moved
    # past it rather than waited for), and shows its end.
    page.clock.fast_forward(1500)
    expect(_assistant(page).last).to_contain_text("You said: answer me slowly")
    expect(page.locator("#running-badge")).to_have_count(0)
    expect(_composer(page)).to_be_enabled()


@pytest.mark.slow
def test_a_rejection_with_a_reason_reaches_the_model(page: Page, server: str) -> None:
    _open_thread(page, server, "trip-rejected")
    _send(page, "book a flight to anywhere")
    expect(page.locator("#approval")).to_be_visible()
    # Keyboard only, in document order: Approve has the focus, then the edited approval,
    # the reason, Reject.
    expect(page.locator("#approve")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Approve edited arguments")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Reason for rejecting")).to_be_focused()
    page.keyboard.type("too expensive")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Reject")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".call .call-result")).to_contain_text("too expensive")
    expect(page.locator('.call .badge[data-kind="rejected"]')).to_be_visible()
    expect(_assistant(page).last).to_contain_text("The booking tool said: Rejected: too expensive")
    expect(page.locator("#approval")).to_have_count(0)


@pytest.mark.slow
def test_the_threads_list_searches_pages_and_marks_waiting_threads(page: Page, server: str) -> None:
    for i in range(21):
        _api(server, "POST", f"api/threads/bulk-{i:02d}/runs", {"prompt": f"hello number {i}"})
    _api(server, "POST", "api/threads/bulk-waiting/runs", {"prompt": "book me a seat"})
    page.goto(server)
    page.get_by_label("Search threads").fill("bulk-")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("#thread-list a")
    expect(rows).to_have_count(20)
    expect(page.locator("#page-info")).to_have_text("Page 1")
    expect(page.get_by_role("button", name="Previous")).to_be_disabled()
    waiting = page.locator('#thread-list a[data-thread-id="bulk-waiting"]')
    expect(waiting.locator(".badge-wait")).to_have_text("Waiting for approval")  # newest first
    expect(page.locator('#thread-list a[data-thread-id="bulk-20"]')).to_contain_text(
        "hello number 20"
    )
    _shot(page, "threads")
    page.get_by_role("button", name="Next").click()
    expect(page.locator("#page-info")).to_have_text("Page 2")
    expect(rows).to_have_count(2)
    expect(page.get_by_role("button", name="Next")).to_be_disabled()
    page.get_by_role("button", name="Previous").click()
    expect(rows).to_have_count(20)
    page.get_by_label("Search threads").fill("NUMBER 7")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-thread-id", "bulk-07")
    rows.first.click()
    expect(page.locator("#thread-title")).to_have_text("Thread bulk-07")
    expect(rows.first).to_have_attribute("aria-current", "page")


def _assert_accessible(page: Page, view: str) -> None:
    """axe-core finds no violation in the page (checked when axe-playwright-python is here)."""
    try:
        from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]
    except ImportError:  # the dedicated axe test says it skipped
        return
    results = Axe().run(page)
    assert results.violations_count == 0, f"{view}: {results.generate_report()}"


@pytest.mark.slow
def test_branch_from_a_message_edit_it_and_compare_with_the_parent(page: Page, server: str) -> None:
    _api(server, "POST", "api/threads/branch-parent/runs", {"prompt": "first question"})
    _api(server, "POST", "api/threads/branch-parent/runs", {"prompt": "second question"})
    _open_thread(page, server, "branch-parent")
    expect(_assistant(page)).to_have_count(2)
    _assistant(page).first.get_by_role("button", name="Branch from here").click()
    expect(page.locator("#thread-title")).not_to_have_text("Thread branch-parent")
    expect(page.locator("#main")).to_contain_text("Branch of branch-parent")
    expect(page.locator("#conversation li.msg")).to_have_count(2)
    branch_id = page.locator("#thread-title").inner_text().removeprefix("Thread ")
    expect(page.locator(f'#thread-list a[data-thread-id="{branch_id}"]')).to_be_visible()
    user = page.locator("#conversation li[data-role=user]").first
    user.get_by_role("button", name="Edit").click()
    editor = page.get_by_role("textbox", name="Edit message", exact=True)
    expect(editor).to_be_focused()
    expect(editor).to_have_value("first question")
    _assert_accessible(page, "message editor")
    editor.fill("first question, asked differently")
    page.get_by_role("button", name="Save").click()
    expect(user.locator(".msg-text")).to_have_text("first question, asked differently")
    expect(page.locator("#timeline-panel li[data-kind=edit]")).to_have_count(1)
    _send(page, "a new direction")
    expect(_assistant(page).last).to_contain_text("You said: a new direction")
    # The thread is drawn again from the store once the run is saved: a click on the
    # link before that could land on the element being replaced (seen on a loaded CI).
    expect(page.get_by_role("status")).to_have_text("Answer complete")
    expect(page.locator("#timeline-panel li[data-kind=run]")).to_have_count(1)
    page.get_by_role("link", name="Compare with parent").click()
    summary = page.locator("#compare-summary")
    expect(summary).to_have_text(
        "2 messages in common (1 edited in the branch); "
        "after the fork the parent has 2, the branch 2."
    )
    edited = page.locator("#compare-edited")
    expect(edited).to_contain_text("first question, asked differently")
    expect(page.locator("#compare-parent")).to_contain_text("You said: second question")
    expect(page.locator("#compare-branch")).to_contain_text("You said: a new direction")
    _shot(page, "compare")
    _assert_accessible(page, "compare view")
    # The parent is untouched by the branch's edit.
    page.get_by_role("link", name="Open parent").click()
    expect(page.locator("#conversation li[data-role=user] .msg-text").first).to_have_text(
        "first question"
    )


@pytest.mark.slow
def test_framework_messages_are_marked(page: Page, server: str, store_root: Path) -> None:
    from framework_agents import FileCheckpointer, Message, ThreadCheckpoint, ToolCall

    call = ToolCall("c-1", "book_flight", {"city": "Oslo", "seats": 3})
    broken = ToolCall("c-2", "no_such_tool", {})
    messages = [
        Message("assistant", "[compacted] 12 earlier messages", metadata={"kind": "compaction"}),
        Message("assistant", "Summary: the user plans a trip.", metadata={"kind": "summary"}),
        Message("user", "book Oslo"),
        Message("assistant", "", tool_calls=[call, broken]),
        Message(
            "tool",
            "The call was interrupted before it finished.",
            tool_call_id="c-1",
            name="book_flight",
            metadata={"kind": "interrupted"},
        ),
        Message(
            "tool",
            "unknown tool no_such_tool",
            tool_call_id="c-2",
            name="no_such_tool",
            metadata={"kind": "tool_error"},
        ),
        Message("assistant", "Nothing was booked."),
    ]
    checkpoint = ThreadCheckpoint("framework-kinds", messages=messages, state={})
    # Saved by another writer, as another process would (Playwright's loop owns this thread).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, FileCheckpointer(store_root).save(checkpoint)).result()
    _open_thread(page, server, "framework-kinds")
    conversation = page.locator("#conversation")
    for kind, label in [("compaction", "compacted history"), ("summary", "summary")]:
        item = conversation.locator(f"li.msg-framework:has(.badge[data-kind={kind}])")
        expect(item.locator(".badge")).to_have_text(label)
    calls = conversation.locator("li[data-role=assistant]:has(.call)")
    expect(calls.locator(".call")).to_have_count(2)
    expect(calls.locator('.call[data-call-id="c-1"] .badge[data-kind=interrupted]')).to_have_text(
        "interrupted call"
    )
    expect(calls.locator('.call[data-call-id="c-2"] .badge[data-kind=tool_error]')).to_have_text(
        "tool error"
    )
    expect(calls.locator('.call[data-call-id="c-1"] .call-args')).to_contain_text('"Oslo"')
    # The results sit under their calls, not as messages of their own; a call turn has no Edit.
    expect(conversation.locator("li[data-role=tool]")).to_have_count(0)
    expect(calls.get_by_role("button", name="Edit")).to_have_count(0)
    expect(calls.get_by_role("button", name="Branch from here")).to_have_count(1)
    _shot(page, "framework-messages")


@pytest.mark.slow
def test_a_thread_is_deleted_only_after_confirmation(page: Page, server: str) -> None:
    _api(server, "POST", "api/threads/to-delete/runs", {"prompt": "forget me"})
    _open_thread(page, server, "to-delete")
    page.get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator("#delete-confirm")).to_contain_text("This cannot be undone")
    expect(page.get_by_role("button", name="Keep it")).to_be_focused()
    page.get_by_role("button", name="Keep it").click()
    expect(page.locator("#delete-confirm")).to_be_empty()
    assert _api(server, "GET", "api/threads/to-delete")["thread_id"] == "to-delete"
    page.get_by_role("button", name="Delete", exact=True).click()
    page.get_by_role("button", name="Delete for good").click()
    expect(page.locator("#welcome")).to_be_visible()
    expect(page.locator('#thread-list a[data-thread-id="to-delete"]')).to_have_count(0)
    gone = httpx.get(server + "api/threads/to-delete", headers={"Authorization": f"Bearer {TOKEN}"})
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "CHECKPOINT_MISSING"


def test_errors_show_the_servers_code_and_message(page: Page, server: str) -> None:
    page.goto(f"{server}#/t/bad..id!")
    banner = page.locator("#error-banner")
    expect(banner).to_be_visible()
    expect(banner.locator(".error-code")).to_have_text("THREAD_ID_INVALID")
    expect(page.locator(".thread-failure")).to_contain_text("THREAD_ID_INVALID")
    expect(page.get_by_role("button", name="Try again")).to_be_visible()
    page.get_by_role("button", name="Dismiss").click()
    expect(banner).to_be_hidden()
    # A run that fails on the server: its code and message, and the thread still usable.
    _open_thread(page, server, "failing-thread")
    _send(page, "please fail now")
    expect(banner.locator(".error-code")).to_have_text("MODEL_ERROR")
    expect(banner.locator(".error-message")).to_contain_text("asked to fail")
    expect(_composer(page)).to_be_enabled()
    expect(_composer(page)).to_have_value("please fail now")  # not stored: offered again
    _shot(page, "error")


@pytest.mark.slow
def test_a_lost_connection_keeps_what_arrived_and_offers_a_reload(page: Page, server: str) -> None:
    def cut_stream(route: Route) -> None:
        response = route.fetch()
        blocks = response.text().split("\n\n")
        kept: list[str] = []
        for block in blocks:
            kept.append(block)
            if sum("TEXT_MESSAGE_CONTENT" in b for b in kept) == 3:
                break
        route.fulfill(response=response, body="\n\n".join(kept) + "\n\n")

    _open_thread(page, server, "flaky-link")
    page.route("**/agui", cut_stream)
    _send(page, "are you still there")
    lost = page.locator("#connection-lost")
    expect(lost).to_be_visible()
    expect(lost).to_contain_text("connection was lost")
    live = page.locator("#conversation .live-text")
    expect(live).to_have_text("Hello from the ")
    expect(page.get_by_role("button", name="Reload thread")).to_be_focused()
    _shot(page, "connection-lost")
    page.unroute("**/agui")
    page.get_by_role("button", name="Reload thread").click()
    expect(_assistant(page).last).to_contain_text("You said: are you still there")
    expect(lost).to_have_count(0)


# A branch compared at 390 px (a browser page of seconds): make stress. make test keeps the
# narrow window's readability and labels (below).
@pytest.mark.slow
def test_compare_a_branch_without_edits_at_390_px_prints_no_null_and_fits(
    browser: Browser, server: str
) -> None:
    """It printed a stray ``null`` (the DOM's append of no edited section) and was 409 px."""
    _api(server, "POST", "api/threads/plain-parent/runs", {"prompt": "a question on a phone"})
    first = _api(server, "GET", "api/threads/plain-parent")["messages"][1]["id"]
    branch = {"message_id": first, "thread_id": "plain-branch"}
    _api(server, "POST", "api/threads/plain-parent/branches", branch)
    page, errors = new_page(browser, signed_in=True, width=390)
    page.goto(f"{server}#/compare/plain-branch")
    expect(page.locator("#compare-summary")).to_contain_text("messages in common")
    expect(page.locator("#compare-edited")).to_have_count(0)
    assert "null" not in page.locator("#main").inner_text()
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    user = _api(server, "GET", "api/threads/plain-branch")["messages"][0]["id"]
    long_words = "a-rather-long-unbroken-word-that-a-phone-must-wrap " * 3
    _api(server, "PATCH", f"api/threads/plain-branch/messages/{user}", {"content": long_words})
    page.goto(f"{server}#/t/plain-branch")
    expect(page.locator("#thread-title")).to_have_text("Thread plain-branch")
    page.goto(f"{server}#/compare/plain-branch")
    expect(page.locator("#compare-edited")).to_have_count(1)
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], ("compare with an edit", widths)
    for route in ("", "#/t/plain-parent", "#/t/plain-branch"):
        page.goto(server + route)
        expect(page.locator("#threads-status")).to_contain_text("thread")
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], (route, widths)
    page.context.close()
    assert errors == []


def test_a_narrow_window_stays_readable_and_every_field_has_a_label(
    browser: Browser, server: str
) -> None:
    _api(server, "POST", "api/threads/narrow-view/runs", {"prompt": "a question on a phone"})
    page, errors = new_page(browser, signed_in=True, width=390)
    page.goto(server)
    expect(page.locator("#threads-status")).to_contain_text("thread")
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    assert page.evaluate("location.hash") == ""
    _open_thread(page, server, "narrow-view")
    expect(page.locator("#thread-title")).to_be_focused()
    expect(_assistant(page).last).to_contain_text("You said: a question on a phone")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    unlabeled = page.evaluate(
        """() => [...document.querySelectorAll('input, textarea, select')]
              .filter((el) => el.labels.length === 0 && !el.getAttribute('aria-label'))
              .map((el) => el.id || el.name)"""
    )
    assert unlabeled == []
    _shot(page, "narrow")
    page.context.close()
    assert errors == []


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390], ids=["wide", "narrow"])
def test_axe_finds_no_accessibility_violations(browser: Browser, server: str, width: int) -> None:
    axe_module = pytest.importorskip(
        "axe_playwright_python.sync_playwright",
        reason="axe-playwright-python (the axe-core engine) is missing: pip install it",
    )
    axe = axe_module.Axe()
    _api(server, "POST", f"api/threads/axe-done-{width}/runs", {"prompt": "hello axe"})
    _api(server, "POST", f"api/threads/axe-waiting-{width}/runs", {"prompt": "book for axe"})
    page, errors = new_page(browser, signed_in=True, width=width)
    views = {
        "threads list": "",
        "answered thread": f"#/t/axe-done-{width}",
        "pending approval": f"#/t/axe-waiting-{width}",
    }
    for name, route in views.items():
        page.goto(server + route)
        expect(page.locator("#threads-status")).to_contain_text("thread")
        if route:
            expect(page.locator("#composer")).to_be_visible()
        page.locator("details.reasoning summary").evaluate_all("els => els.forEach(e => e.click())")
        results = axe.run(page)
        assert results.violations_count == 0, f"{name}: {results.generate_report()}"
    page.context.close()
    assert errors == []


def test_the_page_modules_parse_streams_and_compare_threads(page: Page, server: str) -> None:
    page.goto(server)
    expect(page.locator("#threads-status")).to_contain_text("thread")
    parsed = page.evaluate(
        """async () => {
          const { parseBlock } = await import('./console/js/api.js');
          return [
            parseBlock('event: text_delta\\ndata: {"delta": "a"}'),
            parseBlock('data: {"type": "RUN_STARTED",\\ndata:  "runId": "r"}'),
            parseBlock(': keep-alive'),
            parseBlock('data: not json'),
          ];
        }"""
    )
    assert parsed == [
        {"delta": "a", "type": "text_delta"},
        {"type": "RUN_STARTED", "runId": "r"},
        None,
        {"type": "UNPARSED", "data": "not json", "event": None},
    ]
    diff = page.evaluate(
        """async () => {
          const { diffThreads } = await import('./console/js/compare.js');
          const m = (id, role, content) => ({ id, role, content, tool_calls: [] });
          const parent = [m('u1', 'user', 'hi'), m('a1', 'assistant', 'hello'),
                          m('u2', 'user', 'more'), m('a2', 'assistant', 'sure')];
          const branch = [m('u1', 'user', 'hi there'), m('x1', 'assistant', 'hello'),
                          m('u3', 'user', 'other')];
          const d = diffThreads(parent, branch);
          return {
            common: d.common,
            edited: d.edited.map((e) => [e.before.content, e.after.content]),
            parentTail: d.parentTail.map((x) => x.id),
            branchTail: d.branchTail.map((x) => x.id),
          };
        }"""
    )
    # u1 kept its id (edited), a1 was copied under a new id with the same content.
    assert diff == {
        "common": 2,
        "edited": [["hi", "hi there"]],
        "parentTail": ["u2", "a2"],
        "branchTail": ["u3"],
    }


def test_a_draft_typed_before_the_thread_loads_survives_the_render(page: Page, server: str) -> None:
    page.goto(server)
    page.get_by_role("button", name="New thread").click()
    expect(page.locator("#main")).to_contain_text("New thread: send the first message")
    _composer(page).fill("half a thought")
    page.get_by_role("button", name="Reload").click()  # the thread renders again
    expect(page.locator("#main")).to_contain_text("New thread: send the first message")
    expect(_composer(page)).to_have_value("half a thought")
    page.get_by_role("button", name="New thread").click()  # another thread: its own empty draft
    expect(_composer(page)).to_have_value("")
