"""The model's tools over a GraphStore: ``graph_add`` records a fact, ``graph_query`` reads.

Facts enter the graph only through ``graph_add`` calls the model makes; nothing is parsed
out of conversation text. Arguments are validated twice: the JSON schema bounds lengths
(so the model sees the limits), and the term rules of :mod:`.terms` reject empty names,
names with spaces and the like with a ``GRAPH_TERM_INVALID`` error the model can read and
correct.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from ..errors import InvalidArgumentError
from ..tools import Tool
from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad

__all__ = ["MAX_TOOL_TERM", "graph_tools"]

#: Longest subject, predicate or object a tool call may carry, in characters.
MAX_TOOL_TERM = 500

Name = Annotated[str, Field(min_length=1, max_length=MAX_TOOL_TERM)]
Value = Annotated[str, Field(min_length=1, max_length=MAX_TOOL_TERM)] | int | float | bool
Text = Annotated[str, Field(max_length=MAX_TOOL_TERM)]


def _line(fact: Quad | Fact) -> str:
    entailed = fact.entailed if isinstance(fact, Fact) else fact.graph == ENTAILED_GRAPH
    line = f"{fact.subject.key} {fact.predicate.key} {fact.object.key}"
    return f"{line} (inferred)" if entailed else line


def graph_tools(store: GraphStore) -> list[Tool]:
    """``graph_add`` and ``graph_query`` bound to ``store``."""

    async def graph_add(subject: Name, predicate: Name, object: Value) -> str:
        """Record one fact in long-term memory as a (subject, predicate, object) triple.

        Use it for durable facts worth remembering across conversations. Name entities
        with a prefix and no spaces (ex:AliceSmith, ex:AcmeCorp); use rdf:type for "is a"
        and rdfs:subClassOf for "every X is a Y". Inferred facts follow automatically.

        Args:
            subject: The entity the fact is about, e.g. ex:AliceSmith.
            predicate: The relation, e.g. ex:worksFor, rdf:type, rdfs:subClassOf.
            object: An entity name such as ex:AcmeCorp, or a value (text, number, boolean).
        """
        added = await store.add(subject, predicate, object)

        def read() -> tuple[list[Quad], list[Quad]]:
            asserted = store.quads(subject, predicate, object, entailed=False)
            return asserted, [q for q in store.quads(subject) if q.graph == ENTAILED_GRAPH]

        # Reads wait for the store's lock (a long mutation may hold it): off the loop.
        quads, known = await asyncio.to_thread(read)
        fact = _line(quads[0]) if quads else f"{subject} {predicate} {object}"
        head = f"Recorded: {fact}." if added else f"Already known: {fact}."
        if not known:
            return head
        more = "; ".join(_line(q) for q in known[:8])
        return f"{head} Inferred about {quads[0].subject.key if quads else subject}: {more}."

    async def graph_query(
        text: Text = "",
        subject: Text = "",
        predicate: Text = "",
        object: Text = "",
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> str:
        """Look facts up in long-term memory, both recorded and inferred ones.

        Give ``text`` to get the facts most relevant to it, or any of ``subject``,
        ``predicate`` and ``object`` to match exactly (an empty one matches anything).

        Args:
            text: Words to rank facts by, e.g. "where does Alice work".
            subject: Exact subject to match, e.g. ex:AliceSmith.
            predicate: Exact predicate to match, e.g. ex:worksFor.
            object: Exact object to match.
            limit: How many facts to return at most.
        """
        found: list[Quad | Fact]
        if text.strip():
            found = list(await asyncio.to_thread(store.relevant, text, limit))
        elif subject.strip() or predicate.strip() or object.strip():
            pattern = (subject or None, predicate or None, object or None)
            found = list((await asyncio.to_thread(store.quads, *pattern))[:limit])
        else:
            raise InvalidArgumentError(
                "graph_query needs text, or at least one of subject, predicate and object"
            )
        if not found:
            return "No matching facts."
        return "\n".join(_line(f) for f in found)

    return [Tool(graph_add), Tool(graph_query)]
