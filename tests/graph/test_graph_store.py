"""GraphStore: terms, patterns, export/import, and the on-disk store (reopen, corruption)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from async_helper import arun
from framework_agents.errors import GraphStateError, GraphStoreCorruptError, GraphTermError
from framework_agents.graph import ENTAILED_GRAPH, IRI, GraphStore, Literal

SCHEMA = [
    ("ex:Engineer", "rdfs:subClassOf", "ex:Person"),
    ("ex:worksFor", "rdfs:range", "ex:Organization"),
    ("ex:knows", "rdf:type", "owl:SymmetricProperty"),
]
FACTS = [
    ("ex:alice", "rdf:type", "ex:Engineer"),
    ("ex:alice", "ex:worksFor", "ex:acme"),
    ("ex:alice", "ex:knows", "ex:bob", "ex:social"),
    ("ex:alice", "rdfs:label", "Alice Smith"),
    ("ex:alice", "ex:age", 41),
]


async def _filled(path: Path | None = None) -> GraphStore:
    store = GraphStore(path)
    await store.add_many([*SCHEMA, *FACTS])
    return store


def test_terms_from_plain_values() -> None:
    async def main() -> None:
        store = GraphStore(prefixes={"ex": "http://example.org/"})
        await store.add("http://example.org/alice", "a", "<http://example.org/Person>")
        await store.add("ex:alice", "http://www.w3.org/2000/01/rdf-schema#label", "Alice")
        await store.add("alice", "likes", True)
        quads = store.quads()
        assert [(q.subject, q.predicate, q.object) for q in quads] == [
            (IRI("alice"), IRI("likes"), Literal("true", "xsd:boolean")),
            (IRI("ex:alice"), IRI("rdf:type"), IRI("ex:Person")),
            (IRI("ex:alice"), IRI("rdfs:label"), Literal("Alice")),
        ]
        assert quads[2].object.key == '"Alice"'

    arun(main())


@pytest.mark.parametrize(
    "fact",
    [
        ("", "ex:p", "ex:o"),
        ("ex:s", "   ", "ex:o"),
        ("ex:s", "ex:p", ""),
        ("Alice Smith", "ex:p", "ex:o"),
        ("ex:s", "has friend", "ex:o"),
        ("ex:" + "x" * 3000, "ex:p", "ex:o"),
        ("ex:s", "ex:p", "y" * 3000),
        ("ex:s", "ex:p", float("nan")),
        ("ex:s", "ex:p", ["a list"]),
        (Literal("lit"), "ex:p", "ex:o"),
        ("ex:s", "ex:p", "ex:o", ENTAILED_GRAPH),
        ("ex:s", "ex:p"),
    ],
    ids=[
        "empty-subject",
        "blank-predicate",
        "empty-object",
        "subject-with-space",
        "predicate-with-space",
        "long-subject",
        "long-literal",
        "nan",
        "list-object",
        "literal-subject",
        "entailed-graph",
        "two-terms",
    ],
)
def test_bad_terms_raise_graph_term_invalid(fact: tuple[Any, ...]) -> None:
    store = GraphStore()
    with pytest.raises(GraphTermError) as info:
        arun(store.add_many([fact]))
    assert info.value.code == "GRAPH_TERM_INVALID"
    assert store.closure_size == 0


def test_patterns_and_graph_filters() -> None:
    async def main() -> None:
        store = await _filled()
        assert {q.graph for q in store.quads("ex:alice", "ex:knows")} == {"ex:social"}
        assert store.quads("ex:bob", "ex:knows", "ex:alice")[0].graph == ENTAILED_GRAPH
        entailed = store.quads(graph=ENTAILED_GRAPH)
        assert {(q.subject.key, q.object.key) for q in entailed} == {
            ("ex:alice", "ex:Person"),
            ("ex:acme", "ex:Organization"),
            ("ex:bob", "ex:alice"),
        }
        assert len(store.quads(graph=None)) == len(SCHEMA) + len(FACTS) - 1
        assert store.quads(graph="ex:social")[0].object == IRI("ex:bob")
        assert store.quads(graph="ex:nowhere") == []
        assert store.quads("ex:nobody") == []
        assert store.quads(object=41)[0].predicate == IRI("ex:age")
        assert store.closure_size == len(SCHEMA) + len(FACTS) + 3
        assert store.asserted_count == len(SCHEMA) + len(FACTS)
        assert not await store.add(*FACTS[0])  # type: ignore[arg-type]
        assert not await store.remove("ex:nobody", "ex:p", "ex:o")

    arun(main())


def test_export_drops_entailments_and_import_restores_the_closure() -> None:
    async def main() -> None:
        store = await _filled()
        state = store.export_state()
        assert json.loads(json.dumps(state)) == state
        assert state["version"] == 1
        assert len(state["quads"]) == len(SCHEMA) + len(FACTS)
        assert ENTAILED_GRAPH not in json.dumps(state)
        assert ["ex:alice", "ex:knows", "ex:bob", "ex:social"] in state["quads"]
        assert ["ex:alice", "rdfs:label", {"literal": "Alice Smith"}, None] in state["quads"]
        other = GraphStore()
        await other.add("ex:stale", "ex:p", "ex:o")
        await other.import_state(state)
        assert other.quads() == store.quads()
        assert other.export_state() == state
        assert other.relevant("alice", 5) == store.relevant("alice", 5)

    arun(main())


@pytest.mark.parametrize(
    "state",
    [
        [],
        {"format": "framework-agents.graph", "version": 1},
        {"format": "other", "version": 1, "quads": []},
        {"format": "framework-agents.graph", "version": 2, "quads": []},
        {"format": "framework-agents.graph", "version": "1", "quads": []},
        {"format": "framework-agents.graph", "version": 1, "quads": [], "extra": 1},
        {"format": "framework-agents.graph", "version": 1, "quads": [["ex:s", "ex:p"]]},
        {"format": "framework-agents.graph", "version": 1, "quads": [["", "ex:p", "ex:o", None]]},
        {"format": "framework-agents.graph", "version": 1, "quads": [["ex:s", "ex:p", 3, None]]},
        {
            "format": "framework-agents.graph",
            "version": 1,
            "quads": [["ex:s", "ex:p", {"literal": "x", "oops": 1}, None]],
        },
        {
            "format": "framework-agents.graph",
            "version": 1,
            "quads": [["ex:s", "ex:p", "ex:o", ENTAILED_GRAPH]],
        },
    ],
    ids=[
        "not-a-dict",
        "missing-quads",
        "wrong-format",
        "newer-version",
        "string-version",
        "unknown-key",
        "short-quad",
        "empty-subject",
        "number-object",
        "unknown-literal-key",
        "entailed-graph",
    ],
)
def test_import_rejects_malformed_states(state: Any) -> None:
    async def main() -> None:
        store = await _filled()
        before = store.export_state()
        with pytest.raises(GraphStateError) as info:
            await store.import_state(state)
        assert info.value.code == "GRAPH_STATE_INVALID"
        assert store.export_state() == before

    arun(main())


def test_on_disk_store_survives_reopening(tmp_path: Path) -> None:
    async def main() -> None:
        store = await _filled(tmp_path / "g")
        await store.remove("ex:alice", "ex:age", 41)
        expected = store.quads()
        await store.close()
        assert (tmp_path / "g" / "graph.sqlite3").exists()
        async with GraphStore(tmp_path / "g") as again:
            assert again.quads() == expected
            await again.add("ex:bob", "rdf:type", "ex:Engineer")
        third = GraphStore(tmp_path / "g")
        assert third.contains("ex:bob", "rdf:type", "ex:Person")  # a sync read opens it
        await third.import_state({"format": "framework-agents.graph", "version": 1, "quads": []})
        await third.close()
        fourth = GraphStore(tmp_path / "g")
        await fourth.open()
        assert fourth.closure_size == 0
        await fourth.add("ex:x", "ex:p", "ex:y")
        await fourth.clear()
        await fourth.close()
        assert GraphStore(tmp_path / "g").closure_size == 0

    arun(main())


def test_corrupt_or_newer_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "graph.sqlite3").write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(GraphStoreCorruptError) as info:
        arun(GraphStore(bad).open())
    assert info.value.code == "GRAPH_STORE_CORRUPT"
    assert (bad / "graph.sqlite3").read_bytes() == b"this is not a database at all" * 100

    newer = tmp_path / "newer"
    arun(_close(GraphStore(newer)))
    with sqlite3.connect(newer / "graph.sqlite3") as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    with pytest.raises(GraphStoreCorruptError, match="newer"):
        arun(GraphStore(newer).open())

    broken = tmp_path / "broken"
    arun(_close(GraphStore(broken)))
    with sqlite3.connect(broken / "graph.sqlite3") as conn:
        conn.execute("INSERT INTO quads VALUES ('ex:s', 'ex:p', '{not json', '')")
    with pytest.raises(GraphStoreCorruptError, match="malformed"):
        arun(GraphStore(broken).open())


async def _close(store: GraphStore) -> None:
    await store.open()
    await store.close()


def test_concurrent_mutations_from_many_tasks(tmp_path: Path) -> None:
    async def main() -> None:
        store = GraphStore(tmp_path / "g")
        await store.add("ex:Cat", "rdfs:subClassOf", "ex:Animal")
        await asyncio.gather(*(store.add(f"ex:cat{i}", "rdf:type", "ex:Cat") for i in range(40)))
        await asyncio.gather(
            *(store.remove(f"ex:cat{i}", "rdf:type", "ex:Cat") for i in range(0, 40, 2))
        )
        assert len(store.quads(predicate="rdf:type", object="ex:Animal")) == 20
        await store.close()
        again = GraphStore(tmp_path / "g")
        assert len(again.quads(predicate="rdf:type", object="ex:Animal")) == 20

    arun(main())


def test_the_entailed_graph_can_be_read_under_any_spelling() -> None:
    async def main() -> None:
        store = await _filled()
        expected = store.quads(graph=ENTAILED_GRAPH)
        assert expected
        assert store.quads(graph=f"<{ENTAILED_GRAPH}>") == expected
        assert store.quads(graph=IRI(ENTAILED_GRAPH)) == expected  # type: ignore[arg-type]

    arun(main())


@pytest.mark.parametrize(
    "facts", [None, 5, "ex:s ex:p ex:o", b"x"], ids=["none", "int", "str", "bytes"]
)
@pytest.mark.parametrize("method", ["add_many", "remove_many"])
def test_fact_batches_that_are_not_lists_are_invalid_argument(method: str, facts: Any) -> None:
    from framework_agents.errors import InvalidArgumentError

    store = GraphStore()
    with pytest.raises(InvalidArgumentError) as info:
        arun(getattr(store, method)(facts))
    assert info.value.code == "INVALID_ARGUMENT"
