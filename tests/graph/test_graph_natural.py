"""graph_add and graph_query take names as models write them (graph/natural.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from async_helper import arun
from framework_agents.errors import GraphTermError
from framework_agents.graph import IRI, GraphStore, Literal
from framework_agents.graph.natural import entity_iri, predicate_iri
from framework_agents.graph.tools import graph_tools


@pytest.mark.parametrize(
    ("name", "iri"),
    [
        ("Alice Smith", "ex:AliceSmith"),
        ("alice smith", "ex:AliceSmith"),
        ("  ALICE   SMITH ", "ex:AliceSmith"),
        ("O'Brien & Sons", "ex:ObrienSons"),
        ("St. Mary's Hospital", "ex:StMarysHospital"),
        ("Zoë", "ex:Zoë"),
        ("東京大学", "ex:東京大学"),
        ("R2 D2", "ex:R2D2"),
    ],
    ids=["spaced", "lower", "upper-padded", "punctuation", "apostrophe", "accent", "cjk", "digits"],
)
def test_entity_names_map_to_one_stable_iri(name: str, iri: str) -> None:
    assert entity_iri(name) == IRI(iri)


def test_relation_phrases_map_to_camel_case_predicates() -> None:
    assert predicate_iri("works at") == IRI("ex:worksAt")
    assert predicate_iri("Works At") == IRI("ex:worksAt")
    assert predicate_iri("favorite color") == IRI("ex:favoriteColor")
    assert predicate_iri("likes", "my:") == IRI("my:likes")
    with pytest.raises(GraphTermError):
        predicate_iri("...")


async def _add(store: GraphStore, subject: Any, predicate: Any, obj: Any) -> str:
    add = graph_tools(store)[0]
    return str(await add.invoke({"subject": subject, "predicate": predicate, "object": obj}))


@pytest.mark.parametrize(
    ("args", "triple"),
    [
        (("Alice", "is a", "Engineer"), ("ex:Alice", "rdf:type", "ex:Engineer")),
        (("Alice", "is an", "engineer"), ("ex:Alice", "rdf:type", "ex:Engineer")),
        (("Alice", "type", "a software engineer"), ("ex:Alice", "rdf:type", "ex:SoftwareEngineer")),
        (("Alice", "a", "ex:Engineer"), ("ex:Alice", "rdf:type", "ex:Engineer")),
        (("Engineer", "subclass of", "Person"), ("ex:Engineer", "rdfs:subClassOf", "ex:Person")),
        (("cats", "are a kind of", "animals"), ("ex:Cats", "rdfs:subClassOf", "ex:Animals")),
        (("Alice", "same as", "Ali"), ("ex:Alice", "owl:sameAs", "ex:Ali")),
        (("Alice", "is called", "Ali"), ("ex:Alice", "rdfs:label", Literal("Ali"))),
        (("Alice", "works at", "Acme Corp"), ("ex:Alice", "ex:worksAt", "ex:AcmeCorp")),
        (("Alice", "lives in", "New York"), ("ex:Alice", "ex:livesIn", "ex:NewYork")),
        (
            ("Bob", "works at", "St. Mary's Hospital"),
            ("ex:Bob", "ex:worksAt", "ex:StMarysHospital"),
        ),
        (("Alice", "favorite color", "green"), ("ex:Alice", "ex:favoriteColor", Literal("green"))),
        (
            ("Alice", "said", "Hello, World."),
            ("ex:Alice", "ex:said", Literal("Hello, World.")),
        ),
        (("Alice", "age", 41), ("ex:Alice", "ex:age", 41)),
        (("ex:alice", "ex:knows", "ex:bob"), ("ex:alice", "ex:knows", "ex:bob")),
        (("ex:alice", "ex:nick", "Ally B"), ("ex:alice", "ex:nick", "ex:AllyB")),
        (("ex:alice", "manages", "the plan"), ("ex:alice", "ex:manages", Literal("the plan"))),
    ],
    ids=[
        "is-a",
        "is-an-lowercase-class",
        "type-with-article",
        "explicit-class",
        "subclass",
        "kind-of",
        "same-as",
        "is-called",
        "proper-name-object",
        "place",
        "name-with-dot-and-apostrophe",
        "text-object",
        "sentence-object",
        "number",
        "curies-unchanged",
        "capitalised-name",
        "lowercase-text",
    ],
)
def test_graph_add_maps_natural_arguments(args: tuple[Any, ...], triple: tuple[Any, ...]) -> None:
    async def main() -> None:
        store = GraphStore()
        answer = await _add(store, *args)
        assert answer.startswith("Recorded: ")
        assert store.contains(*triple) and not store.is_entailed(*triple)

    arun(main())


def test_entity_resolution_joins_spellings_and_labels() -> None:
    async def main() -> None:
        store = GraphStore()
        await store.add("ex:alice", "rdfs:label", "Alice Smith")
        answer = await _add(store, "alice smith", "works at", "Acme Corp")
        assert answer.startswith("Recorded: ex:alice ex:worksAt ex:AcmeCorp.")
        await _add(store, "ALICE SMITH", "likes", "acme corp")  # known now: an entity
        assert store.contains("ex:alice", "ex:likes", "ex:AcmeCorp")
        again = await _add(store, "Alice  Smith", "works at", "acme corp")
        assert again.startswith("Already known: ex:alice ex:worksAt ex:AcmeCorp.")
        # One label per entity: later spellings add none.
        assert len(store.quads("ex:AcmeCorp", "rdfs:label")) == 1
        assert len(store.quads("ex:alice", "rdfs:label")) == 1
        assert store.quads("ex:AliceSmith") == []

    arun(main())


def test_the_answer_says_how_each_name_was_stored() -> None:
    async def main() -> None:
        store = GraphStore()
        await store.add("ex:Engineer", "rdfs:subClassOf", "ex:Person")
        answer = await _add(store, "Alice Smith", "is an", "Engineer")
        assert answer == (
            "Recorded: ex:AliceSmith rdf:type ex:Engineer. Stored as: 'Alice Smith' -> "
            "ex:AliceSmith; 'is an' -> rdf:type; 'Engineer' -> ex:Engineer. Labelled: "
            'ex:AliceSmith "Alice Smith". Inferred about ex:AliceSmith: ex:AliceSmith '
            "rdf:type ex:Person (inferred)."
        )

    arun(main())


def test_a_refused_name_stores_nothing_not_even_labels() -> None:
    async def main() -> None:
        store = GraphStore()
        with pytest.raises(GraphTermError):
            await _add(store, "Alice Smith", "works at", "ex:a<b>")
        assert store.closure_size == 0

    arun(main())


def test_graph_query_patterns_take_names_too() -> None:
    async def main() -> None:
        store = GraphStore()
        await _add(store, "Alice Smith", "works at", "Acme Corp")
        await _add(store, "Alice Smith", "favorite color", "green")
        query = graph_tools(store)[1]
        found = await query.invoke({"subject": "alice smith", "predicate": "works at"})
        assert found == "ex:AliceSmith ex:worksAt ex:AcmeCorp"
        by_object = await query.invoke({"object": "acme corp"})
        assert by_object == "ex:AliceSmith ex:worksAt ex:AcmeCorp"
        by_text = await query.invoke({"predicate": "favorite color", "object": "green"})
        assert by_text == 'ex:AliceSmith ex:favoriteColor "green"'
        assert await query.invoke({"subject": "Nobody Here"}) == "No matching facts."

    arun(main())


_NAME_WORDS = st.text(alphabet=st.characters(categories=["Lu", "Ll", "Nd"]), min_size=1, max_size=8)


@given(st.lists(_NAME_WORDS, min_size=1, max_size=4), st.sampled_from([" ", "  ", "\t", " \n "]))
def test_an_entity_is_one_iri_however_its_name_is_cased_or_spaced(
    words: list[str], gap: str
) -> None:
    name = " ".join(words)
    iri = entity_iri(name)
    assert entity_iri(name.upper()) == entity_iri(name.lower()) == iri
    assert entity_iri(f"  {gap.join(words)} ") == iri
    assert not any(c.isspace() for c in iri.value)
