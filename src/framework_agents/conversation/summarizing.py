"""``SummarizingConversationManager``: condense the oldest messages into one summary."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence

from .._util import maybe_await
from ..errors import InvalidArgumentError, ModelError
from ..history import repair_history
from ..messages import Message
from ..models._base import Model
from ..summarize import Summarizer, extractive_summary
from ._cut import boundaries, check_count, newest_user, pinned_end

__all__ = [
    "DEFAULT_SUMMARY_PREFIX",
    "SUMMARY_PROMPT",
    "SUMMARY_SYSTEM_PROMPT",
    "SummarizingConversationManager",
]

logger = logging.getLogger(__name__)

#: What every summary message's text starts with unless ``summary_prefix`` says otherwise.
DEFAULT_SUMMARY_PREFIX = "Summary of the earlier conversation:\n"

#: System prompt of the summarising model call.
SUMMARY_SYSTEM_PROMPT = "You write concise, faithful summaries of conversations."

#: User prompt of the summarising model call; ``{transcript}`` is the head being condensed.
SUMMARY_PROMPT = (
    "Summarise the conversation below so that it can replace it. Keep the facts, names, "
    "numbers, decisions, tool results and open tasks that later turns may need. "
    "Answer with the summary only.\n\n<conversation>\n{transcript}\n</conversation>"
)

_MIN_RATIO, _MAX_RATIO = 0.1, 0.8


def _transcript(messages: Sequence[Message]) -> str:
    """The head as plain text lines, the form a summarising model reads."""
    lines: list[str] = []
    for msg in messages:
        text = msg.text.strip()
        if msg.kind in ("summary", "compaction"):
            lines.append(f"(earlier summary) {text}")
        elif msg.role == "tool":
            lines.append(f"tool {msg.name or '?'} returned: {text}")
        else:
            calls = ", ".join(
                f"{c.name}({json.dumps(c.args, sort_keys=True, default=str)})"
                for c in msg.tool_calls
            )
            if calls:
                text = f"{text} [called {calls}]".strip()
            lines.append(f"{msg.role}: {text}")
    return "\n".join(lines)


class SummarizingConversationManager:
    """Replaces the oldest unpinned messages with one assistant summary message.

    ``reduce()`` condenses the oldest ``summary_ratio`` fraction (clamped to 0.1-0.8) of
    the unpinned messages, never touching the newest ``preserve_recent`` nor the newest
    user message (what the user said last is never summarised away), into ONE
    assistant message whose ``metadata["kind"]`` is ``"summary"`` and whose text starts
    with ``summary_prefix``; :attr:`last_summary` holds that text. The cut is moved to the
    next group boundary (a call is never separated from its results), or back to the last
    boundary before the preserved messages. A summary already in the condensed head is
    part of the next one (rolling summaries).

    The summary comes from ``summarizer(messages) -> str`` (sync or async) if given, else
    from ``model`` (anything with the ``Model`` protocol: one ``complete()`` call with
    :data:`SUMMARY_PROMPT`), else from :func:`~framework_agents.summarize.extractive_summary`.

    ``apply()`` leaves the history as it is, unless built with ``max_messages=N`` and the
    history is longer than ``N``: then it reduces until it fits or nothing more can be
    condensed. ``before_model()`` never condenses. ``pin_first`` pins like
    :class:`SlidingWindowConversationManager` (extended to the end of a tool group).
    Input is repaired first and never modified; every method returns a new list.
    """

    def __init__(
        self,
        summary_ratio: float = 0.3,
        preserve_recent: int = 10,
        pin_first: int = 0,
        summarizer: Summarizer | None = None,
        model: Model | None = None,
        summary_prefix: str = DEFAULT_SUMMARY_PREFIX,
        max_messages: int | None = None,
    ) -> None:
        if (
            isinstance(summary_ratio, bool)
            or not isinstance(summary_ratio, int | float)
            or math.isnan(summary_ratio)
        ):
            raise InvalidArgumentError(f"summary_ratio must be a number, not {summary_ratio!r}")
        #: The effective ratio, already clamped to 0.1-0.8.
        self.summary_ratio: float = min(max(float(summary_ratio), _MIN_RATIO), _MAX_RATIO)
        self.preserve_recent: int = check_count("preserve_recent", preserve_recent)
        self.pin_first: int = check_count("pin_first", pin_first)
        if summarizer is not None and not callable(summarizer):
            raise InvalidArgumentError("summarizer must be callable: (list[Message]) -> str")
        self.summarizer: Summarizer | None = summarizer
        if model is not None and not callable(getattr(model, "complete", None)):
            raise InvalidArgumentError("model must have an async complete() method")
        self.model: Model | None = model
        if not isinstance(summary_prefix, str):
            raise InvalidArgumentError("summary_prefix must be a str")
        self.summary_prefix: str = summary_prefix
        self.max_messages: int | None = (
            None if max_messages is None else check_count("max_messages", max_messages, minimum=1)
        )
        #: The text of the latest summary message this manager made (``None`` before any).
        self.last_summary: str | None = None

    async def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The history as is, or reduced until it fits ``max_messages`` (when set)."""
        history = repair_history(messages)
        if self.max_messages is None:
            return history
        while len(history) > self.max_messages:
            shorter = await self._reduce(history)
            if len(shorter) >= len(history):
                break  # nothing more can be condensed (pins, preserve_recent)
            history = shorter
        return history

    async def before_model(self, messages: Sequence[Message]) -> list[Message]:
        """The history as is (summarising is done in ``apply`` and ``reduce``)."""
        return repair_history(messages)

    async def reduce(self, messages: Sequence[Message]) -> list[Message]:
        """Condense the oldest unpinned messages into one summary message."""
        return await self._reduce(repair_history(messages))

    async def summarize(self, messages: Sequence[Message]) -> str:
        """The summary body of ``messages`` (without the prefix), from the configured source."""
        head = [self._unprefixed(m) for m in messages]
        if self.summarizer is not None:
            body = await maybe_await(self.summarizer(head))
            if not isinstance(body, str):
                raise InvalidArgumentError(
                    f"summarizer must return a str, not {type(body).__name__}"
                )
            return body.strip()
        if self.model is not None:
            prompt = SUMMARY_PROMPT.format(transcript=_transcript(head))
            reply: object = await self.model.complete(
                [Message("user", prompt)], [], system_prompt=SUMMARY_SYSTEM_PROMPT
            )
            if not isinstance(reply, Message) or reply.role != "assistant":
                raise ModelError(
                    f"the summary model must answer an assistant Message, got {reply!r:.200}"
                )
            if reply.text.strip():
                return reply.text.strip()
            logger.warning("summary model returned no text; using the extractive summary")
        return extractive_summary(head)

    def _unprefixed(self, msg: Message) -> Message:
        # An earlier summary is rolled into the next one without its prefix, so prefixes
        # do not pile up ("Summary: Summary: ...").
        prefix = self.summary_prefix
        content = msg.content
        if msg.kind != "summary" or not prefix:
            return msg
        if isinstance(content, str) and content.startswith(prefix):
            return msg.model_copy(update={"content": content[len(prefix) :]})
        return msg

    def _cut_index(self, rest: Sequence[Message]) -> int:
        """How many of the oldest unpinned messages to condense (0: nothing can be)."""
        n = len(rest)
        limit = min(n - self.preserve_recent, newest_user(rest))  # the user's turn stays
        # Condensing only an earlier summary would gain nothing: it must take more along.
        first = 1 if rest and rest[0].kind == "summary" else 0
        candidates = [b for b in boundaries(rest) if first < b <= limit]
        if not candidates:
            return 0
        # The small epsilon keeps e.g. 10 * 0.3 == 3.0000000000000004 from rounding badly.
        target = max(1, math.floor(n * self.summary_ratio + 1e-9))
        return next((b for b in candidates if b >= target), candidates[-1])

    async def _reduce(self, history: list[Message]) -> list[Message]:
        pinned = pinned_end(history, self.pin_first)
        head, rest = history[:pinned], history[pinned:]
        cut = self._cut_index(rest)
        if cut == 0:
            return list(history)
        body = await self.summarize(rest[:cut])
        text = f"{self.summary_prefix}{body}"
        summary = Message("assistant", text, metadata={"kind": "summary", "replaces": cut})
        self.last_summary = text
        logger.debug("summarised %d messages into one (%d chars)", cut, len(text))
        return [*head, summary, *rest[cut:]]

    def __repr__(self) -> str:
        return (
            f"SummarizingConversationManager(summary_ratio={self.summary_ratio}, "
            f"preserve_recent={self.preserve_recent}, pin_first={self.pin_first}, "
            f"max_messages={self.max_messages})"
        )
