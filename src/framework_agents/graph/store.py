"""GraphStore: a quad store with a materialised, incrementally maintained closure.

Engine: in-process indexes (dicts of sets over integer term ids) hold the asserted quads
and the closure; the reasoner (:mod:`.rules`) keeps the closure exact on every add and
remove; the retrieval index (:mod:`.retrieval`) follows every change. With a ``path`` the
asserted quads are also kept in SQLite (:mod:`._disk`), under a lock (:mod:`._lock`), and
the closure is read back from a snapshot (:mod:`._snapshot`) or rebuilt on open.
``bench/graph.py`` and ``docs/graph.md`` hold the measurements behind this choice.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, NamedTuple

from .._persist import run_blocking, strict_loads
from ..errors import GraphStateError, GraphStoreCorruptError, GraphTermError, InvalidArgumentError
from ._disk import FORMAT, Disk, Row, encode_object
from ._snapshot import read_snapshot, write_snapshot
from ._table import TermTable
from .retrieval import LexicalIndex
from .rules import Closure, Triple
from .terms import (
    DEFAULT_PREFIXES,
    IRI,
    Position,
    Term,
    TermInput,
    term_from_json,
    term_to_json,
    to_term,
)

__all__ = [
    "ENTAILED_GRAPH",
    "GRAPH_STATE_FORMAT_VERSION",
    "SNAPSHOT_MIN",
    "Fact",
    "GraphStore",
    "Quad",
]

#: The named graph that holds entailed quads (never asserted into, never exported).
ENTAILED_GRAPH = "urn:x-framework-agents:entailed"
#: Version of the ``export_state()`` document.
GRAPH_STATE_FORMAT_VERSION = 1
#: An on-disk store whose closure has at least this many triples saves it on close
#: (``closure.snapshot``), so the next open reads it instead of reasoning again.
SNAPSHOT_MIN = 20_000

logger = logging.getLogger(__name__)

#: A str as JSON text, non-ASCII kept (what ``encode_object`` writes for an entity).
_json_string = json.encoder.encode_basestring

_Quad = tuple[int, int, int, int]  # subject, predicate, object, graph (0 = default graph)


class Quad(NamedTuple):
    """A fact in a named graph; ``graph`` is ``None`` for the default graph."""

    subject: IRI
    predicate: IRI
    object: Term
    graph: str | None


@dataclass(frozen=True, slots=True)
class Fact:
    """A closure entry ranked by :meth:`GraphStore.relevant`."""

    subject: IRI
    predicate: IRI
    object: Term
    graph: str | None
    entailed: bool
    score: float

    @property
    def text(self) -> str:
        """One line: ``subject predicate object``, literals quoted, ``(inferred)`` if entailed."""
        line = f"{self.subject.key} {self.predicate.key} {self.object.key}"
        return f"{line} (inferred)" if self.entailed else line


class _State:
    """Everything in memory: terms, asserted quads, closure and retrieval index."""

    def __init__(self) -> None:
        """An empty state."""
        self.terms = TermTable()
        self.graphs: dict[Triple, set[int]] = {}
        self.closure = Closure()
        self.index = LexicalIndex(self.closure, self.terms)

    @classmethod
    def build(cls, quads: Iterable[tuple[Term, Term, Term, IRI | None]]) -> _State:
        state = cls()
        for quad in quads:
            ids = state.intern(quad)
            state.graphs.setdefault(ids[:3], set()).add(ids[3])
        state.closure.rebuild(state.graphs)
        state.index.update(state.closure.triples, ())
        return state

    def dump(self) -> dict[str, Any]:
        """Plain data for a closure snapshot (see :mod:`._snapshot`)."""
        return {
            "v": 1,
            "terms": self.terms.dump(),
            "graphs": self.graphs,
            "closure": self.closure.dump(),
            "index": self.index.dump(),
        }

    @classmethod
    def restore(cls, data: Any) -> _State:
        """The state :meth:`dump` described; data of another shape raises ``ValueError``."""
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("not a closure snapshot of layout 1")
        state = cls.__new__(cls)
        state.terms = TermTable.restore(data["terms"])
        state.graphs = data["graphs"]
        state.closure = Closure.restore(data["closure"])
        state.index = LexicalIndex.restore(state.closure, state.terms, data["index"])
        if state.graphs.keys() != state.closure.base:
            raise ValueError("the snapshot's asserted quads and closure base differ")
        return state

    def intern(self, quad: tuple[Term, Term, Term, IRI | None]) -> _Quad:
        intern = self.terms.intern
        s, p, o, g = quad
        return (intern(s), intern(p), intern(o), 0 if g is None else intern(g))

    def lookup(self, quad: tuple[Term, Term, Term, IRI | None]) -> _Quad | None:
        ids = [self.terms.lookup(t) for t in quad[:3]]
        g = 0 if quad[3] is None else self.terms.lookup(quad[3])
        if g is None or None in ids:
            return None
        return (ids[0], ids[1], ids[2], g)  # type: ignore[return-value]

    def row(self, q: _Quad) -> Row:
        key, term = self.terms.key, self.terms.term
        return (
            key(q[0]),
            key(q[1]),
            encode_object(term_to_json(term(q[2]))),
            key(q[3]) if q[3] else "",
        )

    def add(self, quads: Sequence[_Quad]) -> None:
        fresh: list[Triple] = []
        for s, p, o, g in quads:
            graphs = self.graphs.setdefault((s, p, o), set())
            if not graphs:
                fresh.append((s, p, o))
            graphs.add(g)
        self.index.update(self.closure.add(fresh), ())

    def remove(self, quads: Sequence[_Quad]) -> None:
        gone: list[Triple] = []
        for s, p, o, g in quads:
            graphs = self.graphs[(s, p, o)]
            graphs.discard(g)
            if not graphs:
                del self.graphs[(s, p, o)]
                gone.append((s, p, o))
        self.index.update((), self.closure.remove(gone))

    def graph_name(self, t: Triple) -> tuple[str | None, bool]:
        graphs = self.graphs.get(t)
        if not graphs:
            return ENTAILED_GRAPH, True
        # By name, not id: ids follow insertion order, the answer must not.
        key = self.terms.key
        first = min(graphs, key=lambda g: key(g) if g else "")
        return (key(first) if first else None), False

    def quad(self, t: Triple, g: int | None) -> Quad:
        term = self.terms.term
        name = ENTAILED_GRAPH if g is None else (self.terms.key(g) if g else None)
        return Quad(term(t[0]), term(t[1]), term(t[2]), name)  # type: ignore[arg-type]


class GraphStore:
    """Quads (subject, predicate, object, graph) with a materialised RDFS/OWL-RL closure.

    ``GraphStore()`` lives in memory; ``GraphStore(path)`` also keeps the asserted quads in
    ``<path>/graph.sqlite3`` (every mutation durable when it returns, crash-safe,
    reopenable). One opener holds a path at a time (``graph.lock``; others wait up to
    ``lock_timeout`` seconds, then ``GRAPH_STORE_BUSY``). ``close()`` saves a big closure
    to ``closure.snapshot`` so the next open need not reason again; otherwise the closure
    is rebuilt on open. Entailed quads are in :data:`ENTAILED_GRAPH`::

        <path>/graph.sqlite3      asserted quads, meta(format, version, generation)  0600
        <path>/graph.lock         the opener's lock                                    0600
        <path>/closure.snapshot   closure + indexes at one generation (a cache)        0600

    Mutations are ``async`` (their work runs in a thread, which a cancel waits for: a
    write is never cut in half); reads are synchronous and
    fast. An on-disk store opens on ``await store.open()`` or on the first mutation; a
    synchronous read of a store that is not open yet opens it on the spot (blocking), and
    a read waits while a mutation holds the lock: async callers run reads in a thread, as
    GraphMemory and the graph tools do.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        prefixes: Mapping[str, str] | None = None,
        lock_timeout: float = 0.0,
    ) -> None:
        """Check the arguments; an on-disk store opens on first use.

        ``lock_timeout`` is how long opening an on-disk store waits for another process
        that holds it open (seconds) before ``GRAPH_STORE_BUSY``.
        """
        self.path: Path | None = _check_path(path)
        if (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, int | float)
            or not 0 <= lock_timeout < float("inf")
        ):
            raise InvalidArgumentError(
                f"lock_timeout must be a non-negative number of seconds, not {lock_timeout!r}"
            )
        self._lock_timeout = float(lock_timeout)
        self._snapshot_at: int | None = None
        self.prefixes: dict[str, str] = {**DEFAULT_PREFIXES, **_check_prefixes(prefixes)}
        self._lock = threading.RLock()
        self._disk: Disk | None = None
        self._state: _State | None = _State() if self.path is None else None

    # -- life cycle --------------------------------------------------------------------

    def _open_sync(self) -> _State:
        with self._lock:
            if self._state is not None:
                return self._state
            assert self.path is not None
            disk = Disk(self.path, lock_timeout=self._lock_timeout)
            disk.open()
            try:
                state = self._restore(disk)
                self._snapshot_at = disk.generation if state is not None else None
                if state is None:
                    state = _State.build(self._decode_row(row) for row in disk.rows())
            except (GraphTermError, ValueError, TypeError, RecursionError) as exc:
                disk.close()
                reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
                raise GraphStoreCorruptError(
                    f"{disk.file} holds a malformed quad: {reason}; it was left untouched"
                ) from exc
            except BaseException:
                disk.close()
                raise
            self._disk, self._state = disk, state
            return state

    def _restore(self, disk: Disk) -> _State | None:
        """The state of the closure snapshot, if it matches the database; else ``None``."""
        payload = read_snapshot(disk.directory, disk.generation)
        if payload is None:
            return None
        try:
            state = _State.restore(payload)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            logger.warning("ignoring the closure snapshot of %s: %s", disk.directory, exc)
            return None
        if sum(len(g) for g in state.graphs.values()) != disk.count():
            logger.warning("ignoring the closure snapshot of %s: stale", disk.directory)
            return None
        return state

    def _save_snapshot(self, disk: Disk, state: _State) -> None:
        """Save the closure for the next open, when it is big and changed since the last."""
        if disk.generation == self._snapshot_at or len(state.closure.triples) < SNAPSHOT_MIN:
            return
        try:
            write_snapshot(disk.directory, disk.generation, state.dump())
        except OSError as exc:  # a cache: the next open rebuilds instead
            logger.warning("could not save the closure snapshot of %s: %s", disk.directory, exc)
            return
        self._snapshot_at = disk.generation

    async def open(self) -> None:
        """Load the store (an on-disk store reads its snapshot, or its quads and reasons)."""
        await run_blocking(self._open_sync)

    async def close(self) -> None:
        """Save the closure snapshot if due, close the database and let the lock go.

        A later call reopens the store. No-op for an in-memory store.
        """

        def close() -> None:
            with self._lock:
                disk, state = self._disk, self._state
                if disk is None:
                    return
                try:
                    if state is not None:
                        self._save_snapshot(disk, state)
                finally:
                    disk.close()
                    self._disk, self._state = None, None

        await run_blocking(close)

    async def __aenter__(self) -> GraphStore:
        """Open the store."""
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the store."""
        await self.close()

    @contextmanager
    def _read(self) -> Iterator[_State]:
        with self._lock:
            yield self._open_sync()

    # -- terms -------------------------------------------------------------------------

    def _parse(self, fact: Sequence[Any]) -> tuple[Term, Term, Term, IRI | None]:
        if not isinstance(fact, Sequence) or isinstance(fact, str) or len(fact) not in (3, 4):
            raise GraphTermError(f"a fact is (subject, predicate, object[, graph]), not {fact!r}")
        s = to_term(fact[0], "subject", prefixes=self.prefixes)
        p = to_term(fact[1], "predicate", prefixes=self.prefixes)
        o = to_term(fact[2], "object", prefixes=self.prefixes)
        g = self._graph(fact[3] if len(fact) == 4 else None)
        return s, p, o, g

    def _graph(self, graph: object) -> IRI | None:
        if graph is None:
            return None
        term = to_term(graph, "graph", prefixes=self.prefixes)
        assert isinstance(term, IRI)
        if term.value == ENTAILED_GRAPH:
            raise GraphTermError(f"graph: {ENTAILED_GRAPH} holds entailments and is read-only")
        return term

    def _decode_row(self, row: Row) -> tuple[Term, Term, Term, IRI | None]:
        """The terms of a stored row, read strictly (``ValueError``: not as the store writes).

        The object is read by the persistence layer's strict reader (no duplicate key,
        NaN or lone surrogate) and must be the canonical text the store writes, as the
        names must be the terms' keys: a row in any other spelling would never match the
        row a later remove deletes, and the fact would come back on the next open.
        """
        s, p, o, g = row
        graph = None if g == "" else term_from_json(g, "graph")
        if graph is not None and graph.key == ENTAILED_GRAPH:
            raise GraphTermError(f"graph: {ENTAILED_GRAPH} holds entailments, never stored")
        if not isinstance(o, str):
            raise ValueError(f"a stored object is JSON text, not {type(o).__name__}")
        subject = term_from_json(s, "subject")
        predicate = term_from_json(p, "predicate")
        value = strict_loads(o.encode())
        obj = term_from_json(value, "object")
        # An entity's text is its key as a JSON string (the common case, and a fast check).
        text = _json_string(obj.key) if isinstance(value, str) else encode_object(value)
        if (
            subject.key != s
            or predicate.key != p
            or (graph is not None and graph.key != g)
            or text != o
            or (not isinstance(value, str) and term_to_json(obj) != value)
        ):
            raise ValueError(f"the row {row!r:.200} is not in the form the store writes")
        return subject, predicate, obj, IRI(graph.key) if graph is not None else None

    # -- mutations ---------------------------------------------------------------------

    def _mutate(self, quads: list[tuple[Term, Term, Term, IRI | None]], adding: bool) -> int:
        with self._lock:
            state = self._open_sync()
            todo = _new_quads(state, quads) if adding else _held_quads(state, quads)
            if not todo:
                return 0
            if self._disk is not None:
                rows = [state.row(q) for q in todo]
                (self._disk.insert if adding else self._disk.delete)(rows)
            (state.add if adding else state.remove)(todo)
            return len(todo)

    async def add(
        self, subject: TermInput, predicate: TermInput, object: TermInput, graph: str | None = None
    ) -> bool:
        """Assert one fact; ``False`` if it was already asserted in that graph."""
        return await self.add_many([(subject, predicate, object, graph)]) == 1

    async def add_many(self, facts: Iterable[Sequence[Any]]) -> int:
        """Assert ``(subject, predicate, object[, graph])`` facts in one durable step."""
        quads = [self._parse(f) for f in _batch(facts, "add_many")]
        return await run_blocking(self._mutate, quads, True)

    async def remove(
        self, subject: TermInput, predicate: TermInput, object: TermInput, graph: str | None = None
    ) -> bool:
        """Retract one asserted fact (and the entailments only it supported)."""
        return await self.remove_many([(subject, predicate, object, graph)]) == 1

    async def remove_many(self, facts: Iterable[Sequence[Any]]) -> int:
        """Retract asserted facts in one durable step; unknown facts are ignored."""
        quads = [self._parse(f) for f in _batch(facts, "remove_many")]
        return await run_blocking(self._mutate, quads, False)

    def _replace(self, quads: list[tuple[Term, Term, Term, IRI | None]]) -> None:
        state = _State.build(quads)  # built outside the lock: readers go on meanwhile
        with self._lock:
            self._open_sync()
            if self._disk is not None:
                self._disk.replace(state.row(q) for q in self._all_quads(state))
            self._state = state

    async def clear(self) -> None:
        """Forget every fact."""
        await run_blocking(self._replace, [])

    # -- reads -------------------------------------------------------------------------

    @staticmethod
    def _all_quads(state: _State) -> Iterator[_Quad]:
        for (s, p, o), graphs in state.graphs.items():
            for g in graphs:
                yield (s, p, o, g)

    def quads(
        self,
        subject: TermInput | None = None,
        predicate: TermInput | None = None,
        object: TermInput | None = None,
        *,
        graph: str | EllipsisType | None = ...,
        entailed: bool = True,
    ) -> list[Quad]:
        """Closure quads matching a pattern (``None`` = any), in canonical order.

        ``graph=...`` (the default) matches every graph, ``None`` the default graph and
        :data:`ENTAILED_GRAPH` the entailments; ``entailed=False`` keeps asserted quads only.
        """
        positions: tuple[Position, ...] = ("subject", "predicate", "object")
        pattern: list[Term | None] = [
            None if v is None else to_term(v, pos, prefixes=self.prefixes)
            for v, pos in zip((subject, predicate, object), positions, strict=True)
        ]
        with self._read() as state:
            ids = [None if t is None else state.terms.lookup(t) for t in pattern]
            if any(i is None and t is not None for i, t in zip(ids, pattern, strict=True)):
                return []
            want_g = self._wanted_graph(state, graph)
            if want_g == _NO_SUCH_GRAPH:
                return []
            out = self._collect(state, ids, want_g, entailed)
        out.sort(key=lambda q: (q.subject.key, q.predicate.key, q.object.key, q.graph or ""))
        return out

    def _wanted_graph(self, state: _State, graph: object) -> int | EllipsisType | None:
        """The graph id ``quads(graph=...)`` keeps: ``...`` any, ``None`` the entailments.

        :data:`_NO_SUCH_GRAPH` when the graph named holds nothing.
        """
        if graph is ...:
            return ...
        named = None if graph is None else to_term(graph, "graph", prefixes=self.prefixes)
        if isinstance(named, IRI) and named.value == ENTAILED_GRAPH:
            return None  # however it was spelt (a str, <...>, an IRI)
        g_term = self._graph(graph)
        found = 0 if g_term is None else state.terms.lookup(g_term)
        return _NO_SUCH_GRAPH if found is None else found

    @staticmethod
    def _collect(
        state: _State,
        ids: list[int | None],
        want_g: int | EllipsisType | None,
        entailed: bool,
    ) -> list[Quad]:
        """The quads of the closure triples matching ``ids`` that are in graph ``want_g``."""
        out: list[Quad] = []
        for t in GraphStore._match(state, ids[0], ids[1], ids[2]):
            graphs = state.graphs.get(t)
            for g in sorted(graphs) if graphs else ([None] if entailed else []):
                if want_g is ... or want_g == g:
                    out.append(state.quad(t, g))
        return out

    @staticmethod
    def _match(state: _State, s: int | None, p: int | None, o: int | None) -> Iterator[Triple]:
        c = state.closure
        if s is not None:
            return _from_subject(c.spo.get(s, {}), s, p, o)
        if o is not None:
            return _from_object(c.ops.get(o, {}), p, o)
        if p is not None:
            return ((s2, p, o2) for s2, objs in c.pso.get(p, {}).items() for o2 in objs)
        return iter(c.triples)

    def contains(self, subject: TermInput, predicate: TermInput, object: TermInput) -> bool:
        """Whether the closure (asserted or entailed) holds this triple."""
        return bool(self.quads(subject, predicate, object))

    def mentions(self, term: TermInput) -> bool:
        """Whether some closure fact has ``term`` as its subject, predicate or object."""
        wanted = to_term(term, "object", prefixes=self.prefixes)
        with self._read() as state:
            ident = state.terms.lookup(wanted)
            c = state.closure
            return ident is not None and (ident in c.spo or ident in c.pso or ident in c.ops)

    def is_entailed(self, subject: TermInput, predicate: TermInput, object: TermInput) -> bool:
        """Whether the triple is in the closure without being asserted in any graph."""
        found = self.quads(subject, predicate, object)
        return bool(found) and all(q.graph == ENTAILED_GRAPH for q in found)

    @property
    def closure_size(self) -> int:
        """How many distinct triples the closure holds (asserted and entailed)."""
        with self._read() as state:
            return len(state.closure.triples)

    @property
    def asserted_count(self) -> int:
        """How many quads are asserted (a triple asserted in two graphs counts twice)."""
        with self._read() as state:
            return sum(len(g) for g in state.graphs.values())

    def __len__(self) -> int:
        """The closure size (asserted and entailed triples)."""
        return self.closure_size

    def relevant(self, text: str, k: int = 8) -> list[Fact]:
        """The ``k`` closure entries most relevant to ``text``, best first (deterministic)."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"text must be a str, not {type(text).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidArgumentError(f"k must be a non-negative integer, not {k!r}")
        with self._read() as state:
            ranked = state.index.search(text, k, lambda t: t in state.graphs)
            out: list[Fact] = []
            for score, t in ranked:
                graph, entailed = state.graph_name(t)
                s, p, o = (state.terms.term(i) for i in t)
                out.append(Fact(s, p, o, graph, entailed, score))  # type: ignore[arg-type]
            return out

    # -- state -------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """The asserted quads as a versioned JSON-serialisable dict (no entailments)."""
        with self._read() as state:
            rows = [state.row(q) for q in self._all_quads(state)]
        rows.sort()
        quads = [[s, p, json.loads(o), g or None] for s, p, o, g in rows]
        return {"format": FORMAT, "version": GRAPH_STATE_FORMAT_VERSION, "quads": quads}

    async def import_state(self, state: Mapping[str, Any]) -> None:
        """Replace every fact by those of an exported state and recompute the closure."""
        quads = _parse_state(state)
        await run_blocking(self._replace, quads)


def _batch(facts: object, where: str) -> Iterable[Sequence[Any]]:
    if isinstance(facts, str | bytes) or not isinstance(facts, Iterable):
        raise InvalidArgumentError(
            f"{where}() takes an iterable of (subject, predicate, object[, graph]) facts, "
            f"not {type(facts).__name__}"
        )
    return facts


_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9._+-]*$")


def _check_path(path: object) -> Path | None:
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike) or isinstance(path, bytes):
        raise InvalidArgumentError(f"path must be a str or a path, not {type(path).__name__}")
    resolved = os.fspath(path)
    if not isinstance(resolved, str) or not resolved:
        raise InvalidArgumentError(f"path must be a non-empty text path, not {path!r}")
    return Path(resolved)


_NO_SUCH_GRAPH = -1  # what GraphStore._wanted_graph answers for a graph holding nothing


def _from_subject(
    by_predicate: Mapping[int, Iterable[int]], s: int, p: int | None, o: int | None
) -> Iterator[Triple]:
    """The triples of subject ``s`` (``by_predicate``: its objects by predicate) matching."""
    for p2, objs in by_predicate.items():
        if p is None or p == p2:
            yield from ((s, p2, o2) for o2 in objs if o is None or o == o2)


def _from_object(
    by_predicate: Mapping[int, Iterable[int]], p: int | None, o: int
) -> Iterator[Triple]:
    """The triples of object ``o`` (``by_predicate``: its subjects by predicate) matching."""
    for p2, subs in by_predicate.items():
        if p is None or p == p2:
            yield from ((s2, p2, o) for s2 in subs)


def _new_quads(state: _State, quads: list[tuple[Term, Term, Term, IRI | None]]) -> list[_Quad]:
    """The distinct ``quads`` not yet asserted (their terms interned in ``state``)."""
    ids = [state.intern(q) for q in quads]
    return [q for q in dict.fromkeys(ids) if q[3] not in state.graphs.get(q[:3], ())]


def _held_quads(state: _State, quads: list[tuple[Term, Term, Term, IRI | None]]) -> list[_Quad]:
    """The distinct ``quads`` that are asserted in ``state``."""
    found = (state.lookup(q) for q in quads)
    return [
        q
        for q in dict.fromkeys(f for f in found if f is not None)
        if q[3] in state.graphs.get(q[:3], ())
    ]


def _check_prefixes(prefixes: object) -> dict[str, str]:
    if prefixes is None:
        return {}
    if not isinstance(prefixes, Mapping):
        raise InvalidArgumentError(
            f"prefixes must map prefix names to namespaces, not {type(prefixes).__name__}"
        )
    for prefix, namespace in prefixes.items():
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise InvalidArgumentError(f"{prefix!r} is not a prefix name (like ex or foaf)")
        if not isinstance(namespace, str) or not namespace or re.search(r"\s", namespace):
            raise InvalidArgumentError(f"prefix {prefix!r}: {namespace!r} is not a namespace IRI")
    return dict(prefixes)


def _parse_state(state: Mapping[str, Any]) -> list[tuple[Term, Term, Term, IRI | None]]:
    if not isinstance(state, Mapping):
        raise GraphStateError(f"a graph state is a dict, not {type(state).__name__}")
    if set(state) != {"format", "version", "quads"} or state.get("format") != FORMAT:
        raise GraphStateError(
            f"a graph state has exactly the keys format={FORMAT!r}, version and quads; "
            f"got {sorted(state)}"
        )
    _check_state_version(state["version"])
    rows = state["quads"]
    if not isinstance(rows, list):
        raise GraphStateError("graph state quads must be a list")
    return [_parse_row(i, row) for i, row in enumerate(rows)]


def _check_state_version(version: object) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise GraphStateError(f"graph state version must be a positive integer, not {version!r}")
    if version > GRAPH_STATE_FORMAT_VERSION:
        raise GraphStateError(
            f"graph state version {version} is newer than {GRAPH_STATE_FORMAT_VERSION}; "
            "upgrade to read it"
        )


def _parse_row(i: int, row: object) -> tuple[Term, Term, Term, IRI | None]:
    """Quad ``i`` of a graph state, ``[subject, predicate, object, graph]``, parsed."""
    if not isinstance(row, list) or len(row) != 4:
        raise GraphStateError(f"quad {i} must be [subject, predicate, object, graph]")
    s, p, o, g = row
    try:
        if g is not None and (not isinstance(g, str) or g == ENTAILED_GRAPH):
            raise GraphTermError(f"graph: {g!r} is not an assertable graph name")
        return (
            term_from_json(s, "subject"),
            term_from_json(p, "predicate"),
            term_from_json(o, "object"),
            None if g is None else IRI(term_from_json(g, "graph").key),
        )
    except GraphTermError as exc:
        raise GraphStateError(f"quad {i}: {exc.message}") from exc
