"""Support for the console's browser tests: a real server in a thread, a scripted agent, Chromium.

The server is the real ``create_app`` (a directory store, a token) under uvicorn on 127.0.0.1 in a
background thread; the agent answers from a scripted model that streams its text word by word
and calls ``book_flight``, a tool that needs approval, when the prompt asks to book, and
``reserve_room``, a tool that asks a question (an elicitation), when it asks for a hotel.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework_agents import (
    Agent,
    Message,
    ReasoningBlock,
    ScriptedModel,
    TextBlock,
    ToolCall,
    ToolContext,
    tool,
)
from framework_agents.elicitation import Elicitation, ElicitationRequired
from framework_agents.errors import ModelError
from framework_agents.models._base import ModelChunk, ModelDone, ReasoningDelta, TextDelta, ToolSpec

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "ROOM",
    "SCREENSHOTS",
    "STREAM_GATES",
    "StreamGate",
    "TOKEN",
    "TOKEN_KEY",
    "ServerThread",
    "WordStreamingModel",
    "browser_missing",
    "chromium",
    "make_agent",
    "new_page",
    "require_browser",
]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "console-test-token"
#: Where the console keeps the token (the tab's session storage).
TOKEN_KEY = "framework-agents.console.token"
#: Where the tests save a screenshot of each main view: ``docs/console/`` (shown by
#: docs/console.md) when ``FA_CONSOLE_SCREENSHOTS=1`` asks to refresh them, else a temporary
#: directory, so a test run leaves the work tree clean.
SCREENSHOTS = (
    Path(__file__).resolve().parents[2] / "docs" / "console"
    if os.environ.get("FA_CONSOLE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / f"fa-console-shots-{os.getpid()}"
)

_call_ids = itertools.count(1)


class StreamGate:
    """Holds the answer to one prompt after three words.

    ``reached`` is set when the stream gets there; setting ``opened`` lets it go on.
    """

    def __init__(self) -> None:
        """Two fresh events."""
        self.reached = threading.Event()
        self.opened = threading.Event()


#: prompt -> gate: the answer to that prompt streams three words, then waits for the gate.
STREAM_GATES: dict[str, StreamGate] = {}


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        return f"Chromium is missing ({CHROMIUM}): apt-get install chromium fonts-dejavu-core"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is missing: pip install playwright (no browser download is needed)"
    try:
        import uvicorn  # noqa: F401

        import framework_agents.server  # noqa: F401
    except ImportError as exc:
        return f"the server extra is missing ({exc}): pip install 'framework-agents[server]'"
    return None


def require_browser() -> None:
    """Skip the calling test module, saying why, when :func:`browser_missing` finds a reason."""
    import pytest

    missing = browser_missing()
    if missing:
        pytest.skip(missing, allow_module_level=True)


def chromium() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, for a module fixture to ``yield from``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def new_page(browser: Browser, *, signed_in: bool, width: int = 1280) -> tuple[Page, list[str]]:
    """A page in a fresh context (holding the token when ``signed_in``) and its errors.

    The list collects uncaught exceptions and console errors (a Content-Security-Policy
    refusal, say); an HTTP error status the browser logs itself is left to the tests.
    """
    context = browser.new_context(viewport={"width": width, "height": 900})
    if signed_in:
        context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, {TOKEN!r})")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def console_error(message: Any) -> None:
        if message.type == "error" and "Failed to load resource" not in message.text:
            errors.append(message.text)

    page.on("console", console_error)
    return page, errors


class WordStreamingModel(ScriptedModel):
    """A ScriptedModel whose stream sends the reasoning, then the text one word at a time.

    When the prompt has a gate in :data:`STREAM_GATES`, the stream stops after three words
    until the test sets it, so a test sees a half-streamed answer in the page.
    """

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        system_prompt: str | None = None,
    ) -> AsyncIterator[ModelChunk]:
        """Yield the scripted reply as several deltas, then the whole message."""
        message = await self.complete(messages, tools, system_prompt=system_prompt)
        prompts = [m.text for m in messages if m.role == "user"]
        gate = STREAM_GATES.get(prompts[-1]) if prompts else None
        for block in message.reasoning:
            yield ReasoningDelta(block.text)
        words = message.text.split(" ")
        for i, word in enumerate(words):
            if i == 3 and gate is not None:
                gate.reached.set()
                if not await asyncio.to_thread(gate.opened.wait, 60):
                    raise TimeoutError("the test never opened the stream gate")
            yield TextDelta(word if i == len(words) - 1 else word + " ")
        yield ModelDone(message)


@tool(requires_approval=True, allowed_decisions=("approve", "edit", "reject"))
async def book_flight(city: str, seats: int) -> str:
    """Book seats on the next flight to a city."""
    return f"booked {seats} seat(s) to {city}"


#: What ``reserve_room`` asks: a field of every kind a question's schema may hold.
ROOM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "title": "Nights", "minimum": 1, "maximum": 14},
        "meal": {"type": "string", "title": "Meal", "enum": ["none", "breakfast", "half board"]},
        "view": {
            "type": "string",
            "title": "View",
            "oneOf": [
                {"const": "sea", "title": "Sea view"},
                {"const": "city", "title": "City view"},
            ],
        },
        "budget": {"type": "number", "title": "Budget per night", "minimum": 0},
        "pets": {"type": "boolean", "title": "Travelling with a pet"},
        "arrival": {"type": "string", "title": "Arrival", "format": "date"},
        "call_at": {"type": "string", "title": "Call me at", "format": "date-time"},
        "extras": {
            "type": "array",
            "title": "Extras",
            "items": {"enum": ["parking", "late checkout", "crib"]},
            "maxItems": 2,
        },
        "note": {
            "type": "string",
            "title": "Note",
            "description": "Anything the hotel should know.",
            "maxLength": 40,
        },
    },
    "required": ["nights", "meal"],
}


@tool
async def reserve_room(city: str, context: ToolContext) -> str:
    """Reserve a hotel room: asks the human how first (as an MCP server's tool would)."""
    answer = context.answer
    if answer is None:
        raise ElicitationRequired(Elicitation(f"How should I reserve your room in {city}?", ROOM))
    if answer.action != "accept":
        return f"no room reserved ({answer.action})"
    return f"reserved in {city}: {json.dumps(answer.content, sort_keys=True)}"


def _reply(messages: list[Message], tools: list[ToolSpec]) -> Message:
    """The scripted agent: books when asked, reports tool results, fails on request."""
    last = messages[-1]
    if last.role == "tool":
        return Message("assistant", f"Done. The booking tool said: {last.text}")
    prompt = last.text
    if "book" in prompt.lower():
        call = ToolCall(f"call-{next(_call_ids)}", "book_flight", {"city": "Paris", "seats": 1})
        return Message("assistant", "I will book that for you.", tool_calls=[call])
    if "hotel" in prompt.lower():
        call = ToolCall(f"call-{next(_call_ids)}", "reserve_room", {"city": "Lisbon"})
        return Message("assistant", "", tool_calls=[call])
    if "fail" in prompt.lower():
        raise ModelError("the scripted model was asked to fail")
    return Message(
        "assistant",
        [
            ReasoningBlock("The user wrote something; answer with a friendly echo."),
            TextBlock(f"Hello from the scripted agent. You said: {prompt}"),
        ],
    )


def make_agent() -> Agent:
    """A fresh agent for one run (the server asks for one per run)."""
    return Agent(
        WordStreamingModel([_reply] * 20),
        tools=[book_flight, reserve_room],
        system_prompt="You are a test agent.",
        output_version="v1",
        state={"traveller": {"name": "Ada", "seats": 1, "tags": ["test", "console"]}, "vip": False},
    )


class ServerThread:
    """``uvicorn`` serving an app on 127.0.0.1 (a free port) in a daemon thread."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        ready = threading.Event()
        self._ready = ready

        class _Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets=sockets)
                ready.set()

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = _Server(config)
        self.thread = threading.Thread(
            target=self.server.run, name="console-test-server", daemon=True
        )
        self.url = ""

    def start(self) -> str:
        """Start serving; returns the base URL once the socket listens."""
        self.thread.start()
        if not self._ready.wait(30) or not self.server.started:
            raise RuntimeError("the test server did not start")
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/"
        return self.url

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(30)
