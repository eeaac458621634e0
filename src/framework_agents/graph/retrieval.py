"""Ranking closure facts by relevance to a text: BM25 on labels plus graph expansion.

Every node of the closure (an entity, class, property -- predicates included -- or
literal) is a tiny document: the tokens of an IRI's local name (``ex:favoriteColor`` ->
``favorit color``) plus those of its ``rdfs:label`` values, or of a literal's text.
:func:`tokenize` normalises Unicode (NFKC), folds case and diacritics, splits camelCase,
snake_case, CURIEs and IRIs, drops common English stop words and clitics (``'s``), stems
lightly (plural, ``-ing``, ``-ed``: "work" finds ``ex:worksFor``) and cuts Chinese,
Japanese and Korean text into characters and character pairs. A query is scored in four
steps:

1. **Lexical**: BM25 (k1=1.2, b=0.75) of every node that shares a token with the query.
2. **Seeds**: the best ``SEEDS`` matched nodes that are subjects or objects, and the best
   ``PREDICATE_SEEDS`` matched predicates.
3. **Expansion**: each neighbour of a seed (one hop, either direction, seeds included)
   gets ``ALPHA`` times the seed's score (the best seed wins); seeds with more than
   ``EXPAND_LIMIT`` neighbours are hubs and do not expand. The best ``EXPANDED``
   neighbours join the seeds.
4. **Facts**: the facts around seeds and expanded nodes (at most ``PER_NODE`` per node:
   all of them for small nodes, the first by canonical order for hubs) are scored: for
   each query token the best of its BM25 share in the subject, the object and (times
   ``BETA``) the predicate, summed -- so a token counts once per fact, and a fact that
   names the entity *and* the asked relation beats one that repeats the entity's name --
   plus the expansion scores of the subject and the object.

Ties break on (asserted before entailed, then the canonical strings of subject, predicate
and object), and nothing depends on insertion order, so the ranking is a pure function of
the closure and the text. The index is updated with each change to the closure, so a
query never rescans the graph. The capped fact lists of hubs and predicates are cached
and patched on each change; only the removal of a listed fact drops a list for rebuilding.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Iterable
from typing import Any

from .._text import tokenize
from ._table import TermTable
from .rules import SAMEAS, Closure, Triple
from .terms import IRI

#: The property whose values join a node's document (a name for what an IRI stands for).
LABEL = IRI("rdfs:label")

__all__ = [
    "ALPHA",
    "BETA",
    "EXPANDED",
    "EXPAND_LIMIT",
    "PER_NODE",
    "PREDICATE_SEEDS",
    "SEEDS",
    "LexicalIndex",
    "label_tokens",
    "tokenize",
]

K1 = 1.2
B = 0.75
#: How many lexically matched subject/object nodes seed a query.
SEEDS = 24
#: How many lexically matched predicates contribute facts of their own.
PREDICATE_SEEDS = 2
#: How many expanded neighbours join the seeds.
EXPANDED = 16
#: Facts taken around one node (all of them for nodes with fewer).
PER_NODE = 48
#: A seed with more neighbours than this is a hub and does not expand.
EXPAND_LIMIT = 256
#: Facts kept in a cached list (twice what a query takes, so removals rarely rebuild it).
_BUFFER = 2 * PER_NODE
#: Share of a seed's score a neighbour receives.
ALPHA = 0.5
#: Weight of a lexical match on the predicate.
BETA = 0.5


def _local_name(value: str) -> str:
    cut = max(value.rfind("#"), value.rfind("/"), value.rfind(":"))
    local = value[cut + 1 :]
    return local or value


def label_tokens(term: object) -> list[str]:
    """The document of a node: its IRI's local name, or its literal's text, tokenized."""
    if isinstance(term, IRI):
        return tokenize(_local_name(term.value))
    return tokenize(getattr(term, "value", ""))


class LexicalIndex:
    """BM25 postings over closure nodes plus node degrees, kept in step with the closure."""

    def __init__(self, closure: Closure, terms: TermTable) -> None:
        """An empty index over ``closure``, reading term text from ``terms``."""
        self._closure = closure
        self._terms = terms
        self._postings: dict[str, dict[int, int]] = {}
        self._doc: dict[int, tuple[str, ...]] = {}
        self._total_len = 0
        self._degree: dict[int, int] = {}  # occurrences in any position (predicate too)
        self._so_degree: dict[int, int] = {}  # occurrences as subject or object
        self._hub_facts: dict[int, _Capped] = {}
        self._pred_facts: dict[int, _Capped] = {}

    def dump(self) -> tuple[Any, ...]:
        """Plain data for a snapshot: postings, documents and degrees (not the caches)."""
        return (self._postings, self._doc, self._total_len, self._degree, self._so_degree)

    @classmethod
    def restore(cls, closure: Closure, terms: TermTable, data: Any) -> LexicalIndex:
        """The index :meth:`dump` described, over ``closure`` and ``terms``."""
        index = cls(closure, terms)
        postings, doc, total, degree, so_degree = data
        index._postings, index._doc, index._degree, index._so_degree = (
            postings,
            doc,
            degree,
            so_degree,
        )
        index._total_len = int(total)
        return index

    # -- maintenance -------------------------------------------------------------------

    def _bump(self, node: int, by: int) -> None:
        count = self._degree.get(node, 0) + by
        if count > 0:
            self._degree[node] = count
            if count == by:
                self._add_doc(node)
        else:
            self._degree.pop(node, None)
            self._drop_doc(node)

    def _doc_tokens(self, node: int) -> tuple[str, ...]:
        """The tokens of a node's name, then those of its ``rdfs:label`` values."""
        tokens = label_tokens(self._terms.term(node))
        label = self._terms.lookup(LABEL)
        if label is not None and node > 0:
            for value in sorted(self._closure.objects(node, label)):
                if value < 0:
                    tokens += label_tokens(self._terms.term(value))
        return tuple(tokens)

    def _add_doc(self, node: int) -> None:
        tokens = self._doc_tokens(node)
        if not tokens:
            return
        self._doc[node] = tokens
        self._total_len += len(tokens)
        for token in tokens:
            posting = self._postings.setdefault(token, {})
            posting[node] = posting.get(node, 0) + 1

    def _drop_doc(self, node: int) -> None:
        tokens = self._doc.pop(node, None)
        if tokens is None:
            return
        self._total_len -= len(tokens)
        for token in set(tokens):
            posting = self._postings[token]
            del posting[node]
            if not posting:
                del self._postings[token]

    def update(self, added: Iterable[Triple], removed: Iterable[Triple]) -> None:
        """Account for triples that entered and left the closure."""
        so = self._so_degree
        hub, pred = self._hub_facts, self._pred_facts
        label = self._terms.lookup(LABEL)
        relabelled: set[int] = set()
        for sign, triples in ((1, added), (-1, removed)):
            for t in triples:
                s, p, o = t
                for node in (s, o):
                    count = so.get(node, 0) + sign
                    if count > 0:
                        so[node] = count
                    else:
                        so.pop(node, None)
                    self._bump(node, sign)
                self._bump(p, sign)
                if p == label:
                    relabelled.add(s)
                self._follow(hub, s, t, sign)
                if o != s:
                    self._follow(hub, o, t, sign)
                self._follow(pred, p, t, sign)
        for node in relabelled:  # the closure is final here: read its labels afresh
            if node in self._degree:
                self._drop_doc(node)
                self._add_doc(node)

    def _follow(self, cache: dict[int, _Capped], node: int, t: Triple, sign: int) -> None:
        """Keep ``cache[node]`` exact after ``t`` entered (``sign`` 1) or left the closure.

        Patching the list costs O(_BUFFER); dropping it would make the next query rescan
        every fact of a hub (or predicate) after each change to it. A list that is not
        complete is rebuilt only once removals leave fewer than PER_NODE facts in it.
        """
        capped = cache.get(node)
        if capped is None:
            return
        facts, key = capped.facts, self._triple_key
        if sign > 0:
            if capped.complete or key(t) < key(facts[-1]):
                bisect.insort(facts, t, key=key)
                if len(facts) > _BUFFER:
                    facts.pop()
                    capped.complete = False
        elif (capped.complete or key(t) <= key(facts[-1])) and t in facts:
            facts.remove(t)
            if not capped.complete and len(facts) < PER_NODE:
                del cache[node]  # the successors of the list are unknown: rebuild it

    # -- search ------------------------------------------------------------------------

    def _triple_key(self, t: Triple) -> tuple[str, str, str]:
        key = self._terms.key
        return (key(t[0]), key(t[1]), key(t[2]))

    def _around(self, node: int) -> list[Triple]:
        """Facts with ``node`` as subject or object: all, or the first PER_NODE for hubs."""
        if self._so_degree.get(node, 0) > PER_NODE:
            cached = self._hub_facts.get(node)
            if cached is None:
                cached = self._hub_facts[node] = _Capped.of(self._incident(node), self._triple_key)
            return cached.facts[:PER_NODE]
        return list(self._incident(node))

    def _incident(self, node: int) -> Iterable[Triple]:
        closure = self._closure
        for p, objs in closure.spo.get(node, {}).items():
            for o in objs:
                yield (node, p, o)
        for p, subs in closure.ops.get(node, {}).items():
            for s in subs:
                if s != node:
                    yield (s, p, node)

    def _with_predicate(self, p: int) -> list[Triple]:
        capped = self._pred_facts.get(p)
        if capped is None:
            facts = ((s, p, o) for s, objs in self._closure.pso.get(p, {}).items() for o in objs)
            capped = self._pred_facts[p] = _Capped.of(facts, self._triple_key)
        return capped.facts[:PER_NODE]

    def _neighbours(self, node: int) -> Iterable[int]:
        closure = self._closure
        for objs in closure.spo.get(node, {}).values():
            yield from objs
        for subs in closure.ops.get(node, {}).values():
            yield from subs

    def lexical(self, text: str) -> tuple[dict[int, float], dict[int, list[float]]]:
        """BM25 of every node sharing a token with ``text``, in total and per query token."""
        totals: dict[int, float] = {}
        parts: dict[int, list[float]] = {}
        docs = len(self._doc)
        if not docs:
            return totals, parts
        avgdl = self._total_len / docs
        tokens = list(dict.fromkeys(tokenize(text)))
        doc = self._doc
        for i, token in enumerate(tokens):
            posting = self._postings.get(token)
            if not posting:
                continue
            df = len(posting)
            idf = math.log(1.0 + (docs - df + 0.5) / (df + 0.5))
            for node, tf in posting.items():
                norm = K1 * (1.0 - B + B * len(doc[node]) / avgdl)
                score = idf * tf * (K1 + 1.0) / (tf + norm)
                row = parts.get(node)
                if row is None:
                    row = parts[node] = [0.0] * len(tokens)
                row[i] = score
                totals[node] = totals.get(node, 0.0) + score
        return totals, parts

    def _expand(self, seeds: list[int], lex: dict[int, float]) -> dict[int, float]:
        """Neighbours of the seeds (hubs excepted), each with its best seed's share."""
        so = self._so_degree
        expansion: dict[int, float] = {}
        for node in seeds:
            if so[node] > EXPAND_LIMIT:
                continue
            share = ALPHA * lex[node]
            for other in self._neighbours(node):
                if expansion.get(other, 0.0) < share:
                    expansion[other] = share
        return expansion

    def search(
        self, text: str, k: int, asserted: Callable[[Triple], bool]
    ) -> list[tuple[float, Triple]]:
        """The ``k`` best closure triples for ``text`` with their scores, best first."""
        if k <= 0:
            return []
        lex, parts = self.lexical(text)
        if not lex:
            return []
        candidates, expansion = self._candidates(lex)
        scores = _scores(candidates, lex, parts, expansion)
        if not scores:
            return []
        key = self._terms.key
        # Canonical keys only for the facts that can still make the cut (ties included).
        cutoff = heapq.nlargest(k, scores.values())[-1]
        pool = [
            (-score, not asserted(t), key(t[0]), key(t[1]), key(t[2]), t)
            for t, score in scores.items()
            if score >= cutoff
        ]
        return [(-row[0], row[5]) for row in heapq.nsmallest(k, pool)]

    def _candidates(self, lex: dict[int, float]) -> tuple[set[Triple], dict[int, float]]:
        """The facts around the seed nodes, their neighbours and the seed predicates.

        Also the neighbours' expansion shares (see :meth:`_expand`).
        """
        key = self._terms.key
        so = self._so_degree
        seeds = _top([n for n in lex if n in so], lex, SEEDS, key)
        preds = _top([n for n in lex if n in self._closure.pso], lex, PREDICATE_SEEDS, key)
        expansion = self._expand(seeds, lex)
        chosen = set(seeds)
        expanded = _top([n for n in expansion if n not in chosen], expansion, EXPANDED, key)
        candidates: set[Triple] = set()
        for node in (*seeds, *expanded):
            candidates.update(self._around(node))
        for p in preds:
            candidates.update(self._with_predicate(p))
        return candidates, expansion


def _scores(
    candidates: set[Triple],
    lex: dict[int, float],
    parts: dict[int, list[float]],
    expansion: dict[int, float],
) -> dict[Triple, float]:
    """Each candidate's score: its lexical part plus its subject's and object's shares."""
    scores: dict[Triple, float] = {}
    near = expansion.get
    for t in candidates:
        s, p, o = t
        if p == SAMEAS and s == o:
            continue  # a reflexive sameAs says nothing
        scores[t] = round(_lexical_part(lex, parts, t) + near(s, 0.0) + near(o, 0.0), 9)
    return scores


def _lexical_part(lex: dict[int, float], parts: dict[int, list[float]], t: Triple) -> float:
    """A fact's lexical score: each query token counts once, the best of its three nodes."""
    s, p, o = t
    ps, po, pp = parts.get(s), parts.get(o), parts.get(p)
    matched = (ps is not None) + (po is not None) + (pp is not None)
    if matched == 0:
        return 0.0
    if matched == 1:
        return lex[s] if ps else lex[o] if po else BETA * lex[p]
    best = 0.0
    for i in range(len(next(r for r in (ps, po, pp) if r is not None))):
        best += max(ps[i] if ps else 0.0, po[i] if po else 0.0, BETA * pp[i] if pp else 0.0)
    return best


class _Capped:
    """The first ``_BUFFER`` facts of a node in canonical order; ``complete`` if that is all."""

    __slots__ = ("complete", "facts")

    def __init__(self, facts: list[Triple], complete: bool) -> None:
        self.facts = facts
        self.complete = complete

    @classmethod
    def of(cls, facts: Iterable[Triple], key: Callable[[Triple], tuple[str, str, str]]) -> _Capped:
        first = heapq.nsmallest(_BUFFER, facts, key=key)
        return cls(first, len(first) < _BUFFER)


def _top(
    nodes: list[int], scores: dict[int, float], m: int, key: Callable[[int], str]
) -> list[int]:
    """The ``m`` best ``nodes`` by score, ties broken by canonical string."""
    if len(nodes) > m:
        cutoff = heapq.nlargest(m, (scores[n] for n in nodes))[-1]
        nodes = [n for n in nodes if scores[n] >= cutoff]
    return sorted(nodes, key=lambda n: (-scores[n], key(n)))[:m]
