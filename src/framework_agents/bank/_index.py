"""The search index of a memory bank: derived from the records, kept in each process.

:class:`BankIndex` holds the latest revision of every record the process has read from
the change log, BM25 postings over their tokens (:func:`framework_agents._text.tokenize`,
the analyser the graph's retrieval uses), their vectors when the bank has an embedder,
and the order of the conversation turns (``"episode"`` records) of each namespace.

A query is ranked in three steps:

1. **Words**: BM25 (k1=1.2, b=0.75) over every record sharing a token with the query.
2. **Meaning** (with an embedder): the cosine of the query's vector with each record's;
   records below :data:`MIN_COSINE` do not match.
3. **Fusion**: with both, reciprocal rank fusion of the two rankings
   (``1 / (RRF_K + rank)`` summed), so neither scale dominates; with words alone the BM25
   score. Then **neighbours**: a turn of a conversation gains :data:`NEIGHBOUR` times the
   best score of the turns on either side of it (the answer to a question is often the
   turn after the one that shares its words).

Ties go to the newer ``valid_from``, then to the smaller id: the order is a pure function
of the records, the same on every backend. Scores are rounded to 9 decimals first, so
floating-point noise from a different insertion order never reorders them.

Only what can reach the ``k`` best is worked out, and the result is the same as scoring
every record: BM25 reads the query's terms rarest first and stops reading postings once
the terms left could not lift a record they alone match into the best (MaxScore, see
:meth:`BankIndex._words`); neighbours are worked out only for the turns that can reach
the ``k``-th best score (:meth:`BankIndex._with_neighbours`); and only the records at or
above the ``k``-th best score are sorted (:meth:`BankIndex._top`).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._text import tokenize
from ._records import Namespace, Row

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["MIN_COSINE", "NEIGHBOUR", "RRF_K", "BankIndex", "Filter"]

K1 = 1.2
B = 0.75
#: Reciprocal-rank-fusion constant (the usual 60).
RRF_K = 60
#: Share of a neighbouring turn's score a conversation turn gains.
NEIGHBOUR = 0.5
#: Cosine below which a record does not match a query by meaning.
MIN_COSINE = 0.25
#: How many distinct query tokens count (a 1 MB query answers in bounded time).
MAX_QUERY_TOKENS = 256
#: How many records of each ranking take part in the fusion (at least ``4 * k``).
FUSION_DEPTH = 200
EPISODE = "episode"
#: Half the step of the 9-decimal rounding that scores are compared at, and a bit more.
_EPSILON = 1e-9


@dataclass(slots=True)
class _Doc:
    row: Row
    first_seq: int
    length: int
    terms: Counter[str]
    slot: int = -1  # row of the vector matrix, -1: none
    prev: str | None = None  # the turn before, in the namespace's conversation
    next: str | None = None


@dataclass(frozen=True, slots=True)
class Filter:
    """Which records a search or a list sees."""

    namespace: Namespace
    kinds: frozenset[str] | None = None
    where: Mapping[str, Any] | None = None
    #: Records valid at this moment (microseconds); ``None`` with ``include_past``: all.
    moment: int | None = None
    #: Records whose time to live ran out before this moment are never seen.
    now: int = 0
    where_items: tuple[tuple[str, Any], ...] = field(default=(), repr=False)

    def sees(self, row: Row) -> bool:
        """Whether ``row`` passes the filter."""
        if row.namespace[: len(self.namespace)] != self.namespace:
            return False
        if row.expired(self.now):
            return False
        if self.kinds is not None and row.kind not in self.kinds:
            return False
        if self.moment is not None and not row.holds_at(self.moment):
            return False
        if self.where:
            metadata = row.metadata
            return all(k in metadata and metadata[k] == v for k, v in self.where.items())
        return True


def _nothing(record_id: str) -> float:
    return 0.0


@dataclass(frozen=True, slots=True)
class _Bm25:
    """A query's term weights (idf) over the index as it is."""

    docs: dict[str, _Doc]
    weights: dict[str, float]
    average: float

    def add(self, score: float, record_id: str, terms: list[str]) -> float:
        """``score`` plus what ``terms`` (those of the query) add to the record's."""
        doc = self.docs[record_id]
        length = K1 * (1.0 - B + B * doc.length / self.average)
        for term in terms:
            tf = doc.terms.get(term)
            if tf:
                score += self.weights[term] * tf * (K1 + 1.0) / (tf + length)
        return score


@dataclass(frozen=True, slots=True)
class _Scores:
    """A ranking's scores, maybe without the records that cannot rank (see ``_words``)."""

    scores: dict[str, float]
    #: No record left out scores more than this (0.0: none left out).
    bound: float = 0.0
    #: The exact score of any record (only asked for records left out).
    own: Callable[[str], float] = _nothing


class _Vectors:
    """The records' unit vectors as rows of one float32 matrix (grown by doubling)."""

    def __init__(self, np_: Any, dimension: int) -> None:
        self.np = np_
        self.dimension = dimension
        self.matrix: NDArray[np.float32] = np_.zeros((64, dimension), dtype=np_.float32)
        self.used = 0
        self.free: list[int] = []
        self.owner: list[str | None] = [None] * 64

    def add(self, record_id: str, vector: NDArray[np.float32]) -> int:
        if self.free:
            slot = heapq.heappop(self.free)
        else:
            if self.used == len(self.matrix):
                grown = self.np.zeros((2 * len(self.matrix), self.dimension), self.np.float32)
                grown[: self.used] = self.matrix
                self.matrix = grown
                self.owner.extend([None] * (len(grown) - len(self.owner)))
            slot = self.used
            self.used += 1
        self.matrix[slot] = vector
        self.owner[slot] = record_id
        return slot

    def drop(self, slot: int) -> None:
        self.matrix[slot] = 0.0
        self.owner[slot] = None
        heapq.heappush(self.free, slot)

    def cosines(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        scores: NDArray[np.float32] = self.matrix[: self.used] @ query
        return scores


class BankIndex:
    """Postings, vectors and conversation order over the records one process has read."""

    def __init__(self, decode: Callable[[bytes], Any] | None = None) -> None:
        """An empty index; ``decode`` turns stored vector bytes into an array (embedder)."""
        self.seq = 0  # the last change-log entry applied
        self._docs: dict[str, _Doc] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._total_length = 0
        self._decode = decode
        self._vectors: _Vectors | None = None
        self._last_turn: dict[Namespace, str] = {}  # the newest episode of each namespace
        self._expiries: list[tuple[int, str]] = []  # heap of (expires_at, id)
        self._gone: dict[str, int] = {}  # first_seq of forgotten records (list cursors)

    def __len__(self) -> int:
        """How many records the index holds."""
        return len(self._docs)

    # -- maintenance -------------------------------------------------------------------

    def apply(self, entries: Sequence[tuple[int, str]], rows: Mapping[str, Row]) -> None:
        """Apply change-log ``entries`` (those after :attr:`seq`); ``rows`` are their records.

        A record absent from ``rows`` was forgotten. Entries at or before :attr:`seq` were
        applied by an earlier catch-up and are skipped.
        """
        for seq, record_id in entries:
            if seq <= self.seq:
                continue
            self.seq = seq
            row = rows.get(record_id)
            doc = self._docs.get(record_id)
            if row is None:
                if doc is not None:
                    self._remove(doc)
            elif doc is None:
                self._add(row, seq)
            elif doc.row is not row:
                self._replace(doc, row)

    def _add(self, row: Row, seq: int) -> None:
        terms = Counter(tokenize(row.text))
        doc = _Doc(row, seq, sum(terms.values()), terms)
        self._docs[row.id] = doc
        self._index_terms(row.id, terms, +1)
        self._total_length += doc.length
        doc.slot = self._add_vector(row)
        if row.kind == EPISODE:
            before = self._last_turn.get(row.namespace)
            if before is not None:
                doc.prev = before
                self._docs[before].next = row.id
            self._last_turn[row.namespace] = row.id
        if row.expires_at is not None:
            heapq.heappush(self._expiries, (row.expires_at, row.id))

    def _replace(self, doc: _Doc, row: Row) -> None:
        old = doc.row
        doc.row = row
        if row.text != old.text:
            self._index_terms(row.id, doc.terms, -1)
            self._total_length -= doc.length
            doc.terms = Counter(tokenize(row.text))
            doc.length = sum(doc.terms.values())
            self._index_terms(row.id, doc.terms, +1)
            self._total_length += doc.length
        if row.vector != old.vector or row.text != old.text:
            if doc.slot >= 0 and self._vectors is not None:
                self._vectors.drop(doc.slot)
            doc.slot = self._add_vector(row)

    def _remove(self, doc: _Doc) -> None:
        row = doc.row
        del self._docs[row.id]
        self._gone[row.id] = doc.first_seq
        self._index_terms(row.id, doc.terms, -1)
        self._total_length -= doc.length
        if doc.slot >= 0 and self._vectors is not None:
            self._vectors.drop(doc.slot)
        if row.kind == EPISODE:
            prev = self._docs.get(doc.prev) if doc.prev else None
            nxt = self._docs.get(doc.next) if doc.next else None
            if prev is not None:
                prev.next = doc.next
            if nxt is not None:
                nxt.prev = doc.prev
            if self._last_turn.get(row.namespace) == row.id:
                if doc.prev is None:
                    del self._last_turn[row.namespace]
                else:
                    self._last_turn[row.namespace] = doc.prev

    def _index_terms(self, record_id: str, terms: Counter[str], sign: int) -> None:
        for term, count in terms.items():
            if sign > 0:
                self._postings.setdefault(term, {})[record_id] = count
            else:
                posting = self._postings.get(term)
                if posting is not None:
                    posting.pop(record_id, None)
                    if not posting:
                        del self._postings[term]

    def _add_vector(self, row: Row) -> int:
        if self._decode is None or row.vector is None:
            return -1
        vector = self._decode(row.vector)
        if self._vectors is None:
            import numpy

            self._vectors = _Vectors(numpy, len(vector))
        if len(vector) != self._vectors.dimension:
            return -1
        return self._vectors.add(row.id, vector)

    def missing_vectors(self) -> list[Row]:
        """Records without a vector (written by a process with no or another embedder)."""
        if self._decode is None or len(self._docs) == self._with_vectors():
            return []
        return [d.row for d in self._docs.values() if d.slot < 0]

    def _with_vectors(self) -> int:
        vectors = self._vectors
        return 0 if vectors is None else vectors.used - len(vectors.free)

    def set_vector(self, record_id: str, vector: Any) -> None:
        """Give a record a vector computed in this process (kept in memory only)."""
        doc = self._docs.get(record_id)
        if doc is None or doc.slot >= 0:
            return
        if self._vectors is None:
            import numpy

            self._vectors = _Vectors(numpy, len(vector))
        if len(vector) == self._vectors.dimension:
            doc.slot = self._vectors.add(record_id, vector)

    def expired(self, now: int) -> list[str]:
        """Ids of held records whose time to live ran out at ``now``."""
        out: list[str] = []
        while self._expiries and self._expiries[0][0] <= now:
            _, record_id = heapq.heappop(self._expiries)
            doc = self._docs.get(record_id)
            if doc is not None and doc.row.expired(now):
                out.append(record_id)
        return out

    # -- reading -----------------------------------------------------------------------

    def rows(self, seen: Filter) -> Iterable[Row]:
        """Every held record ``seen`` passes, in the order they were first recorded."""
        # Records enter the dict in change-log order and keep their place: no sort needed.
        return (d.row for d in self._docs.values() if seen.sees(d.row))

    def after(self, record_id: str) -> int | None:
        """The log position of ``record_id`` (held or forgotten) for a list cursor."""
        doc = self._docs.get(record_id)
        return doc.first_seq if doc is not None else self._gone.get(record_id)

    def listing(self, seen: Filter, limit: int, after: int) -> list[Row]:
        """Up to ``limit`` records ``seen`` passes, first recorded after position ``after``."""
        out: list[Row] = []
        for doc in self._docs.values():  # in first_seq order (see rows())
            if doc.first_seq > after and seen.sees(doc.row):
                out.append(doc.row)
                if len(out) == limit:
                    break
        return out

    def search(
        self, query: str, seen: Filter, k: int, vector: Any | None
    ) -> list[tuple[Row, float]]:
        """The ``k`` best records for ``query`` among those ``seen`` passes."""
        meaning = self._meaning(vector, seen, k) if vector is not None else {}
        if meaning:
            depth = max(FUSION_DEPTH, 4 * k)
            lexical = self._words(query, seen, depth, 1.0).scores
            fused: dict[str, float] = {}
            for ranking in (lexical, meaning):
                for rank, record_id in enumerate(self._top(ranking, depth), start=1):
                    fused[record_id] = fused.get(record_id, 0.0) + 1.0 / (RRF_K + rank)
            scores = self._with_neighbours(_Scores(fused), seen, k)
        else:
            # A turn left out of the k best by its own words may be lifted into them by
            # a neighbour also left out: by at most NEIGHBOUR times as much again.
            scores = self._with_neighbours(self._words(query, seen, k, 1.0 + NEIGHBOUR), seen, k)
        return [(self._docs[i].row, scores[i]) for i in self._top(scores, k)]

    def _top(self, scores: Mapping[str, float], n: int) -> list[str]:
        """The ``n`` best of ``scores`` in rank order (score to 9 decimals, newer, id).

        Only the records whose score can reach the ``n``-th best are sorted: a cut found
        with a heap, then the full order over the few at or above it.
        """
        docs = self._docs

        def order(record_id: str) -> tuple[float, int, str]:
            return (-round(scores[record_id], 9), -docs[record_id].row.valid_from, record_id)

        if len(scores) <= n:
            return sorted(scores, key=order)
        # Rounding moves a score by at most 5e-10: nothing below the cut can tie with it.
        cut = heapq.nlargest(n, scores.values())[-1] - _EPSILON
        return sorted((i for i, s in scores.items() if s >= cut), key=order)[:n]

    def _words(self, query: str, seen: Filter, n: int, lift: float) -> _Scores:
        """BM25 scores of the records that can be among the ``n`` best.

        Exact for every record that can rank in the ``n`` best even when its score is
        raised ``lift`` times (a neighbour's lift); the others are left out. Which are
        left out is found as in MaxScore (Turtle and Flood, 1995): a term adds less
        than ``idf * (K1 + 1)`` to a score, so the query's terms are read rarest first,
        and once the terms not read yet could add up to less than the ``n``-th best
        score so far (divided by ``lift``), a record only they match cannot reach the
        ``n`` best and their long postings are not read. The records read are completed
        with the unread terms by lookup. A score is always summed rarest term first, so
        it is the same number however far the reading went.
        """
        terms = list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TOKENS]
        count = len(self._docs)
        if not terms or not count:
            return _Scores({})
        weights: dict[str, float] = {}
        for term in terms:
            posting = self._postings.get(term)
            if posting:
                weights[term] = math.log(1.0 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
        rarest = sorted(weights, key=lambda t: (len(self._postings[t]), t))
        bm25 = _Bm25(self._docs, weights, self._total_length / count or 1.0)
        partial, read, rest = self._read(bm25, rarest, seen, n, lift)
        if read == len(rarest):
            return _Scores(partial)
        unread = rarest[read:]
        docs = self._docs

        def own(record_id: str) -> float:
            return bm25.add(0.0, record_id, rarest) if seen.sees(docs[record_id].row) else 0.0

        scores = {i: bm25.add(s, i, unread) for i, s in partial.items()}
        return _Scores(scores, rest, own)

    def _read(
        self, bm25: _Bm25, rarest: list[str], seen: Filter, n: int, lift: float
    ) -> tuple[dict[str, float], int, float]:
        """Partial scores from the postings of the first terms of ``rarest``.

        Reads term after term until the terms left could not lift a record they alone
        match into the ``n`` best; the partial scores (of records ``seen`` passes), how
        many terms were read, and the most the unread terms can add to a score.
        """
        docs = self._docs
        average = bm25.average
        rest = sum(bm25.weights[t] * (K1 + 1.0) for t in rarest)
        partial: dict[str, float] = {}
        hidden: set[str] = set()
        for read, term in enumerate(rarest, start=1):
            idf = bm25.weights[term]
            rest -= idf * (K1 + 1.0)
            for record_id, tf in self._postings[term].items():
                sofar = partial.get(record_id)
                if sofar is None:
                    if record_id in hidden:
                        continue
                    if not seen.sees(docs[record_id].row):
                        hidden.add(record_id)
                        continue
                    sofar = 0.0
                norm = tf + K1 * (1.0 - B + B * docs[record_id].length / average)
                partial[record_id] = sofar + idf * tf * (K1 + 1.0) / norm
            if read < len(rarest) and len(partial) >= n:
                # Partial sums are lower bounds: n records reach at least this.
                floor = heapq.nlargest(n, partial.values())[-1]
                if rest * lift < floor - 4 * _EPSILON:
                    return partial, read, max(rest, 0.0)
        return partial, len(rarest), 0.0

    def _targets(self, scores: dict[str, float], floor: float, reach: float) -> set[str]:
        """The records that may reach ``floor`` once lifted (by at most ``reach``).

        Those whose own score may, and the neighbours of each record whose lift alone
        reaches it.
        """
        docs = self._docs
        targets: set[str] = set()
        for record_id, score in scores.items():
            if score + reach >= floor:
                targets.add(record_id)
            if NEIGHBOUR * score >= floor:
                doc = docs[record_id]
                if doc.prev is not None:
                    targets.add(doc.prev)
                if doc.next is not None:
                    targets.add(doc.next)
        return targets

    def _meaning(self, vector: Any, seen: Filter, k: int) -> dict[str, float]:
        vectors = self._vectors
        if vectors is None or vectors.used == 0:
            return {}
        np_ = vectors.np
        cosines = vectors.cosines(vector)
        matching = np_.flatnonzero(cosines >= MIN_COSINE)
        if len(matching) == 0:
            return {}
        order = matching[np_.argsort(-cosines[matching], kind="stable")]
        want = max(FUSION_DEPTH, 4 * k)
        out: dict[str, float] = {}
        for slot in order:
            record_id = vectors.owner[int(slot)]
            if record_id is None or not seen.sees(self._docs[record_id].row):
                continue
            out[record_id] = round(float(cosines[slot]), 6)
            if len(out) == want:
                break
        return out

    def _with_neighbours(self, base: _Scores, seen: Filter, k: int) -> dict[str, float]:
        """``base`` with each conversation turn lifted by its best neighbour's score.

        A turn's score becomes ``own + NEIGHBOUR * max(score of the turns beside it)``
        (the lift is from its best neighbour, not the sum of both). Only the turns that
        can reach the ``k`` best are worked out: a lift never lowers a score, so the
        ``k``-th best base score is a floor the ``k`` best all reach, and a turn whose
        own score plus the largest possible lift stays below it cannot be among them (it
        keeps its base score, a lower bound). A record ``base`` left out (it scores at
        most ``base.bound``) is scored only when that could change a lift.
        """
        if not base.scores:
            return {}
        docs = self._docs
        given = base.scores
        best = heapq.nlargest(k, given.values())
        floor = best[-1] - 4 * _EPSILON if len(best) == k else -math.inf
        targets = self._targets(given, floor, NEIGHBOUR * max(best[0], base.bound))
        scores = dict(given)
        for record_id in targets:
            doc = docs[record_id]
            if doc.row.kind != EPISODE:
                continue
            lift = 0.0
            left_out = []
            for other in (doc.prev, doc.next):
                if other is not None:
                    score = given.get(other)
                    if score is None:
                        left_out.append(other)
                    else:
                        lift = max(lift, score)
            if lift < base.bound:
                for other in left_out:
                    lift = max(lift, base.own(other))
            if lift <= 0.0:
                continue
            mine = given.get(record_id)
            if mine is None:
                if not seen.sees(doc.row):
                    continue
                mine = base.own(record_id)
            scores[record_id] = mine + NEIGHBOUR * lift
        return scores
