"""relevant(): tokenizer, sensible ranking, neighbourhood expansion, determinism."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from framework_agents.graph import IRI, GraphStore, Literal
from framework_agents.graph.retrieval import label_tokens, tokenize

WORLD = [
    ("ex:Engineer", "rdfs:subClassOf", "ex:Person"),
    ("ex:worksFor", "rdfs:range", "ex:Organization"),
    ("ex:aliceSmith", "rdf:type", "ex:Engineer"),
    ("ex:aliceSmith", "ex:worksFor", "ex:acmeCorp"),
    ("ex:acmeCorp", "ex:locatedIn", "ex:paris"),
    ("ex:bobJones", "ex:worksFor", "ex:globex"),
    ("ex:bobJones", "ex:likes", "ex:jazzMusic"),
    ("ex:globex", "ex:locatedIn", "ex:berlin"),
    ("ex:p17", "rdfs:label", "Zebulon Quartermain"),
    ("ex:p17", "ex:owns", "ex:boat3"),
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _world(facts: list[tuple[Any, ...]] = WORLD) -> GraphStore:
    store = GraphStore()
    await store.add_many(facts)
    return store


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("ex:worksFor", ["ex", "work"]),
        ("HTTPServer logs", ["http", "server", "log"]),
        ("lives_in Paris", ["live", "paris"]),
        ("Where does Alice work?", ["alice", "work"]),
        ("companies classes", ["company", "class"]),
        ("Person42", ["person", "42"]),
    ],
    ids=["curie", "acronym", "snake", "question", "plurals", "digits"],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_label_tokens_use_local_names() -> None:
    assert label_tokens(IRI("http://example.org/people/AliceSmith")) == ["alice", "smith"]
    assert label_tokens(IRI("ex:hasParent")) == ["parent"]
    assert label_tokens(Literal("Zebulon Q.")) == ["zebulon", "q"]


def test_ranks_the_facts_about_the_named_entity_first() -> None:
    async def main() -> None:
        store = await _world()
        top = store.relevant("Where does Alice work?", 3)
        assert top[0].text == "ex:aliceSmith ex:worksFor ex:acmeCorp"
        texts = [f.text for f in store.relevant("Where does Alice work?", 6)]
        assert "ex:aliceSmith rdf:type ex:Person (inferred)" in texts
        assert not any("bobJones" in t for t in texts[:3])
        assert [f.score for f in top] == sorted((f.score for f in top), reverse=True)

    run(main())


def test_neighbourhood_expansion_reaches_facts_about_neighbours() -> None:
    async def main() -> None:
        store = await _world()
        texts = [f.text for f in store.relevant("alice smith", 10)]
        assert "ex:acmeCorp ex:locatedIn ex:paris" in texts  # two hops from the match
        assert not any("berlin" in t or "jazz" in t for t in texts)  # unrelated: not returned

    run(main())


def test_literal_labels_match_and_lead_to_their_entity() -> None:
    async def main() -> None:
        store = await _world()
        texts = [f.text for f in store.relevant("What does Zebulon own?", 2)]
        assert texts == [
            'ex:p17 rdfs:label "Zebulon Quartermain"',
            "ex:p17 ex:owns ex:boat3",
        ]

    run(main())


def test_entailed_facts_are_marked() -> None:
    async def main() -> None:
        store = await _world()
        found = {f.text: f for f in store.relevant("acme organization", 10)}
        fact = found["ex:acmeCorp rdf:type ex:Organization (inferred)"]
        assert fact.entailed and fact.graph == "urn:x-framework-agents:entailed"
        assert not found["ex:aliceSmith ex:worksFor ex:acmeCorp"].entailed

    run(main())


def test_no_match_and_no_k_give_nothing() -> None:
    async def main() -> None:
        store = await _world()
        assert store.relevant("the of and", 5) == []
        assert store.relevant("unicorns", 5) == []
        assert store.relevant("alice", 0) == []
        assert GraphStore().relevant("alice", 5) == []

    run(main())


def test_ranking_is_a_function_of_the_closure_not_of_history() -> None:
    facts = list(WORLD)
    facts += [(f"ex:alice{i}", "rdf:type", "ex:Engineer") for i in range(80)]  # a hub class
    facts += [(f"ex:alice{i}", "ex:worksFor", "ex:acmeCorp") for i in range(0, 80, 3)]
    queries = ["alice", "engineer at acme", "who works in paris", "person", "zebulon boat"]

    async def main() -> None:
        first = await _world(facts)
        shuffled = list(facts)
        random.Random(3).shuffle(shuffled)
        second = GraphStore()
        for fact in shuffled:
            await second.add(*fact)
        await second.add("ex:temp", "rdf:type", "ex:Engineer")  # and an add + remove
        await second.remove("ex:temp", "rdf:type", "ex:Engineer")
        for q in queries:
            a, b = first.relevant(q, 12), second.relevant(q, 12)
            assert a == b, q
            assert a == first.relevant(q, 12)  # repeatable (hub caches included)
            keys = [(-f.score, f.entailed, f.subject.key, f.predicate.key, f.object.key) for f in a]
            assert keys == sorted(keys)  # stable tie-break order

    run(main())


@pytest.mark.parametrize(
    ("text", "k"),
    [
        ("alice", -1),
        ("alice", True),
        ("alice", 2.5),
        ("alice", "3"),
        ("alice", None),
        (None, 3),
        (5, 3),
        (b"alice", 3),
    ],
    ids=[
        "negative-k",
        "bool-k",
        "float-k",
        "str-k",
        "none-k",
        "none-text",
        "int-text",
        "bytes-text",
    ],
)
def test_bad_relevant_arguments_are_invalid_argument(text: Any, k: Any) -> None:
    from framework_agents.errors import InvalidArgumentError

    store = run(_world())
    with pytest.raises(InvalidArgumentError) as info:
        store.relevant(text, k)
    assert info.value.code == "INVALID_ARGUMENT"


def test_relevant_edge_values() -> None:
    async def main() -> None:
        store = await _world()
        assert store.relevant("", 5) == [] and store.relevant("   \n", 5) == []
        everything = store.relevant("alice acme paris bob jazz zebulon", 10**9)
        assert 0 < len(everything) <= store.closure_size
        assert everything == store.relevant("alice acme paris bob jazz zebulon", 10**6)

    run(main())
