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


def _step(t: set[Triple]) -> set[Triple]:
    new: set[Triple] = set()
    by_p: dict[object, list[Triple]] = {}
    for x in t:
        by_p.setdefault(x[1], []).append(x)
    for p, _, c in by_p.get(DOM, []):
        for s, _, _ in by_p.get(p, []):
            new.add((s, TYPE, c))
    for p, _, c in by_p.get(RNG, []):
        for _, _, o in by_p.get(p, []):
            new.add((o, TYPE, c))
    for p, _, q in by_p.get(SUBP, []):
        for s, _, o in by_p.get(p, []):
            new.add((s, q, o))
        for p2, _, r in by_p.get(SUBP, []):
            if p2 == q:
                new.add((p, SUBP, r))
    for c, _, d in by_p.get(SUBC, []):
        for s, _, k in by_p.get(TYPE, []):
            if k == c:
                new.add((s, TYPE, d))
        for c2, _, e in by_p.get(SUBC, []):
            if c2 == d:
                new.add((c, SUBC, e))
    for p, _, k in by_p.get(TYPE, []):
        if k == TRANS:
            for x, _, y in by_p.get(p, []):
                for y2, _, z in by_p.get(p, []):
                    if y == y2:
                        new.add((x, p, z))
        if k == SYM:
            for x, _, y in by_p.get(p, []):
                new.add((y, p, x))
    for p, _, q in by_p.get(INV, []):
        for x, _, y in by_p.get(p, []):
            new.add((y, q, x))
        for x, _, y in by_p.get(q, []):
            new.add((y, p, x))
    for a, _, b in by_p.get(SAME, []):
        new.add((b, SAME, a))
        for s, p, o in t:
            if s == a:
                new.add((b, p, o))
            if p == a:
                new.add((s, b, o))
            if o == a:
                new.add((s, p, b))
    for c, _, d in by_p.get(EQC, []):
        new.update({(c, SUBC, d), (d, SUBC, c)})
    for p, _, q in by_p.get(EQP, []):
        new.update({(p, SUBP, q), (q, SUBP, p)})
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
