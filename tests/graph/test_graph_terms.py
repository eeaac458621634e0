"""The term model: how plain values become IRIs and literals, and back from JSON."""

from __future__ import annotations

from typing import Any

import pytest

from framework_agents.errors import GraphTermError
from framework_agents.graph import IRI, Literal
from framework_agents.graph.terms import Position, term_from_json, term_to_json, to_term


@pytest.mark.parametrize(
    ("value", "position", "term"),
    [
        ("ex:Alice", "subject", IRI("ex:Alice")),
        ("Alice", "subject", IRI("Alice")),
        ("Alice", "object", Literal("Alice")),
        ("ex:Alice", "object", IRI("ex:Alice")),
        ("http://example.org/a#b", "object", IRI("http://example.org/a#b")),
        ("<urn:x>", "object", IRI("urn:x")),
        ("a", "predicate", IRI("rdf:type")),
        ("a", "object", Literal("a")),
        ("http://www.w3.org/2002/07/owl#sameAs", "predicate", IRI("owl:sameAs")),
        ("Note: buy milk", "object", Literal("Note: buy milk")),
        ("12:30", "object", Literal("12:30")),
        (42, "object", Literal("42", "xsd:integer")),
        (False, "object", Literal("false", "xsd:boolean")),
        (2.5, "object", Literal("2.5", "xsd:double")),
        (Literal("hi", lang="EN"), "object", Literal("hi", lang="en")),
    ],
    ids=[
        "curie",
        "bare-subject",
        "bare-object-is-literal",
        "curie-object",
        "full-iri",
        "angle-brackets",
        "a-is-rdf-type",
        "a-as-object",
        "compacted",
        "text-with-colon",
        "time",
        "int",
        "bool",
        "float",
        "lang-folded",
    ],
)
def test_to_term(value: Any, position: Position, term: Any) -> None:
    assert to_term(value, position) == term


@pytest.mark.parametrize(
    ("value", "position"),
    [
        ("", "subject"),
        ("ex:a b", "predicate"),
        ('ex:"quoted"', "subject"),
        (Literal("x"), "predicate"),
        (Literal("x", "xsd:string", "en"), "object"),
        (Literal("x", lang="not a tag"), "object"),
        (None, "object"),
        (float("inf"), "object"),
        ("bad \ud800 text", "object"),
        ("ex:\udc00", "subject"),
        (Literal("x", lang="e\ud800"), "object"),
        (10**2500, "object"),
        (-(10**5000), "object"),
    ],
    ids=[
        "empty",
        "space",
        "quote",
        "literal-predicate",
        "both",
        "bad-lang",
        "none",
        "inf",
        "lone-surrogate-literal",
        "lone-surrogate-iri",
        "lone-surrogate-lang",
        "long-int",
        "huge-int",
    ],
)
def test_to_term_rejects(value: Any, position: Position) -> None:
    with pytest.raises(GraphTermError) as info:
        to_term(value, position)
    assert info.value.code == "GRAPH_TERM_INVALID"
    assert str(info.value).startswith(f"[GRAPH_TERM_INVALID] {position}:")


@pytest.mark.parametrize(
    "term",
    [IRI("ex:a"), Literal("x"), Literal("1", "xsd:integer"), Literal('say "hi"', lang="en")],
    ids=["iri", "plain", "typed", "lang"],
)
def test_json_round_trip_and_keys(term: Any) -> None:
    assert term_from_json(term_to_json(term)) == term


def test_literal_keys_and_python_values() -> None:
    assert Literal('say "hi"', lang="en").key == '"say \\"hi\\""@en'
    assert Literal("1", "xsd:integer").key == '"1"^^xsd:integer'
    assert Literal("1", "xsd:integer").python() == 1
    assert Literal("true", "xsd:boolean").python() is True
    assert Literal("x", "xsd:integer").python() == "x"
