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
        lexical = self._words(query, seen)
        meaning = self._meaning(vector, seen, k) if vector is not None else {}
        if meaning:
            depth = max(FUSION_DEPTH, 4 * k)
            base: dict[str, float] = {}
            for ranking in (lexical, meaning):
                for rank, record_id in enumerate(self._ranked(ranking)[:depth], start=1):
                    base[record_id] = base.get(record_id, 0.0) + 1.0 / (RRF_K + rank)
        else:
            base = lexical
        scores = self._with_neighbours(base, seen)
        ranked = self._ranked(scores)[:k]
        return [(self._docs[i].row, scores[i]) for i in ranked]

    def _ranked(self, scores: Mapping[str, float]) -> list[str]:
        docs = self._docs

        def order(record_id: str) -> tuple[float, int, str]:
            return (-round(scores[record_id], 9), -docs[record_id].row.valid_from, record_id)

        return sorted(scores, key=order)

    def _words(self, query: str, seen: Filter) -> dict[str, float]:
        terms = list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TOKENS]
        count = len(self._docs)
        if not terms or not count:
            return {}
        average = self._total_length / count or 1.0
        docs = self._docs
        scores: dict[str, float] = {}
        visible: dict[str, bool] = {}
        for term in terms:
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1.0 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
            for record_id, tf in posting.items():
                sees = visible.get(record_id)
                if sees is None:
                    sees = visible[record_id] = seen.sees(docs[record_id].row)
                if not sees:
                    continue
                norm = tf + K1 * (1.0 - B + B * docs[record_id].length / average)
                scores[record_id] = scores.get(record_id, 0.0) + idf * tf * (K1 + 1.0) / norm
        return scores

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

    def _with_neighbours(self, base: dict[str, float], seen: Filter) -> dict[str, float]:
        if not base:
            return {}
        docs = self._docs
        scores = dict(base)
        for record_id, score in base.items():
            doc = docs[record_id]
            if doc.row.kind != EPISODE:
                continue
            for other in (doc.prev, doc.next):
                if other is None:
                    continue
                neighbour = docs[other]
                if other not in base and not seen.sees(neighbour.row):
                    continue
                lift = NEIGHBOUR * score
                own = base.get(other, 0.0)
                # The lift a turn gets is from its best neighbour, not the sum of both.
                best = max(scores.get(other, 0.0) - own, lift)
                scores[other] = own + best
        return scores
