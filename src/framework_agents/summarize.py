"""The default summariser: an extractive stub that needs no model.

It keeps what later turns most often need: what the user asked, what the assistant
answered, which tools ran, and what an earlier summary already said (so summaries roll
up rather than forget). It is deterministic; plug in a model for abstractive summaries.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

from .messages import Message

__all__ = ["Summarizer", "extractive_summary"]

#: ``summarize(messages) -> str``, sync or async.
Summarizer = Callable[[list[Message]], "str | Awaitable[str]"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _first_sentence(text: str, limit: int) -> str:
    text = " ".join(text.split())
    sentence = _SENTENCE.split(text, maxsplit=1)[0] if text else ""
    if len(sentence) > limit:
        sentence = sentence[: limit - 1].rstrip() + "…"
    return sentence


def extractive_summary(
    messages: Sequence[Message], *, per_message: int = 160, max_chars: int = 4000
) -> str:
    """Summarise ``messages`` as one line per turn, earlier summaries carried over first."""
    lines: list[str] = []
    for msg in messages:
        if msg.kind in ("compaction", "summary"):
            # A rolling summary: keep the earlier summary's body whole (bounded below).
            lines.append(msg.text.strip())
            continue
        if msg.role == "tool":
            lines.append(f"- tool {msg.name or '?'} returned: {_first_sentence(msg.text, 80)}")
            continue
        text = _first_sentence(msg.text, per_message)
        if msg.tool_calls:
            names = ", ".join(c.name for c in msg.tool_calls)
            text = f"{text} [called {names}]".strip()
        if text:
            lines.append(f"- {msg.role}: {text}")
    summary = "\n".join(line for line in lines if line)
    if len(summary) > max_chars:
        # Keep the newest content: older material was already condensed once.
        summary = "…" + summary[-(max_chars - 1) :]
    return summary
