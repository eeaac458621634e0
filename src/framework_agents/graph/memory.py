"""GraphMemory: session memory plus a long-term graph of facts, with grounding.

``GraphMemory(store, inner, facts=8)`` keeps the conversation in ``inner`` (any
:class:`~framework_agents.memory.Memory`) and the long-term facts in ``store``. The model
records facts with the ``graph_add`` tool (``graph_memory.tools``); nothing is parsed out of
the conversation silently.

Grounding: a single message (``metadata["kind"] == "grounding"``) that lists the closure
facts most relevant to a text. It has ``role="system"`` and stands at the front of the
history: every shipped adapter accepts a system message there (Chat Completions sends it
as is, the Anthropic adapter folds system messages into its ``system`` parameter), and at
the front it never breaks the user/assistant alternation strict chat templates demand.

The seam for agents is :class:`GroundingMemory`: ``await memory.ground(history, prompt)``
returns the history with its grounding replaced by one for the *incoming* prompt, so the
model is grounded on what the user asks now, not only on the previous turn. Plain
``load()`` grounds on the latest user turn of the stored history. ``save()`` and
``replace()`` drop grounding messages, so they are never stored; ``clear()`` clears
``inner`` only (the agent clears memory before every save; the long-term graph must
survive that).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from ..errors import InvalidArgumentError
from ..memory._base import Memory, replace_history
from ..memory.grounding import GroundingMemory, is_grounding, without_grounding
from ..messages import Message
from ..tools import Tool
from .store import Fact, GraphStore
from .tools import graph_tools

__all__ = ["GROUNDING_HEADER", "GraphMemory", "GroundingMemory", "Ranker", "is_grounding"]

#: First line of a grounding message.
GROUNDING_HEADER = (
    "Facts from long-term memory that may be relevant to the conversation "
    '(subject predicate object; "(inferred)" marks facts derived by reasoning):'
)


def _text(text: object, where: str) -> str:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{where}() takes a str, not {type(text).__name__}")
    return text


class Ranker(Protocol):
    """Picks the facts of a store most relevant to a text (blocking; run in a thread)."""

    def relevant(self, store: GraphStore, text: str, k: int) -> list[Fact]:
        """The ``k`` best facts for ``text``, best first."""
        ...


class GraphMemory:
    """Session memory (``inner``) plus a :class:`GraphStore` of long-term facts."""

    def __init__(
        self,
        store: GraphStore,
        inner: Memory,
        facts: int = 8,
        *,
        role: Literal["system", "user"] = "system",
        carry_state: bool | None = None,
        ranker: Ranker | None = None,
    ) -> None:
        """Check the arguments and bind the ``graph_add``/``graph_query`` tools to ``store``.

        ``carry_state``: whether session snapshots carry the store's facts in their
        ``app_data`` (:mod:`.carry`); ``None`` means yes for an in-memory store, no for an
        on-disk one. ``ranker``: what picks the grounding facts (default: the store's
        lexical :meth:`~GraphStore.relevant`; e.g. :class:`~.embedding.EmbeddingRanker`).
        """
        if not isinstance(store, GraphStore):
            raise InvalidArgumentError(f"store must be a GraphStore, not {type(store).__name__}")
        if not isinstance(inner, Memory):
            raise InvalidArgumentError(f"inner must be a Memory, not {type(inner).__name__}")
        if isinstance(facts, bool) or not isinstance(facts, int) or facts < 0:
            raise InvalidArgumentError(f"facts must be a non-negative integer, not {facts!r}")
        if role not in ("system", "user"):
            raise InvalidArgumentError(f"role must be 'system' or 'user', not {role!r}")
        if carry_state is not None and not isinstance(carry_state, bool):
            raise InvalidArgumentError(f"carry_state must be a bool or None, not {carry_state!r}")
        self._carry_state = carry_state
        if ranker is not None and not callable(getattr(ranker, "relevant", None)):
            raise InvalidArgumentError(
                f"ranker must have a relevant(store, text, k) method, not {type(ranker).__name__}"
            )
        self.ranker: Ranker | None = ranker
        self.store: GraphStore = store
        self.inner: Memory = inner
        self.facts: int = facts
        self.role: Literal["system", "user"] = role
        self.tools: list[Tool] = graph_tools(store)

    # -- grounding ---------------------------------------------------------------------

    async def relevant_facts(self, text: str) -> list[Fact]:
        """The top ``facts`` closure entries for ``text`` (read off the event loop)."""
        if not _text(text, "relevant_facts").strip() or self.facts == 0:
            return []
        await self.store.open()
        if self.ranker is not None:
            return await asyncio.to_thread(self.ranker.relevant, self.store, text, self.facts)
        return await asyncio.to_thread(self.store.relevant, text, self.facts)

    async def grounding_for(self, text: str) -> Message | None:
        """The grounding message for ``text``, or ``None`` when no fact is relevant."""
        found = await self.relevant_facts(text)
        if not found:
            return None
        body = "\n".join(f"- {fact.text}" for fact in found)
        content = f"{GROUNDING_HEADER}\n{body}"
        digest = hashlib.sha256(content.encode()).hexdigest()[:24]
        return Message(
            self.role,
            content,
            id=f"grounding-{digest}",
            metadata={"kind": "grounding", "facts": len(found)},
        )

    async def ground(self, messages: Sequence[Message], prompt: str) -> list[Message]:
        """``messages`` without grounding, led by one grounding message for ``prompt``."""
        kept = without_grounding(messages, "ground")
        grounding = await self.grounding_for(_text(prompt, "ground"))
        return kept if grounding is None else [grounding, *kept]

    # -- Memory ------------------------------------------------------------------------

    async def load(self) -> list[Message]:
        """The inner history led by a grounding message for its latest user turn."""
        history = [m for m in await self.inner.load() if not is_grounding(m)]
        latest = next((m.text for m in reversed(history) if m.role == "user"), "")
        return await self.ground(history, latest)

    async def save(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` to ``inner``, without grounding messages."""
        await self.inner.save(without_grounding(messages, "save"))

    async def replace(self, messages: Sequence[Message]) -> None:
        """Make ``messages`` (without grounding) the inner history, atomically if it can."""
        await replace_history(self.inner, without_grounding(messages, "replace"))

    async def clear(self) -> None:
        """Clear the inner history; the long-term graph stays."""
        await self.inner.clear()

    # -- state -------------------------------------------------------------------------

    @property
    def carries_state(self) -> bool:
        """Whether session snapshots carry the store's facts (``app_data``, see :mod:`.carry`)."""
        return self.store.path is None if self._carry_state is None else self._carry_state

    def export_state(self) -> dict[str, Any]:
        """The store's asserted quads (no entailments), versioned and JSON-serialisable."""
        return self.store.export_state()

    async def import_state(self, state: dict[str, Any]) -> None:
        """Restore the store from an exported state and recompute its closure."""
        await self.store.import_state(state)

    def __repr__(self) -> str:
        """Where the graph lives, the inner memory and the fact budget."""
        where = self.store.path or "memory"
        return f"GraphMemory(store={where}, inner={self.inner!r}, facts={self.facts})"
