"""The reasoner: a materialised closure under RDFS and common OWL-RL rules.

Triples are tuples of integer term ids; IRIs have positive ids and literals negative ids,
so "may this be a subject" is ``id > 0``. The vocabulary the rules read has fixed ids
(:data:`VOCAB`); the store's term table reserves them.

Rules (W3C names; ``x``, ``y``, ``z`` any terms, conclusions only where the subject and
predicate are IRIs)::

    rdfs2    p domain c,        x p y          ->  x type c
    rdfs3    p range c,         x p y          ->  y type c
    rdfs5    p subPropertyOf q, q subPropertyOf r  ->  p subPropertyOf r
    rdfs7    p subPropertyOf q, x p y          ->  x q y
    rdfs9    c subClassOf d,    x type c       ->  x type d
    rdfs11   c subClassOf d,    d subClassOf e ->  c subClassOf e
    prp-trp  p type owl:TransitiveProperty, x p y, y p z  ->  x p z
    prp-symp p type owl:SymmetricProperty,  x p y         ->  y p x
    prp-inv1 p inverseOf q,     x p y          ->  y q x
    prp-inv2 p inverseOf q,     x q y          ->  y p x
    eq-sym   x sameAs y                        ->  y sameAs x
    eq-trans x sameAs y,        y sameAs z     ->  x sameAs z
    eq-rep-s s sameAs s2,       s p o          ->  s2 p o
    eq-rep-p p sameAs p2,       s p o          ->  s p2 o
    eq-rep-o o sameAs o2,       s p o          ->  s p o2
    scm-eqc1 c equivalentClass d    ->  c subClassOf d, d subClassOf c
    scm-eqp1 p equivalentProperty q ->  p subPropertyOf q, q subPropertyOf p

Not materialised: the axiomatic triples and the reflexive rules (``x type
rdfs:Resource``, ``c subClassOf c``, ``x sameAs x`` for every term), which would only add
noise; reflexive triples that follow from the rules above (a ``sameAs`` pair, a cycle in a
transitive property) are kept.

The closure is computed by semi-naive forward chaining: a work list of new triples, each
joined once against the closure so far, so every derivation is found exactly when its
last premise arrives. Removal uses DRed (delete and rederive): over-delete everything with
a derivation that uses a removed triple, then put back what still has a one-step
derivation from what is left and forward-chain from it. Both return the exact change to
the closure, which the retrieval index consumes.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["VOCAB", "Closure", "Triple"]

Triple = tuple[int, int, int]

TYPE = 1
SUBCLASS = 2
SUBPROP = 3
DOMAIN = 4
RANGE = 5
TRANSITIVE = 6
SYMMETRIC = 7
INVERSE = 8
SAMEAS = 9
EQCLASS = 10
EQPROP = 11

#: The reserved term ids of the vocabulary the rules read.
VOCAB: dict[str, int] = {
    "rdf:type": TYPE,
    "rdfs:subClassOf": SUBCLASS,
    "rdfs:subPropertyOf": SUBPROP,
    "rdfs:domain": DOMAIN,
    "rdfs:range": RANGE,
    "owl:TransitiveProperty": TRANSITIVE,
    "owl:SymmetricProperty": SYMMETRIC,
    "owl:inverseOf": INVERSE,
    "owl:sameAs": SAMEAS,
    "owl:equivalentClass": EQCLASS,
    "owl:equivalentProperty": EQPROP,
}

_NO: dict[int, set[int]] = {}
_NONE: frozenset[int] = frozenset()


class Closure:
    """A set of base triples and its materialised closure, with three indexes.

    ``spo[s][p]`` is the set of objects, ``pso[p][s]`` the same by predicate and
    ``ops[o][p]`` the set of subjects. ``base`` holds the asserted triples; every base
    triple is in ``triples``. Not thread-safe: the store serialises access.
    """

    def __init__(self) -> None:
        self.base: set[Triple] = set()
        self.triples: set[Triple] = set()
        self.spo: dict[int, dict[int, set[int]]] = {}
        self.pso: dict[int, dict[int, set[int]]] = {}
        self.ops: dict[int, dict[int, set[int]]] = {}

    # -- indexes -----------------------------------------------------------------------

    def _index(self, t: Triple) -> None:
        s, p, o = t
        self.triples.add(t)
        self.spo.setdefault(s, {}).setdefault(p, set()).add(o)
        self.pso.setdefault(p, {}).setdefault(s, set()).add(o)
        self.ops.setdefault(o, {}).setdefault(p, set()).add(s)

    def _unindex(self, t: Triple) -> None:
        s, p, o = t
        self.triples.discard(t)
        for top, a, b in ((self.spo, s, p), (self.pso, p, s)):
            inner = top[a]
            objs = inner[b]
            objs.discard(o)
            if not objs:
                del inner[b]
                if not inner:
                    del top[a]
        inner = self.ops[o]
        subs = inner[p]
        subs.discard(s)
        if not subs:
            del inner[p]
            if not inner:
                del self.ops[o]

    def objects(self, s: int, p: int) -> set[int] | frozenset[int]:
        """The objects of ``(s, p, ?)`` in the closure."""
        return self.spo.get(s, _NO).get(p, _NONE)

    def subjects(self, p: int, o: int) -> set[int] | frozenset[int]:
        """The subjects of ``(?, p, o)`` in the closure."""
        return self.ops.get(o, _NO).get(p, _NONE)

    # -- rules, forward ----------------------------------------------------------------

    def _consequences(self, t: Triple) -> list[Triple]:
        """Every conclusion of a rule instance that uses ``t`` and closure triples."""
        s, p, o = t
        spo, pso, ops = self.spo, self.pso, self.ops
        out: list[Triple] = []
        emit = out.append
        # t as the data premise: what is known about its predicate.
        about_p = spo.get(p)
        if about_p:
            for q in about_p.get(SUBPROP, _NONE):
                emit((s, q, o))
            for c in about_p.get(DOMAIN, _NONE):
                emit((s, TYPE, c))
            if o > 0:
                for c in about_p.get(RANGE, _NONE):
                    emit((o, TYPE, c))
            kinds = about_p.get(TYPE, _NONE)
            if TRANSITIVE in kinds:
                for z in spo.get(o, _NO).get(p, _NONE) if o > 0 else _NONE:
                    emit((s, p, z))
                for x in ops.get(s, _NO).get(p, _NONE):
                    emit((x, p, o))
            if o > 0:
                if SYMMETRIC in kinds:
                    emit((o, p, s))
                for q in about_p.get(INVERSE, _NONE):
                    emit((o, q, s))
            for p2 in about_p.get(SAMEAS, _NONE):
                emit((s, p2, o))
        if o > 0:
            for q in ops.get(p, _NO).get(INVERSE, _NONE):
                emit((o, q, s))
        if SAMEAS in pso:
            for s2 in spo.get(s, _NO).get(SAMEAS, _NONE):
                emit((s2, p, o))
            if o > 0:
                for o2 in spo.get(o, _NO).get(SAMEAS, _NONE):
                    emit((s, p, o2))
        # t as the schema premise.
        if p == TYPE:
            if o > 0:
                for d in spo.get(o, _NO).get(SUBCLASS, _NONE):
                    emit((s, TYPE, d))
                if o == TRANSITIVE:
                    for x, ys in pso.get(s, _NO).items():
                        for y in ys:
                            if y > 0:
                                for z in spo.get(y, _NO).get(s, _NONE):
                                    emit((x, s, z))
                elif o == SYMMETRIC:
                    for x, ys in pso.get(s, _NO).items():
                        for y in ys:
                            if y > 0:
                                emit((y, s, x))
        elif p == SUBCLASS:
            for x in ops.get(s, _NO).get(TYPE, _NONE):
                emit((x, TYPE, o))
            if o > 0:
                for d in spo.get(o, _NO).get(SUBCLASS, _NONE):
                    emit((s, SUBCLASS, d))
            for c in ops.get(s, _NO).get(SUBCLASS, _NONE):
                emit((c, SUBCLASS, o))
        elif p == SUBPROP:
            for x, ys in pso.get(s, _NO).items():
                for y in ys:
                    emit((x, o, y))
            if o > 0:
                for r in spo.get(o, _NO).get(SUBPROP, _NONE):
                    emit((s, SUBPROP, r))
            for q in ops.get(s, _NO).get(SUBPROP, _NONE):
                emit((q, SUBPROP, o))
        elif p == DOMAIN:
            for x in pso.get(s, _NO):
                emit((x, TYPE, o))
        elif p == RANGE:
            for ys in pso.get(s, _NO).values():
                for y in ys:
                    if y > 0:
                        emit((y, TYPE, o))
        elif p == INVERSE:
            for x, ys in pso.get(s, _NO).items():
                for y in ys:
                    if y > 0:
                        emit((y, o, x))
            for x, ys in pso.get(o, _NO).items():
                for y in ys:
                    if y > 0:
                        emit((y, s, x))
        elif p == SAMEAS:
            if o > 0:
                emit((o, SAMEAS, s))
                for z in spo.get(o, _NO).get(SAMEAS, _NONE):
                    emit((s, SAMEAS, z))
                for p2, o2s in spo.get(s, _NO).items():
                    for o2 in o2s:
                        emit((o, p2, o2))
                for x, ys in pso.get(s, _NO).items():
                    for y in ys:
                        emit((x, o, y))
            for x in ops.get(s, _NO).get(SAMEAS, _NONE):
                emit((x, SAMEAS, o))
            for p2, xs in ops.get(s, _NO).items():
                for x in xs:
                    emit((x, p2, o))
        elif p == EQCLASS:
            emit((s, SUBCLASS, o))
            if o > 0:
                emit((o, SUBCLASS, s))
        elif p == EQPROP:
            emit((s, SUBPROP, o))
            if o > 0:
                emit((o, SUBPROP, s))
        return out

    # -- rules, backward (one step) ----------------------------------------------------

    def _derivable(self, t: Triple) -> bool:
        """Whether some rule instance concludes ``t`` from triples now in the closure."""
        s, p, o = t
        spo, ops = self.spo, self.ops
        if t in self.base:
            return True
        about_s = spo.get(s, _NO)
        for q in ops.get(p, _NO).get(SUBPROP, _NONE):
            if o in about_s.get(q, _NONE):
                return True
        about_p = spo.get(p, _NO)
        kinds = about_p.get(TYPE, _NONE)
        if TRANSITIVE in kinds:
            for y in about_s.get(p, _NONE):
                if o in spo.get(y, _NO).get(p, _NONE):
                    return True
        if o > 0:
            about_o = spo.get(o, _NO)
            if SYMMETRIC in kinds and s in about_o.get(p, _NONE):
                return True
            for q in ops.get(p, _NO).get(INVERSE, _NONE):
                if s in about_o.get(q, _NONE):
                    return True
            for q in about_p.get(INVERSE, _NONE):
                if s in about_o.get(q, _NONE):
                    return True
        sameas = ops.get(s, _NO).get(SAMEAS, _NONE)
        for s0 in sameas:
            if o in spo.get(s0, _NO).get(p, _NONE):
                return True
        for p0 in ops.get(p, _NO).get(SAMEAS, _NONE):
            if o in about_s.get(p0, _NONE):
                return True
        for o0 in ops.get(o, _NO).get(SAMEAS, _NONE):
            if o0 in about_s.get(p, _NONE):
                return True
        if p == TYPE:
            for q in ops.get(o, _NO).get(DOMAIN, _NONE):
                if about_s.get(q):
                    return True
            for q in ops.get(o, _NO).get(RANGE, _NONE):
                if ops.get(s, _NO).get(q):
                    return True
            for c in about_s.get(TYPE, _NONE):
                if o in spo.get(c, _NO).get(SUBCLASS, _NONE):
                    return True
        elif p in (SUBCLASS, SUBPROP):
            for d in about_s.get(p, _NONE):
                if o in spo.get(d, _NO).get(p, _NONE):
                    return True
            equiv = EQCLASS if p == SUBCLASS else EQPROP
            if o in about_s.get(equiv, _NONE) or s in spo.get(o, _NO).get(equiv, _NONE):
                return True
        elif p == SAMEAS:
            if s in spo.get(o, _NO).get(SAMEAS, _NONE):
                return True
            for y in about_s.get(SAMEAS, _NONE):
                if o in spo.get(y, _NO).get(SAMEAS, _NONE):
                    return True
        return False

    # -- maintenance -------------------------------------------------------------------

    def _saturate(self, seeds: Iterable[Triple]) -> set[Triple]:
        """Add ``seeds`` and everything they entail; return what was new to the closure."""
        triples = self.triples
        index = self._index
        added: set[Triple] = set()
        queue: list[Triple] = []
        for t in seeds:
            if t not in triples:
                index(t)
                added.add(t)
                queue.append(t)
        consequences = self._consequences
        while queue:
            for c in consequences(queue.pop()):
                if c not in triples and c[0] > 0 and c[1] > 0:
                    index(c)
                    added.add(c)
                    queue.append(c)
        return added

    def add(self, triples: Iterable[Triple]) -> set[Triple]:
        """Assert ``triples``; return the triples new to the closure."""
        fresh = [t for t in triples if t not in self.base]
        self.base.update(fresh)
        return self._saturate(fresh)

    def remove(self, triples: Iterable[Triple]) -> set[Triple]:
        """Retract ``triples``; return the triples gone from the closure (DRed)."""
        base = self.base
        gone = [t for t in triples if t in base]
        base.difference_update(gone)
        over: set[Triple] = set()
        queue = list(gone)
        over.update(gone)
        consequences = self._consequences
        while queue:
            for c in consequences(queue.pop()):
                if c not in over and c not in base and c in self.triples:
                    over.add(c)
                    queue.append(c)
        for t in over:
            self._unindex(t)
        back = self._saturate([t for t in over if self._derivable(t)])
        return over - back

    def rebuild(self, base: Iterable[Triple]) -> None:
        """Forget everything and compute the closure of ``base`` from scratch."""
        self.triples, self.spo, self.pso, self.ops = set(), {}, {}, {}
        self.base = set(base)
        self._saturate(self.base)
