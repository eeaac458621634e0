"""An independent, deliberately naive reasoner: the test oracle for the closure.

It re-evaluates every rule over the whole triple set until nothing changes. Slow and
obviously correct; the store's semi-naive, incremental reasoner must agree with it.
"""

from __future__ import annotations

from framework_agents.graph import IRI, Literal

Triple = tuple[object, object, object]

TYPE, SUBC, SUBP = IRI("rdf:type"), IRI("rdfs:subClassOf"), IRI("rdfs:subPropertyOf")
DOM, RNG, INV, SAME = IRI("rdfs:domain"), IRI("rdfs:range"), IRI("owl:inverseOf"), IRI("owl:sameAs")
TRANS, SYM = IRI("owl:TransitiveProperty"), IRI("owl:SymmetricProperty")
EQC, EQP = IRI("owl:equivalentClass"), IRI("owl:equivalentProperty")


Index = dict[object, list[Triple]]


def _schema(by_p: Index, new: set[Triple]) -> None:
    """rdfs:domain, rdfs:range, rdfs:subPropertyOf and rdfs:subClassOf."""
    for p, _, c in by_p.get(DOM, []):
        new.update((s, TYPE, c) for s, _, _ in by_p.get(p, []))
    for p, _, c in by_p.get(RNG, []):
        new.update((o, TYPE, c) for _, _, o in by_p.get(p, []))
    for p, _, q in by_p.get(SUBP, []):
        new.update((s, q, o) for s, _, o in by_p.get(p, []))
        new.update((p, SUBP, r) for p2, _, r in by_p.get(SUBP, []) if p2 == q)
    for c, _, d in by_p.get(SUBC, []):
        new.update((s, TYPE, d) for s, _, k in by_p.get(TYPE, []) if k == c)
        new.update((c, SUBC, e) for c2, _, e in by_p.get(SUBC, []) if c2 == d)


def _properties(by_p: Index, new: set[Triple]) -> None:
    """owl:TransitiveProperty, owl:SymmetricProperty and owl:inverseOf."""
    for p, _, k in by_p.get(TYPE, []):
        if k == TRANS:
            pairs = by_p.get(p, [])
            new.update((x, p, z) for x, _, y in pairs for y2, _, z in pairs if y == y2)
        if k == SYM:
            new.update((y, p, x) for x, _, y in by_p.get(p, []))
    for p, _, q in by_p.get(INV, []):
        new.update((y, q, x) for x, _, y in by_p.get(p, []))
        new.update((y, p, x) for x, _, y in by_p.get(q, []))


def _equality(t: set[Triple], by_p: Index, new: set[Triple]) -> None:
    """owl:sameAs (symmetric, substituted in every position) and the equivalences."""
    for a, _, b in by_p.get(SAME, []):
        new.add((b, SAME, a))
        new.update((b, p, o) for s, p, o in t if s == a)
        new.update((s, b, o) for s, p, o in t if p == a)
        new.update((s, p, b) for s, p, o in t if o == a)
    for c, _, d in by_p.get(EQC, []):
        new.update({(c, SUBC, d), (d, SUBC, c)})
    for p, _, q in by_p.get(EQP, []):
        new.update({(p, SUBP, q), (q, SUBP, p)})


def _step(t: set[Triple]) -> set[Triple]:
    new: set[Triple] = set()
    by_p: Index = {}
    for x in t:
        by_p.setdefault(x[1], []).append(x)
    _schema(by_p, new)
    _properties(by_p, new)
    _equality(t, by_p, new)
    # Generalised triples (a literal as subject or predicate) are not RDF: drop them.
    return {x for x in new if isinstance(x[0], IRI) and isinstance(x[1], IRI)}


def naive_closure(base: set[Triple]) -> set[Triple]:
    """The fixpoint of the rules over ``base``, by brute-force re-evaluation."""
    t = set(base)
    while True:
        more = _step(t) - t
        if not more:
            return t
        t |= more


__all__ = ["Literal", "naive_closure"]
