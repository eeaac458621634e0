"""relevant() over relations, labels, CJK and accents: what people actually ask."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from async_helper import arun
from framework_agents.graph import GraphStore

ISSUE_WORLD = [
    ("ex:alice", "ex:favoriteColor", "green"),
    ("ex:alice", "ex:worksFor", "ex:acme"),
    ("ex:bob", "ex:likes", "ex:jazz"),
]


async def _store(facts: list[tuple[Any, ...]]) -> GraphStore:
    store = GraphStore()
    await store.add_many(facts)
    return store


def _texts(store: GraphStore, query: str, k: int = 8) -> list[str]:
    return [f.text for f in store.relevant(query, k)]


def test_questions_about_a_relation_find_its_facts() -> None:
    async def main() -> None:
        store = await _store(ISSUE_WORLD)
        assert _texts(store, "what is her favorite color?") == ['ex:alice ex:favoriteColor "green"']
        assert _texts(store, "who does she work for") == ["ex:alice ex:worksFor ex:acme"]
        assert _texts(store, "what does someone like") == ["ex:bob ex:likes ex:jazz"]
        assert _texts(store, "where is she working?") == ["ex:alice ex:worksFor ex:acme"]

    arun(main())


def test_the_named_entity_facts_come_before_other_facts_of_the_relation() -> None:
    async def main() -> None:
        store = await _store(
            [
                *ISSUE_WORLD,
                ("ex:carol", "ex:worksFor", "ex:globex"),
                ("ex:dave", "ex:worksFor", "ex:initech"),
                ("ex:bob", "ex:worksFor", "ex:acme"),
            ]
        )
        assert _texts(store, "who does alice work for")[0] == "ex:alice ex:worksFor ex:acme"
        assert _texts(store, "who does bob work for")[0] == "ex:bob ex:worksFor ex:acme"
        # Without a name, the relation alone still finds its facts.
        assert len(_texts(store, "who works for whom")) == 4

    arun(main())


def test_a_predicate_label_is_searchable() -> None:
    async def main() -> None:
        store = await _store(
            [
                ("ex:p1", "ex:r7", "ex:q2"),
                ("ex:r7", "rdfs:label", "is married to"),
            ]
        )
        assert "ex:p1 ex:r7 ex:q2" in _texts(store, "who is she married to")
        await store.remove("ex:r7", "rdfs:label", "is married to")
        assert _texts(store, "married") == []

    arun(main())


def test_an_entity_label_matches_like_its_name() -> None:
    async def main() -> None:
        store = await _store(
            [
                ("ex:e1", "rdfs:label", "Alice Smith"),
                ("ex:e1", "ex:livesIn", "ex:e2"),
                ("ex:e2", "rdfs:label", "Paris"),
                ("ex:e3", "ex:livesIn", "ex:e4"),
            ]
        )
        assert _texts(store, "where does alice smith live", 1) == ["ex:e1 ex:livesIn ex:e2"]

    arun(main())


def test_cjk_names_match_in_part() -> None:
    async def main() -> None:
        store = await _store(
            [
                ("ex:todai", "rdfs:label", "東京大学"),
                ("ex:todai", "ex:locatedIn", "ex:japan"),
                ("ex:kyodai", "rdfs:label", "京都大学"),
                ("ex:kim", "rdfs:label", "김민수"),
                ("ex:kim", "ex:worksFor", "ex:samsung"),
                ("ex:shop", "rdfs:label", "北京烤鸭店"),
            ]
        )
        assert _texts(store, "東京", 2) == [
            'ex:todai rdfs:label "東京大学"',
            "ex:todai ex:locatedIn ex:japan",
        ]
        assert _texts(store, "京都はどこですか", 1) == ['ex:kyodai rdfs:label "京都大学"']
        both = _texts(store, "大学")
        assert 'ex:todai rdfs:label "東京大学"' in both
        assert 'ex:kyodai rdfs:label "京都大学"' in both
        assert "ex:kim ex:worksFor ex:samsung" in _texts(store, "민수 work")
        assert _texts(store, "烤鸭", 1) == ['ex:shop rdfs:label "北京烤鸭店"']

    arun(main())


def test_accents_fold_both_ways() -> None:
    async def main() -> None:
        store = await _store(
            [("ex:zoe", "rdfs:label", "Zoë Müller"), ("ex:zoe", "ex:likes", "crème brûlée")]
        )
        assert 'ex:zoe ex:likes "crème brûlée"' in _texts(store, "what does zoe muller like")
        assert 'ex:zoe ex:likes "crème brûlée"' in _texts(store, "CREME BRULEE")

    arun(main())


# -- property: every fact is found by its subject's label and its relation words ----------

_FIRST = [
    "Alice",
    "Bruno",
    "Chen",
    "Dora",
    "Emil",
    "Farah",
    "Goran",
    "Hana",
    "Ivo",
    "Jana",
    "Kofi",
    "Lars",
    "Mina",
]
_LAST = [
    "Abbott",
    "Baxter",
    "Cortez",
    "Dunmore",
    "Eastwood",
    "Fairley",
    "Garnet",
    "Holloway",
    "Ingram",
]
# Relation words no other word stems into and none a stop word.
_RELATION = [
    "owns",
    "admires",
    "visited",
    "teaches",
    "funds",
    "mentors",
    "sponsors",
    "builds",
    "repairs",
]
_COLOUR = ["green", "blue", "amber", "violet", "teal", "crimson", "ochre"]


@st.composite
def _worlds(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    names = draw(
        st.lists(
            st.tuples(st.sampled_from(_FIRST), st.sampled_from(_LAST)),
            min_size=2,
            max_size=6,
            unique_by=lambda n: n[0],
        )
    )
    facts: list[tuple[str, str, str]] = []
    for i, (first, last) in enumerate(names):
        facts.append((f"ex:e{i}", "rdfs:label", f"{first} {last}"))
    relations = draw(st.lists(st.sampled_from(_RELATION), min_size=1, max_size=4, unique=True))
    for i in range(len(names)):
        for rel in draw(st.lists(st.sampled_from(relations), max_size=3, unique=True)):
            predicate = f"ex:{rel}Often" if draw(st.booleans()) else f"ex:{rel}"
            if draw(st.booleans()):
                obj = f"ex:e{draw(st.integers(0, len(names) - 1))}"
            else:
                obj = draw(st.sampled_from(_COLOUR))
            facts.append((f"ex:e{i}", predicate, obj))
    return facts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_worlds())
def test_every_fact_is_found_by_its_subject_label_and_relation_words(
    facts: list[tuple[str, str, str]],
) -> None:
    async def main() -> None:
        store = await _store(facts)
        labels = {s: o for s, p, o in facts if p == "rdfs:label"}
        everything = len(facts)
        for s, p, o in facts:
            if p == "rdfs:label":
                continue
            [quad] = store.quads(s, p, o)
            line = f"{s} {p} {quad.object.key}"
            words = p.removeprefix("ex:").replace("Often", " often")
            for query, k in ((f"{labels[s]} {words}", 8), (labels[s], everything), (words, 48)):
                found = [f.text for f in store.relevant(query, k)]
                assert line in found, (query, found)

    arun(main())
