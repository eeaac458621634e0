"""The model's tools over a GraphStore: ``graph_add`` records a fact, ``graph_query`` reads.

Facts enter the graph only through ``graph_add`` calls the model makes; nothing is parsed
out of conversation text. ``graph_add`` takes plain names as models write them and maps
them onto terms (:mod:`.natural`: ``Alice Smith`` -> ``ex:AliceSmith`` with a label,
``works at`` -> ``ex:worksAt``, ``is a`` -> ``rdf:type``), and its answer says how each
name was stored. Arguments are validated twice: the JSON schema bounds lengths (so the
model sees the limits), and the term rules reject what cannot be a name (no letters or
digits, forbidden characters) with a ``GRAPH_TERM_INVALID`` error the model can read.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from pydantic import Field

from ..errors import InvalidArgumentError
from ..tools import Tool
from .natural import DEFAULT_NAMESPACE, LABEL, NaturalFact, Resolver
from .store import ENTAILED_GRAPH, Fact, GraphStore, Quad
from .terms import Literal

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


def graph_tools(store: GraphStore, *, namespace: str = DEFAULT_NAMESPACE) -> list[Tool]:
    """``graph_add`` and ``graph_query`` bound to ``store``.

    ``namespace`` is where plain names go (``Alice Smith`` -> ``ex:AliceSmith``).
    """
    resolver = Resolver(
        store.mentions,
        lambda text: [q.subject for q in store.quads(None, LABEL, Literal(text))],
        lambda iri: bool(store.quads(iri, LABEL, None)),
        namespace=namespace,
    )

    async def graph_add(subject: Name, predicate: Name, object: Value) -> str:
        """Record one fact in long-term memory as a (subject, predicate, object) triple.

        Use it for durable facts worth remembering across conversations. Plain names
        are fine: "Alice Smith", "works at", "Acme Corp"; "is a" records a type and
        "is a kind of" says every member of one class belongs to another. Inferred facts
        follow automatically; the answer says how each name was stored.

        Args:
            subject: The entity the fact is about, e.g. Alice Smith (or ex:AliceSmith).
            predicate: The relation, e.g. works at, is a, is a kind of, favorite color.
            object: An entity or class such as Acme Corp or Engineer, or a value (text,
                number, boolean).
        """
        await store.open()

        def resolve() -> tuple[NaturalFact, bool]:
            fact = resolver.fact(subject, predicate, object)
            return fact, bool(store.quads(*fact.triple, graph=None, entailed=False))

        # Resolving names reads the store (its lock may be held): off the loop.
        fact, known_before = await asyncio.to_thread(resolve)
        await store.add_many([fact.triple, *fact.labels])  # one durable step
        added = not known_before

        def read() -> tuple[list[Quad], list[Quad]]:
            asserted = store.quads(*fact.triple, entailed=False)
            known = [q for q in store.quads(fact.subject) if q.graph == ENTAILED_GRAPH]
            return asserted, known

        quads, known = await asyncio.to_thread(read)
        line = _line(quads[0]) if quads else f"{subject} {predicate} {object}"
        head = f"Recorded: {line}." if added else f"Already known: {line}."
        if fact.notes:
            head += " Stored as: " + "; ".join(fact.notes) + "."
        if fact.labels:
            head += " Labelled: " + "; ".join(f"{s.key} {o.key}" for s, _, o in fact.labels) + "."
        if not known:
            return head
        more = "; ".join(_line(q) for q in known[:8])
        return f"{head} Inferred about {fact.subject.key}: {more}."

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
            subject: Exact subject to match, e.g. Alice Smith or ex:AliceSmith.
            predicate: Exact predicate to match, e.g. works at or ex:worksAt.
            object: Exact object to match, e.g. Acme Corp or a value.
            limit: How many facts to return at most.
        """
        found: list[Quad | Fact]
        if text.strip():
            found = list(await asyncio.to_thread(store.relevant, text, limit))
        elif subject.strip() or predicate.strip() or object.strip():

            def lookup() -> list[Quad]:
                pattern = resolver.pattern(subject, predicate, object)
                return store.quads(*pattern)

            found = list((await asyncio.to_thread(lookup))[:limit])
        else:
            raise InvalidArgumentError(
                "graph_query needs text, or at least one of subject, predicate and object"
            )
        if not found:
            return "No matching facts."
        return "\n".join(_line(f) for f in found)

    return [Tool(graph_add), Tool(graph_query)]
