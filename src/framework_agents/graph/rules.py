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

from collections.abc import Callable, Iterable
from typing import Any

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
        """An empty closure."""
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
        out: list[Triple] = []
        self._as_data(t, out)
        schema = _SCHEMA_RULES.get(t[1])
        if schema is not None:
            schema(self, t[0], t[2], out)
        return out

    def _as_data(self, t: Triple, out: list[Triple]) -> None:
        """Conclusions with ``t`` as the data premise: what is known about its predicate."""
        s, p, o = t
        spo = self.spo
        emit = out.append
        about_p = spo.get(p)
        if about_p:
            for q in about_p.get(SUBPROP, _NONE):
                emit((s, q, o))
            for c in about_p.get(DOMAIN, _NONE):
                emit((s, TYPE, c))
            kinds = about_p.get(TYPE, _NONE)
            if TRANSITIVE in kinds:
                self._transitive_step(t, out)
            if o > 0:
                for c in about_p.get(RANGE, _NONE):
                    emit((o, TYPE, c))
                if SYMMETRIC in kinds:
                    emit((o, p, s))
                for q in about_p.get(INVERSE, _NONE):
                    emit((o, q, s))
            for p2 in about_p.get(SAMEAS, _NONE):
                emit((s, p2, o))
        if o > 0:
            for q in self.ops.get(p, _NO).get(INVERSE, _NONE):
                emit((o, q, s))
        if SAMEAS in self.pso:
            self._replace_same(t, out)

    def _replace_same(self, t: Triple, out: list[Triple]) -> None:
        """eq-rep-s and eq-rep-o with ``t`` as the fact whose subject or object is copied."""
        s, p, o = t
        spo = self.spo
        out.extend((s2, p, o) for s2 in spo.get(s, _NO).get(SAMEAS, _NONE))
        if o > 0:
            out.extend((s, p, o2) for o2 in spo.get(o, _NO).get(SAMEAS, _NONE))

    def _transitive_step(self, t: Triple, out: list[Triple]) -> None:
        """prp-trp with ``t`` as either of the two chained facts."""
        s, p, o = t
        if o > 0:
            for z in self.spo.get(o, _NO).get(p, _NONE):
                out.append((s, p, z))
        for x in self.ops.get(s, _NO).get(p, _NONE):
            out.append((x, p, o))

    def _on_type(self, s: int, o: int, out: list[Triple]) -> None:
        """``s rdf:type o`` as a schema premise: rdfs9, and prp-trp/prp-symp when declared."""
        if o <= 0:
            return
        pso, spo = self.pso, self.spo
        for d in spo.get(o, _NO).get(SUBCLASS, _NONE):
            out.append((s, TYPE, d))
        if o == TRANSITIVE:
            for x, ys in pso.get(s, _NO).items():
                for y in ys:
                    if y > 0:
                        out.extend((x, s, z) for z in spo.get(y, _NO).get(s, _NONE))
        elif o == SYMMETRIC:
            for x, ys in pso.get(s, _NO).items():
                out.extend((y, s, x) for y in ys if y > 0)

    def _on_subclass(self, s: int, o: int, out: list[Triple]) -> None:
        """rdfs9 and rdfs11 with ``s rdfs:subClassOf o`` as a premise."""
        ops = self.ops
        out.extend((x, TYPE, o) for x in ops.get(s, _NO).get(TYPE, _NONE))
        if o > 0:
            out.extend((s, SUBCLASS, d) for d in self.spo.get(o, _NO).get(SUBCLASS, _NONE))
        out.extend((c, SUBCLASS, o) for c in ops.get(s, _NO).get(SUBCLASS, _NONE))

    def _on_subprop(self, s: int, o: int, out: list[Triple]) -> None:
        """rdfs7 and rdfs5 with ``s rdfs:subPropertyOf o`` as a premise."""
        for x, ys in self.pso.get(s, _NO).items():
            out.extend((x, o, y) for y in ys)
        if o > 0:
            out.extend((s, SUBPROP, r) for r in self.spo.get(o, _NO).get(SUBPROP, _NONE))
        out.extend((q, SUBPROP, o) for q in self.ops.get(s, _NO).get(SUBPROP, _NONE))

    def _on_domain(self, s: int, o: int, out: list[Triple]) -> None:
        """rdfs2 with ``s rdfs:domain o`` as the schema premise."""
        out.extend((x, TYPE, o) for x in self.pso.get(s, _NO))

    def _on_range(self, s: int, o: int, out: list[Triple]) -> None:
        """rdfs3 with ``s rdfs:range o`` as the schema premise."""
        for ys in self.pso.get(s, _NO).values():
            out.extend((y, TYPE, o) for y in ys if y > 0)

    def _on_inverse(self, s: int, o: int, out: list[Triple]) -> None:
        """prp-inv1 and prp-inv2 with ``s owl:inverseOf o`` as the schema premise."""
        pso = self.pso
        for x, ys in pso.get(s, _NO).items():
            out.extend((y, o, x) for y in ys if y > 0)
        for x, ys in pso.get(o, _NO).items():
            out.extend((y, s, x) for y in ys if y > 0)

    def _on_sameas(self, s: int, o: int, out: list[Triple]) -> None:
        """eq-sym, eq-trans and eq-rep-s/p/o with ``s owl:sameAs o`` as a premise."""
        spo, ops = self.spo, self.ops
        if o > 0:
            out.append((o, SAMEAS, s))
            out.extend((s, SAMEAS, z) for z in spo.get(o, _NO).get(SAMEAS, _NONE))
            for p2, o2s in spo.get(s, _NO).items():
                out.extend((o, p2, o2) for o2 in o2s)
            for x, ys in self.pso.get(s, _NO).items():
                out.extend((x, o, y) for y in ys)
        out.extend((x, SAMEAS, o) for x in ops.get(s, _NO).get(SAMEAS, _NONE))
        for p2, xs in ops.get(s, _NO).items():
            out.extend((x, p2, o) for x in xs)

    def _on_eqclass(self, s: int, o: int, out: list[Triple]) -> None:
        """scm-eqc1: equivalent classes are subclasses of each other."""
        out.append((s, SUBCLASS, o))
        if o > 0:
            out.append((o, SUBCLASS, s))

    def _on_eqprop(self, s: int, o: int, out: list[Triple]) -> None:
        """scm-eqp1: equivalent properties are subproperties of each other."""
        out.append((s, SUBPROP, o))
        if o > 0:
            out.append((o, SUBPROP, s))

    # -- rules, backward (one step) ----------------------------------------------------

    def _derivable(self, t: Triple) -> bool:
        """Whether some rule instance concludes ``t`` from triples now in the closure."""
        if t in self.base or self._derivable_as_data(t) or self._derivable_by_sameas(t):
            return True
        schema = _SCHEMA_BACKWARD.get(t[1])
        return schema is not None and schema(self, t)

    def _derivable_as_data(self, t: Triple) -> bool:
        """rdfs7, prp-trp, prp-symp and prp-inv1/2 conclude ``t``."""
        s, p, o = t
        spo, ops = self.spo, self.ops
        about_s = spo.get(s, _NO)
        if any(o in about_s.get(q, _NONE) for q in ops.get(p, _NO).get(SUBPROP, _NONE)):
            return True
        about_p = spo.get(p, _NO)
        kinds = about_p.get(TYPE, _NONE)
        if TRANSITIVE in kinds and any(
            o in spo.get(y, _NO).get(p, _NONE) for y in about_s.get(p, _NONE)
        ):
            return True
        if o <= 0:
            return False
        about_o = spo.get(o, _NO)
        if SYMMETRIC in kinds and s in about_o.get(p, _NONE):
            return True
        inverses = (*ops.get(p, _NO).get(INVERSE, _NONE), *about_p.get(INVERSE, _NONE))
        return any(s in about_o.get(q, _NONE) for q in inverses)

    def _derivable_by_sameas(self, t: Triple) -> bool:
        """eq-rep-s, eq-rep-p or eq-rep-o concludes ``t``."""
        s, p, o = t
        spo, ops = self.spo, self.ops
        about_s = spo.get(s, _NO)
        if any(o in spo.get(s0, _NO).get(p, _NONE) for s0 in ops.get(s, _NO).get(SAMEAS, _NONE)):
            return True
        if any(o in about_s.get(p0, _NONE) for p0 in ops.get(p, _NO).get(SAMEAS, _NONE)):
            return True
        return any(o0 in about_s.get(p, _NONE) for o0 in ops.get(o, _NO).get(SAMEAS, _NONE))

    def _derivable_type(self, t: Triple) -> bool:
        """rdfs2, rdfs3 or rdfs9 concludes ``s rdf:type o``."""
        s, _, o = t
        spo, ops = self.spo, self.ops
        about_s = spo.get(s, _NO)
        by_o = ops.get(o, _NO)
        if any(about_s.get(q) for q in by_o.get(DOMAIN, _NONE)):
            return True
        if any(ops.get(s, _NO).get(q) for q in by_o.get(RANGE, _NONE)):
            return True
        return any(o in spo.get(c, _NO).get(SUBCLASS, _NONE) for c in about_s.get(TYPE, _NONE))

    def _derivable_hierarchy(self, t: Triple) -> bool:
        """rdfs5/rdfs11 (a chain) or scm-eqc1/scm-eqp1 (an equivalence) concludes ``t``."""
        s, p, o = t
        spo = self.spo
        about_s = spo.get(s, _NO)
        if any(o in spo.get(d, _NO).get(p, _NONE) for d in about_s.get(p, _NONE)):
            return True
        equiv = EQCLASS if p == SUBCLASS else EQPROP
        return o in about_s.get(equiv, _NONE) or s in spo.get(o, _NO).get(equiv, _NONE)

    def _derivable_sameas(self, t: Triple) -> bool:
        """eq-sym or eq-trans concludes ``s owl:sameAs o``."""
        s, _, o = t
        spo = self.spo
        if s in spo.get(o, _NO).get(SAMEAS, _NONE):
            return True
        return any(
            o in spo.get(y, _NO).get(SAMEAS, _NONE) for y in spo.get(s, _NO).get(SAMEAS, _NONE)
        )

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

    def dump(self) -> tuple[Any, ...]:
        """Plain data for a snapshot: the base, the closure and its three indexes."""
        return (self.base, self.triples, self.spo, self.pso, self.ops)

    @classmethod
    def restore(cls, data: Any) -> Closure:
        """The closure :meth:`dump` described, without reasoning again."""
        closure = cls()
        closure.base, closure.triples, closure.spo, closure.pso, closure.ops = data
        if not closure.base <= closure.triples:
            raise ValueError("the snapshot's closure lacks some of its base triples")
        return closure

    def rebuild(self, base: Iterable[Triple]) -> None:
        """Forget everything and compute the closure of ``base`` from scratch."""
        self.triples, self.spo, self.pso, self.ops = set(), {}, {}, {}
        self.base = set(base)
        self._saturate(self.base)


# The rules whose schema premise has the predicate of the key (forward, then backward).
_SCHEMA_RULES: dict[int, Callable[[Closure, int, int, list[Triple]], None]] = {
    TYPE: Closure._on_type,
    SUBCLASS: Closure._on_subclass,
    SUBPROP: Closure._on_subprop,
    DOMAIN: Closure._on_domain,
    RANGE: Closure._on_range,
    INVERSE: Closure._on_inverse,
    SAMEAS: Closure._on_sameas,
    EQCLASS: Closure._on_eqclass,
    EQPROP: Closure._on_eqprop,
}
_SCHEMA_BACKWARD: dict[int, Callable[[Closure, Triple], bool]] = {
    TYPE: Closure._derivable_type,
    SUBCLASS: Closure._derivable_hierarchy,
    SUBPROP: Closure._derivable_hierarchy,
    SAMEAS: Closure._derivable_sameas,
}
