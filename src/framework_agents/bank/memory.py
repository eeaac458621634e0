"""``BankMemory``: an agent's conversation memory grounded on a :class:`MemoryBank`.

It wraps the memory that keeps the conversation (``inner``) and adds, for each run:

* **recall**: one message (``metadata["kind"] == "recall"``) holding the ``k`` records of
  the application's namespace most relevant to what the user asks now. It rides along
  with the run's model calls and is never stored, snapshotted or checkpointed;
* **tools** for the model: ``memory_search``, ``memory_remember`` and ``memory_forget``,
  bound to the namespace the application chose. No tool takes a namespace, so a model
  can never reach another user's records;
* **episodes** (``episodes=True``): the user and assistant messages each run committed,
  remembered as ``"episode"`` records (idempotent by message id);
* **extraction** (``extract=``): the messages each run committed are turned into records
  *after* the run has returned. Each run's new messages become one durable job in the
  bank before the run returns; a background task runs it, and stores its records and
  completes the job in one atomic write. A job cut off by a crash stays pending: the
  next run (in any process) or :meth:`BankMemory.drain` does it. Two workers may both
  run a job, but only one completes it, so its records are never stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import logging
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from ..errors import AgentError, InvalidArgumentError
from ..memory._base import Memory, replace_history
from ..memory.grounding import RECALL_KIND, without_grounding
from ..messages import Message
from ..tools import Tool
from ._backend import Job
from ._records import MemoryHit, Namespace, check_count, check_namespace, derived_id
from .bank import MemoryBank

__all__ = ["RECALL_HEADER", "BankMemory", "Extractor", "namespace_tools"]

log = logging.getLogger(__name__)

#: First line of a recall message.
RECALL_HEADER = "Records from long-term memory that may be relevant (newest facts hold now):"

#: What ``extract`` may be: a model (with ``complete``), or ``messages -> list[str | dict]``.
Extractor = Any

_EXTRACT_PROMPT = (
    "List the durable facts about the user worth remembering from this conversation "
    "(preferences, plans, people, places, dates), one short sentence per line, no "
    "numbering. Write NONE if there are none."
)
_FIELDS = frozenset(("text", "kind", "key", "metadata"))

ToolText = Annotated[str, Field(min_length=1, max_length=4000)]
ToolKey = Annotated[str, Field(min_length=1, max_length=200)] | None


def _recall_message(hits: list[MemoryHit]) -> Message:
    lines = []
    for hit in hits:
        record = hit.record
        when = record.valid_from.date().isoformat()
        label = f"{record.kind}, {when}" + (f", key {record.key}" if record.key else "")
        lines.append(f"- [{label}] {record.text}")
    content = "\n".join([RECALL_HEADER, *lines])
    digest = hashlib.sha256(content.encode()).hexdigest()[:24]
    return Message(
        "user",
        content,
        id=f"recall-{digest}",
        metadata={"kind": RECALL_KIND, "records": [h.record.id for h in hits]},
    )


class BankMemory:
    """A memory over ``inner`` that recalls, remembers and extracts through a bank.

    ``namespace`` is where this agent's records live (the application's choice, e.g.
    ``("user-42",)``); ``k`` how many records a recall holds; ``episodes`` whether each
    run's messages are remembered; ``extract`` a model or a callable ``messages ->
    list[str | dict]`` (sync or async) that turns each run's messages into records.
    """

    def __init__(
        self,
        bank: MemoryBank,
        inner: Memory,
        *,
        namespace: Namespace,
        k: int = 8,
        episodes: bool = False,
        extract: Extractor | None = None,
    ) -> None:
        """Wrap ``inner``; nothing is read before the first run."""
        if not isinstance(bank, MemoryBank):
            raise InvalidArgumentError(f"bank must be a MemoryBank, not {bank!r:.60}")
        for method in ("load", "save", "clear"):
            if not callable(getattr(inner, method, None)):
                raise InvalidArgumentError(f"inner must be a Memory, not {inner!r:.60}")
        if not isinstance(episodes, bool):
            raise InvalidArgumentError(f"episodes must be a bool, not {episodes!r:.40}")
        if extract is not None and not (
            callable(extract) or callable(getattr(extract, "complete", None))
        ):
            raise InvalidArgumentError(
                "extract must be a model or a callable messages -> list of texts or dicts"
            )
        self.bank = bank
        self.inner = inner
        self.namespace = check_namespace(namespace)
        self.k = check_count(k, "k")
        self.episodes = episodes
        self.extract = extract
        self.tools: list[Tool] = namespace_tools(bank, self.namespace, k=self.k)
        self._loaded: set[str] | None = None  # ids of the history the current run began with
        self._running: dict[str, asyncio.Task[None]] = {}

    def __repr__(self) -> str:
        """The bank, the inner memory and the namespace."""
        return f"BankMemory({self.bank!r}, inner={self.inner!r}, namespace={self.namespace!r})"

    # -- recall ------------------------------------------------------------------------

    async def recall(self, text: str) -> Message | None:
        """The recall message for ``text``, or ``None`` when no record is relevant."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"recall() takes a string, not {text!r:.40}")
        if not text.strip():
            return None
        hits = await self.bank.search(text, namespace=self.namespace, k=self.k)
        return _recall_message(hits) if hits else None

    async def ground(self, messages: Sequence[Message], prompt: str) -> list[Message]:
        """``messages`` without context, led by one recall message for ``prompt``."""
        kept = without_grounding(messages, "ground")
        self._start_jobs()
        recall = await self.recall(prompt)
        return kept if recall is None else [recall, *kept]

    # -- Memory ------------------------------------------------------------------------

    async def load(self) -> list[Message]:
        """The inner history led by a recall message for its latest user turn."""
        history = without_grounding(await self.inner.load(), "load")
        self._loaded = {m.id for m in history}
        latest = next((m.text for m in reversed(history) if m.role == "user"), "")
        recall = await self.recall(latest)
        return history if recall is None else [recall, *history]

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` (without context) to ``inner``; remember and extract them."""
        kept = without_grounding(messages, "save")
        known = await self._known()
        await self.inner.save(kept)
        await self._learn(kept, known)
        self._loaded = known | {m.id for m in kept}

    async def replace(self, messages: Sequence[Message]) -> None:
        """Make ``messages`` (without context) the inner history; learn from the new ones."""
        kept = without_grounding(messages, "replace")
        known = await self._known()
        await replace_history(self.inner, kept)
        await self._learn(kept, known)
        self._loaded = {m.id for m in kept}

    async def _known(self) -> set[str]:
        """The ids of the history this run began with (read now if no run loaded it)."""
        if self._loaded is None:
            self._loaded = {m.id for m in await self.inner.load()}
        return self._loaded

    async def clear(self) -> None:
        """Clear the conversation; the bank's records stay."""
        await self.inner.clear()
        self._loaded = set()

    async def _learn(self, history: list[Message], known: set[str]) -> None:
        """Remember and queue extraction for the messages of ``history`` not in ``known``."""
        new = [
            m
            for m in history
            if m.role in ("user", "assistant") and m.text.strip() and m.id not in known
        ]
        if not new:
            return
        if self.episodes:
            await self.bank.remember_messages(new, namespace=self.namespace)
        if self.extract is not None:
            job = Job(
                derived_id("extract", *self.namespace, *(m.id for m in new)),
                self.namespace,
                json.dumps(
                    [{"id": m.id, "role": m.role, "text": m.text} for m in new],
                    ensure_ascii=False,
                ).encode(),
            )
            await self.bank.add_job(job)  # durable before the run returns
            self._start(job)

    # -- extraction --------------------------------------------------------------------

    def _start(self, job: Job) -> None:
        if job.id in self._running:
            return
        with contextlib.suppress(RuntimeError):  # no running loop: drain() does it
            task = asyncio.get_running_loop().create_task(self._run_job(job))
            self._running[job.id] = task
            task.add_done_callback(lambda _: self._running.pop(job.id, None))

    def _start_jobs(self) -> None:
        """Pick up jobs a crash or another process left pending (in the background)."""
        if self.extract is None:
            return
        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(self._resume_pending())
            self._running.setdefault("pending", task)
            task.add_done_callback(lambda _: self._running.pop("pending", None))

    async def _resume_pending(self) -> None:
        for job in await self._pending():
            self._start(job)

    async def _pending(self) -> list[Job]:
        jobs = await self.bank.pending_jobs()
        return [j for j in jobs if j.namespace == self.namespace]

    async def _run_job(self, job: Job) -> None:
        try:
            await self.run_job(job)
        except AgentError as exc:  # the job stays pending: the next run or drain() retries
            log.warning("memory extraction job %s failed: %s", job.id, exc)
        except Exception:
            log.exception("memory extraction job %s failed", job.id)

    async def run_job(self, job: Job) -> int | None:
        """Run one extraction job; how many records it stored (``None``: done elsewhere)."""
        try:
            items = json.loads(job.payload)
            messages = [Message(i["role"], i["text"], id=i["id"]) for i in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"extraction job {job.id} is unreadable: {exc}") from None
        found = await self._extracted(messages)
        rows = [
            self.bank.new_row(
                fields.pop("text"),
                namespace=job.namespace,
                record_id=derived_id("extracted", job.id, str(n)),
                **fields,
            )
            for n, fields in enumerate(found)
        ]
        stored = await self.bank.complete_job(job.id, rows)
        return None if stored is None else len(stored)

    async def _extracted(self, messages: list[Message]) -> list[dict[str, Any]]:
        extract = self.extract
        if callable(getattr(extract, "complete", None)):
            items: Any = await _ask_model(extract, messages)
        else:
            assert callable(extract)
            items = extract(messages)
            if inspect.isawaitable(items):
                items = await items
        if not isinstance(items, list | tuple):
            raise InvalidArgumentError(f"extract must return a list, not {items!r:.60}")
        out: list[dict[str, Any]] = []
        for item in items:
            if isinstance(item, str):
                if item.strip():
                    out.append({"text": item.strip(), "kind": "fact"})
            elif (
                isinstance(item, dict)
                and isinstance(item.get("text"), str)
                and set(item) <= _FIELDS
            ):
                out.append({"kind": "fact", **item})
            else:
                raise InvalidArgumentError(
                    "extract must return texts or dicts with text (and kind, key, metadata), "
                    f"not {item!r:.60}"
                )
        return out

    async def drain(self) -> None:
        """Wait for extraction: run every pending job of this namespace, await the running."""
        if self.extract is None:
            return
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)
        for job in await self._pending():
            await self.run_job(job)


def namespace_tools(bank: MemoryBank, namespace: Namespace, *, k: int = 8) -> list[Tool]:
    """``memory_search``, ``memory_remember`` and ``memory_forget`` bound to ``namespace``.

    No tool takes a namespace: whoever calls them (a model, an MCP client) reaches the
    records of ``namespace`` (and, for a search, ``k`` of them at most) and no others.
    """
    namespace = check_namespace(namespace)
    k = check_count(k, "k")

    async def memory_search(query: ToolText) -> str:
        """Search long-term memory for records relevant to a question or topic.

        Args:
            query: What to look for, e.g. "where does the user live".
        """
        hits = await bank.search(query, namespace=namespace, k=k)
        if not hits:
            return "No matching records."
        return "\n".join(
            f"{h.record.id}: {h.record.text} ({h.record.kind}, since "
            f"{h.record.valid_from.date().isoformat()})"
            for h in hits
        )

    async def memory_remember(text: ToolText, key: ToolKey = None) -> str:
        """Remember a durable fact for later conversations.

        Args:
            text: The fact in one sentence, e.g. "The user's daughter is called Mia".
            key: A short name for what the fact is about (e.g. "home city"); a new
                fact with the same key replaces the old one from now on.
        """
        record = await bank.remember(text, namespace=namespace, key=key)
        return f"Remembered as {record.id}."

    async def memory_forget(
        record_id: Annotated[str, Field(min_length=1, max_length=128)],
    ) -> str:
        """Forget a record of long-term memory for good (by the id a search showed).

        Args:
            record_id: The id of the record, as memory_search lists it.
        """
        record = await bank.get(record_id)
        if record is None or record.namespace[: len(namespace)] != namespace:
            return f"No record {record_id}."
        await bank.forget(record_id)
        return f"Forgot {record_id}."

    return [Tool(memory_search), Tool(memory_remember), Tool(memory_forget)]


async def _ask_model(model: Any, messages: list[Message]) -> list[str]:
    """Ask ``model`` for facts in ``messages``: one per line of its answer."""
    transcript = "\n".join(f"{m.role}: {m.text}" for m in messages)
    reply = await model.complete(
        [Message("user", f"{_EXTRACT_PROMPT}\n\n{transcript}")], [], system_prompt=None
    )
    text = reply.text if isinstance(reply, Message) else str(reply)
    lines = [line.strip(" -*\t") for line in text.splitlines()]
    return [line for line in lines if line and line.upper() != "NONE"]
