"""relevant(): tokenizer, sensible ranking, neighbourhood expansion, determinism."""

from __future__ import annotations

import random
from typing import Any

import pytest

from async_helper import arun
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


async def _world(facts: list[tuple[Any, ...]] = WORLD) -> GraphStore:
    store = GraphStore()
    await store.add_many(facts)
    return store


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("ex:worksFor", ["ex", "work"]),
        ("HTTPServer logs", ["http", "server", "log"]),
        ("lives_in Paris", ["liv", "paris"]),
        ("Where does Alice work?", ["alic", "work"]),
        ("companies classes", ["company", "class"]),
        ("Person42", ["person", "42"]),
        ("Alice's employer", ["alic", "employer"]),
        ("Who\u2019s Bob\u2019s boss? He doesn't know", ["bob", "boss"]),
        ("Zoe\u0308 \uff21\uff2c\uff29\uff23\uff25", ["zoe", "alic"]),
        ("Zoë Ärger Café", ["zoe", "arger", "caf"]),
        ("works worked working work", ["work"] * 4),
        ("likes liked like", ["lik"] * 3),
        ("stopped running", ["stop", "run"]),
        ("ex:favoriteColor", ["ex", "favorit", "color"]),
        ("東京大学", ["東", "京", "大", "学", "東京", "京大", "大学"]),
        ("大学はどこ", ["大", "学", "大学", "学は", "はど", "どこ"]),
        ("서울 Tower", ["서", "울", "서울", "tower"]),
    ],
    ids=[
        "curie",
        "acronym",
        "snake",
        "question",
        "plurals",
        "digits",
        "possessive",
        "contractions",
        "unicode-forms",
        "diacritics",
        "verb-forms",
        "final-e",
        "doubled-consonant",
        "predicate-words",
        "cjk-n-grams",
        "kana-pairs-only",
        "hangul",
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_label_tokens_use_local_names() -> None:
    assert label_tokens(IRI("http://example.org/people/AliceSmith")) == ["alic", "smith"]
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

    arun(main())


def test_neighbourhood_expansion_reaches_facts_about_neighbours() -> None:
    async def main() -> None:
        store = await _world()
        texts = [f.text for f in store.relevant("alice smith", 10)]
        assert "ex:acmeCorp ex:locatedIn ex:paris" in texts  # two hops from the match
        assert not any("berlin" in t or "jazz" in t for t in texts)  # unrelated: not returned

    arun(main())


def test_literal_labels_match_and_lead_to_their_entity() -> None:
    async def main() -> None:
        store = await _world()
        texts = [f.text for f in store.relevant("What does Zebulon own?", 2)]
        assert texts == [
            'ex:p17 rdfs:label "Zebulon Quartermain"',
            "ex:p17 ex:owns ex:boat3",
        ]

    arun(main())


def test_entailed_facts_are_marked() -> None:
    async def main() -> None:
        store = await _world()
        found = {f.text: f for f in store.relevant("acme organization", 10)}
        fact = found["ex:acmeCorp rdf:type ex:Organization (inferred)"]
        assert fact.entailed and fact.graph == "urn:x-framework-agents:entailed"
        assert not found["ex:aliceSmith ex:worksFor ex:acmeCorp"].entailed

    arun(main())


def test_no_match_and_no_k_give_nothing() -> None:
    async def main() -> None:
        store = await _world()
        assert store.relevant("the of and", 5) == []
        assert store.relevant("unicorns", 5) == []
        assert store.relevant("alice", 0) == []
        assert GraphStore().relevant("alice", 5) == []

    arun(main())


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

    arun(main())


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

    store = arun(_world())
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

    arun(main())


def test_a_query_after_a_change_to_a_hub_does_not_rescan_the_hub(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Work per query is bounded by the caps, not by the size of a hub that just changed."""
    from framework_agents.graph._table import TermTable

    async def work(hub_size: int) -> list[int]:
        store = GraphStore()
        await store.add_many(
            [(f"ex:e{i}", "rdf:type", "ex:Engineer") for i in range(hub_size)]
            + [("ex:Engineer", "rdfs:subClassOf", "ex:Person")]
        )
        query = "which type of engineer"  # a hub class and the rdf:type predicate
        store.relevant(query, 8)  # warm the caches
        counts: list[int] = []
        calls = [0]
        original = TermTable.key

        def counting(self: TermTable, ident: int) -> str:
            calls[0] += 1
            return original(self, ident)

        for change in ("add", "remove", "add-first", "remove-first"):
            name = "ex:a0" if change.endswith("first") else f"ex:z{hub_size}"  # a0 sorts first
            if change.startswith("add"):
                await store.add(name, "rdf:type", "ex:Engineer")
            else:
                await store.remove(name, "rdf:type", "ex:Engineer")
            calls[0] = 0
            monkeypatch.setattr(TermTable, "key", counting)
            fresh = store.relevant(query, 8)
            monkeypatch.setattr(TermTable, "key", original)
            counts.append(calls[0])
            rebuilt = GraphStore()
            await rebuilt.add_many(
                [(q.subject, q.predicate, q.object) for q in store.quads(entailed=False)]
            )
            assert fresh == rebuilt.relevant(query, 8), change  # the caches stayed exact
            assert store.relevant(query, 200) == rebuilt.relevant(query, 200), change
        return counts

    small, large = arun(work(300)), arun(work(3000))
    assert all(big <= 2 * s + 200 for s, big in zip(small, large, strict=True)), (small, large)


def test_cached_hub_lists_stay_exact_under_random_changes() -> None:
    """Hubs and predicates grow past the caps and shrink back: rankings stay exact."""

    async def main() -> None:
        rnd = random.Random(11)
        store = GraphStore()
        asserted: list[tuple[str, str, str]] = []
        # "mentor" reaches its facts only through the predicate; "engineer" and "pilot"
        # through hub classes.
        queries = ["mentor", "engineer", "pilot type", "x7 mentor"]
        for step in range(1000):
            grow = (step // 250) % 2 == 0  # grow, shrink, grow, shrink
            if asserted and rnd.random() < (0.1 if grow else 0.7):
                await store.remove(*asserted.pop(rnd.randrange(len(asserted))))
            else:
                s, roll = f"ex:x{rnd.randrange(300)}", rnd.random()
                fact = (
                    (s, "ex:mentors", f"ex:x{rnd.randrange(300)}")
                    if roll < 0.3
                    else (s, "rdf:type", "ex:Engineer" if roll < 0.8 else "ex:Pilot")
                )
                if await store.add(*fact):
                    asserted.append(fact)
            if step % 10 == 9:
                fresh = GraphStore()
                await fresh.add_many(asserted)
                for q in queries:
                    found = store.relevant(q, 200)  # every candidate: ties hide nothing
                    assert found == fresh.relevant(q, 200), (step, q)

    arun(main())


def _scenario_fact(kind: str, i: int) -> tuple[str, str, str]:
    if kind == "hub":  # reached through the class node ex:Engineer
        return (f"ex:n{i:03d}", "rdf:type", "ex:Engineer")
    return (f"ex:n{i:03d}", "ex:mentors", f"ex:m{i:03d}")  # through the predicate only


@pytest.mark.parametrize("kind", ["hub", "predicate"])
def test_cached_lists_cross_every_threshold_exactly(kind: str) -> None:
    """Grow a cached list past its buffer, empty its head, drop its tail: always exact."""
    query = "engineer" if kind == "hub" else "mentor"

    async def main() -> None:
        store = GraphStore()
        live: set[int] = set()

        async def change(add: list[int] = [], remove: list[int] = []) -> None:  # noqa: B006
            for i in add:
                await store.add(*_scenario_fact(kind, i))
                live.add(i)
            for i in remove:
                await store.remove(*_scenario_fact(kind, i))
                live.discard(i)
            fresh = GraphStore()
            await fresh.add_many([_scenario_fact(kind, i) for i in sorted(live)])
            assert store.relevant(query, 200) == fresh.relevant(query, 200), (add, remove)

        # A complete list (60 facts) overflows its buffer (96) and must know it.
        await change(add=list(range(0, 120, 2)))
        await change(add=list(range(1, 80, 2)))  # interleaved keys: the tail falls off
        await change(remove=sorted(live)[:60])  # the head goes: fewer than 48 listed remain
        # An incomplete list loses its last listed fact, then enough of its head.
        await change(add=list(range(200, 400)))
        store.relevant(query, 8)  # build the list: the first 96 facts by key
        listed = sorted(live)[:96]
        await change(remove=[listed[-1]])
        await change(remove=listed[:48])
        await change(remove=sorted(live)[: len(live) - 50])  # near the hub threshold
        await change(remove=sorted(live)[:3])  # below it: no cached list in use

    arun(main())


def test_the_graph_of_a_fact_asserted_in_several_graphs_is_canonical() -> None:
    async def build(graphs: list[str | None]) -> GraphStore:
        store = GraphStore()
        await store.add("ex:other", "ex:p", "ex:o", graph=graphs[-1])  # interns graphs in order
        for graph in graphs:
            await store.add("ex:alice", "ex:knows", "ex:bob", graph=graph)
        return store

    async def main() -> None:
        for graphs, expected in (
            (["ex:g2", "ex:g1"], "ex:g1"),
            (["ex:g1", "ex:g2"], "ex:g1"),
            (["ex:g2", None], None),
            ([None, "ex:g2"], None),
        ):
            store = await build([*graphs])
            [fact] = [f for f in store.relevant("alice", 5) if f.subject == IRI("ex:alice")]
            assert fact.graph == expected, graphs

    arun(main())


def test_unicode_forms_and_possessives_match_the_same_entity() -> None:
    async def main() -> None:
        store = await _world(
            [
                ("ex:zoe", "rdfs:label", "Zoë Café"),  # composed
                ("ex:alice", "ex:worksFor", "ex:acme"),
                ("ex:alice", "owl:sameAs", "ex:aliceS"),
            ]
        )
        for query in ("Zoe\u0308", "ZOË", "cafe\u0301", "\uff5a\uff4f\u00eb"):
            assert [f.subject.key for f in store.relevant(query, 1)] == ["ex:zoe"], query
        top = store.relevant("Alice's employer", 1)[0]
        assert top.text == "ex:alice ex:worksFor ex:acme"  # not a fact of ex:alice*S*

    arun(main())


def test_an_exact_entity_match_outranks_its_neighbours_facts() -> None:
    async def main() -> None:
        store = await _world()
        ranked = store.relevant("acmeCorp", 20)
        names = {"ex:acmeCorp"}
        direct = [f for f in ranked if {f.subject.key, f.object.key} & names]
        around = [f for f in ranked if not {f.subject.key, f.object.key} & names]
        assert direct and around  # the expansion reached the neighbours' facts
        assert min(f.score for f in direct) > max(f.score for f in around)
        assert ranked[: len(direct)] == direct
        # The neighbours' facts are those of entities one hop from the match.
        hop = {"ex:aliceSmith", "ex:paris", "ex:Organization"}
        assert all({f.subject.key, f.object.key} & hop for f in around)

    arun(main())
