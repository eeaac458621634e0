"""Benchmark: MemoryBank recall quality and speed, beside plain BM25 and SQLite FTS5.

Run by hand (not part of the tests)::

    .venv/bin/python bench/memory_bank.py [--quick] [--sizes 1000,10000,100000]
        [--searches 200] [--remembers 200] [--embed-pool 2000] [--no-quality] [--no-speed]

**Quality** runs over the corpus of ``bench/bank_corpus.py`` (seeded): every session is
remembered with ``remember_messages`` (one namespace per person) and every changing fact
with ``remember(key=..., valid_from=...)``. Each question searches its person's
conversation turns (``kinds=["episode"]``) and is scored by its evidence turns:
recall_all@k (every evidence turn in the top k) and recall_any@k (at least one), for

- *baseline*: SQLite FTS5 ``bm25()`` over single messages (``porter unicode61``
  tokenizer, the question's words OR-ed, a short stop list), nothing else;
- *words*: ``MemoryBank()`` without an embedder (BM25 on the shared analyser, turns
  lifted by their neighbours);
- *meaning*: the cosine of all-MiniLM-L6-v2 vectors alone (question against each turn
  of the person, no words, no neighbours), computed here from the same vectors;
- *fusion*: ``MemoryBank(embedder=...)`` with the MiniLM vectors (words, meaning,
  reciprocal rank fusion, neighbours).

The MiniLM vectors of every text are computed once, in batches, and handed to the bank
through an embedder callable (the bank still calls it at ``remember`` and ``search``):
the same vectors as ``embedder="minilm"``, without embedding each text twice.
The time questions check the facts: ``current`` (search now, ``kinds=["fact"]``) and
``as-of`` (search ``as_of`` a date between two values) pass when the fact of that key
valid then is among the hits and no other value of the key is.

**Speed** fills banks of 1k, 10k and 100k conversation turns (the same generator, many
persons) and times ``search`` over all of them (the root namespace) with the corpus's
questions, p50 and p99 (with MiniLM, each query is embedded by the model in the timed
call), beside an FTS5 ``bm25()`` query (``ORDER BY rank LIMIT k``) over
the same texts in an SQLite file in the same run. In memory (``MemoryBank()``) and on
each database backend that accepts a bank (SQLite; PostgreSQL and Redis when they do),
words alone and with MiniLM. With MiniLM, ``--embed-pool`` distinct texts are embedded
by the model and record ``i`` gets the vector of text ``i mod pool`` (embedding 100k
texts takes about 20 minutes on two cores; a search's cost does not depend on which
vectors the rows hold, only on how many). ``remember`` p50 is timed on the filled bank
(with MiniLM, the fact is embedded by the model in the timed call)
beside the backend's raw insert (an SQLite row committed with ``synchronous=FULL``, a
PostgreSQL INSERT + COMMIT, a Redis RPUSH). Peak memory is ``tracemalloc``'s peak while a
bank is filled (traced Python and numpy allocations), per 100k records.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bank_corpus import Corpus, Question, generate
from framework_agents import Message
from framework_agents.bank import MemoryBank

KS = (1, 5, 10, 20)
ROOT = ("bench",)
#: The facts the speed part remembers start so (embedded live, see ``Vectors.live``).
NOTE = "Benchmark note"
# The baseline's stop list (a classic short English one, independent of the bank's).
STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


# -- vectors ---------------------------------------------------------------------------


class Vectors:
    """MiniLM vectors computed once per distinct text; an embedder callable over them."""

    def __init__(self) -> None:
        from framework_agents.graph.embedding import MiniLM

        self.model = MiniLM()
        self.cache: dict[str, np.ndarray] = {}
        self.pool: list[np.ndarray] = []
        self.alias: dict[str, np.ndarray] = {}
        #: Texts embedded by the model at every call, never from the cache (the speed
        #: part's queries and remembered notes: their embedding is part of the timing).
        self.live: set[str] = set()

    def embed_all(self, texts: Sequence[str], batch: int = 64) -> float:
        """Embed the texts not cached yet; seconds taken."""
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        start = time.perf_counter()
        for i in range(0, len(todo), batch):
            chunk = todo[i : i + batch]
            for text, vector in zip(chunk, self.model.embed(chunk), strict=True):
                self.cache[text] = vector
        return time.perf_counter() - start

    def __call__(self, texts: list[str]) -> np.ndarray:
        """The embedder the banks get: cached vectors (a miss is embedded now)."""
        if any(t in self.live or t.startswith(NOTE) for t in texts):
            return self.model.embed(texts)
        missing = [t for t in texts if t not in self.cache and t not in self.alias]
        if missing:
            self.embed_all(missing)
        return np.stack([self.alias.get(t, self.cache.get(t)) for t in texts])  # type: ignore[arg-type]


# -- the baseline: FTS5 bm25 -------------------------------------------------------------


class Fts:
    """SQLite FTS5 over single messages: ``bm25()``, the query's words OR-ed."""

    def __init__(self, path: str = ":memory:") -> None:
        self.db = sqlite3.connect(path)
        self.db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS m USING fts5(id UNINDEXED, ns UNINDEXED, text,"
            " tokenize='porter unicode61')"
        )

    def add(self, rows: Sequence[tuple[str, str, str]]) -> None:
        """Insert ``(id, namespace, text)`` rows."""
        self.db.executemany("INSERT INTO m(id, ns, text) VALUES (?, ?, ?)", rows)
        self.db.commit()

    @staticmethod
    def match(query: str) -> str:
        """The FTS5 query: each word (quoted) OR-ed, stop words left out."""
        words = [w for w in re.findall(r"\w+", query.lower()) if w not in STOP]
        return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))

    def search(self, query: str, k: int, namespace: str | None = None) -> list[str]:
        """Ids of the ``k`` best messages (of ``namespace`` if given)."""
        match = self.match(query)
        if not match:
            return []
        if namespace is None:
            sql = "SELECT id FROM m WHERE m MATCH ? ORDER BY rank LIMIT ?"
            args: tuple[Any, ...] = (match, k)
        else:
            sql = "SELECT id FROM m WHERE m MATCH ? AND ns = ? ORDER BY rank LIMIT ?"
            args = (match, namespace, k)
        return [row[0] for row in self.db.execute(sql, args)]


# -- quality ---------------------------------------------------------------------------


async def fill(bank: MemoryBank, corpus: Corpus) -> None:
    """Remember every session's turns and every key fact."""
    for session in corpus.sessions:
        await bank.remember_messages(session.messages, namespace=session.namespace)
    for fact in corpus.facts:
        await bank.remember(
            fact.text, namespace=fact.namespace, key=fact.key, valid_from=fact.valid_from
        )


def recall(rankings: dict[str, list[str]], questions: Sequence[Question]) -> dict[str, float]:
    """recall_all@k and recall_any@k over ``questions`` (percent)."""
    out: dict[str, float] = {}
    for k in KS:
        every = some = 0
        for q in questions:
            top = set(rankings[q.id][:k])
            every += all(e in top for e in q.evidence)
            some += any(e in top for e in q.evidence)
        out[f"all@{k}"] = 100.0 * every / len(questions)
        out[f"any@{k}"] = 100.0 * some / len(questions)
    return out


async def bank_rankings(bank: MemoryBank, questions: Sequence[Question]) -> dict[str, list[str]]:
    """Each question's top 20 conversation turns, as message ids."""
    out = {}
    for q in questions:
        hits = await bank.search(q.text, namespace=q.namespace, k=max(KS), kinds=["episode"])
        out[q.id] = [h.record.metadata["message_id"] for h in hits]
    return out


def meaning_rankings(
    vectors: Vectors, corpus: Corpus, questions: Sequence[Question]
) -> dict[str, list[str]]:
    """Each question's top 20 turns by cosine alone (stable: earlier turn first on a tie)."""
    turns: dict[tuple[str, ...], list[Message]] = {}
    for session in corpus.sessions:
        turns.setdefault(session.namespace, []).extend(
            m for m in session.messages if m.role in ("user", "assistant")
        )
    matrices = {ns: np.stack([vectors.cache[m.text] for m in ms]) for ns, ms in turns.items()}
    out = {}
    for q in questions:
        cosines = matrices[q.namespace] @ vectors.cache[q.text]
        order = np.argsort(-cosines, kind="stable")[: max(KS)]
        out[q.id] = [turns[q.namespace][int(i)].id for i in order]
    return out


async def time_checks(bank: MemoryBank, questions: Sequence[Question]) -> tuple[int, int, int]:
    """Of ``current``/``as-of`` questions: how many find the key's value valid then and no
    other value (in the top 5 facts), how many find any value of the key, how many asked."""
    good = found = 0
    asked = [q for q in questions if q.key is not None]
    for q in asked:
        hits = await bank.search(q.text, namespace=q.namespace, k=5, kinds=["fact"], as_of=q.as_of)
        values = {h.record.text for h in hits if h.record.key == q.key}
        good += values == {q.expected}
        found += bool(values)
    return good, found, len(asked)


async def quality(args: argparse.Namespace, vectors: Vectors) -> dict[str, Any]:
    """Every system's recall on the corpus, and the time checks."""
    corpus = generate(args.seed, args.people, args.sessions)
    questions = [q for q in corpus.questions]
    texts = [m.text for s in corpus.sessions for m in s.messages]
    seconds = vectors.embed_all(
        texts + [q.text for q in questions] + [f.text for f in corpus.facts]
    )
    print(
        f"corpus: seed {args.seed}, {args.people} persons x {args.sessions} sessions, "
        f"{corpus.messages()} turns, {len(corpus.facts)} key facts, {len(questions)} questions"
        f" (MiniLM over {len(vectors.cache)} texts in {seconds:.0f} s)"
    )
    fts = Fts()
    fts.add([(m.id, "/".join(s.namespace), m.text) for s in corpus.sessions for m in s.messages])
    recall_qs = questions
    rankings = {
        "baseline": {q.id: fts.search(q.text, max(KS), "/".join(q.namespace)) for q in recall_qs}
    }
    words = MemoryBank()
    await fill(words, corpus)
    rankings["words"] = await bank_rankings(words, recall_qs)
    rankings["meaning"] = meaning_rankings(vectors, corpus, recall_qs)
    fusion = MemoryBank(embedder=vectors)
    await fill(fusion, corpus)
    rankings["fusion"] = await bank_rankings(fusion, recall_qs)
    result: dict[str, Any] = {"corpus": corpus}
    kinds = sorted({q.kind for q in recall_qs})
    print(
        f"\n{'system':>9} "
        + " ".join(f"{'all@' + str(k):>7}" for k in KS)
        + "  "
        + " ".join(f"{'any@' + str(k):>7}" for k in KS)
    )
    for name, ranking in rankings.items():
        r = recall(ranking, recall_qs)
        result[name] = r
        print(
            f"{name:>9} "
            + " ".join(f"{r[f'all@{k}']:>6.1f}%" for k in KS)
            + "  "
            + " ".join(f"{r[f'any@{k}']:>6.1f}%" for k in KS)
        )
    print(f"\nrecall_all@10 by question type ({', '.join(kinds)}):")
    for name, ranking in rankings.items():
        cells = []
        for kind in kinds:
            of_kind = [q for q in recall_qs if q.kind == kind]
            cells.append(f"{kind} {recall(ranking, of_kind)['all@10']:.0f}%")
        print(f"{name:>9}  " + ", ".join(cells))
    for name, bank in (("words", words), ("fusion", fusion)):
        current = [q for q in questions if q.kind == "current"]
        as_of = [q for q in questions if q.kind == "as-of"]
        c_good, c_found, c_all = await time_checks(bank, current)
        a_good, a_found, a_all = await time_checks(bank, as_of)
        result[f"{name}-current"] = 100.0 * c_good / c_all
        result[f"{name}-as-of"] = 100.0 * a_good / a_all
        print(
            f"{name:>9}: current value of a superseded key {c_good}/{c_all} right "
            f"({c_found} found the key, {c_found - c_good} of them with a wrong value), "
            f"as_of value {a_good}/{a_all} right ({a_found} found, {a_found - a_good} wrong)"
        )
    gap = result["fusion"]["all@10"] - result["baseline"]["all@10"]
    print(f"\nfusion recall_all@10 - baseline recall_all@10 = {gap:+.1f} points (target >= +20)")
    result["gap"] = gap
    return result


# -- speed -----------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def speed_corpus(size: int, seed: int) -> list[tuple[tuple[str, ...], list[Message]]]:
    """``size`` conversation turns in sessions, from as many persons as it takes."""
    people = max(1, size // 280 + 1)
    corpus = generate(seed, people, 24)
    out: list[tuple[tuple[str, ...], list[Message]]] = []
    left = size
    for session in corpus.sessions:
        if left <= 0:
            break
        taken = session.messages[:left]
        out.append((session.namespace, taken))
        left -= len(taken)
    return out


async def fill_speed(
    bank: MemoryBank, sessions: list[tuple[tuple[str, ...], list[Message]]]
) -> None:
    """Remember the sessions, then one search so the index has caught up."""
    for namespace, messages in sessions:
        await bank.remember_messages(messages, namespace=namespace)
    await bank.search("warm up", namespace=ROOT, k=10)


async def time_searches(bank: MemoryBank, queries: list[str], k: int) -> list[float]:
    """Seconds per ``search`` over the root namespace (after 10 unmeasured)."""
    times = []
    for i, query in enumerate([*queries[:10], *queries]):
        start = time.perf_counter()
        await bank.search(query, namespace=ROOT, k=k)
        if i >= 10:
            times.append(time.perf_counter() - start)
    return times


def time_fts(fts: Fts, queries: list[str], k: int) -> list[float]:
    """Seconds per FTS5 query (after 10 unmeasured)."""
    times = []
    for i, query in enumerate([*queries[:10], *queries]):
        start = time.perf_counter()
        fts.search(query, k)
        if i >= 10:
            times.append(time.perf_counter() - start)
    return times


async def time_remembers(bank: MemoryBank, count: int) -> list[float]:
    """Seconds per ``remember`` of a fresh fact."""
    times = []
    for i in range(count):
        start = time.perf_counter()
        await bank.remember(
            f"{NOTE} {i}: the user prefers window seats on long flights.",
            namespace=("bench", "remember"),
        )
        times.append(time.perf_counter() - start)
    return times


def raw_sqlite_inserts(path: Path, count: int) -> list[float]:
    """Seconds per row inserted and committed with ``synchronous=FULL`` (fsync), WAL."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, body TEXT)")
    times = []
    for i in range(count):
        start = time.perf_counter()
        db.execute("BEGIN")
        db.execute("INSERT INTO t VALUES (?, ?)", (f"r{i}", "x" * 300))
        db.execute("COMMIT")
        times.append(time.perf_counter() - start)
    db.close()
    return times


async def raw_postgres_inserts(url: str, count: int) -> list[float]:
    """Seconds per INSERT + COMMIT (one transaction each)."""
    import psycopg

    # A plain table (a TEMP one is not WAL-logged: its commit would not reach the disk).
    table = f"fa_bankbench_raw_{uuid.uuid4().hex[:12]}"
    times = []
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(f"CREATE TABLE {table} (id TEXT PRIMARY KEY, body TEXT)")
        await conn.commit()
        try:
            for i in range(count):
                start = time.perf_counter()
                await conn.execute(f"INSERT INTO {table} VALUES (%s, %s)", (f"r{i}", "x" * 300))
                await conn.commit()
                times.append(time.perf_counter() - start)
        finally:
            await conn.execute(f"DROP TABLE {table}")
            await conn.commit()
    return times


async def raw_redis_inserts(url: str, count: int) -> list[float]:
    """Seconds per RPUSH."""
    import redis.asyncio as redis

    client = redis.from_url(url)
    times = []
    for i in range(count):
        start = time.perf_counter()
        await client.rpush("bank-bench-raw", f"r{i}" + "x" * 300)
        times.append(time.perf_counter() - start)
    await client.delete("bank-bench-raw")
    await client.aclose()
    return times


async def open_bank(url: str | None, embedder: Any) -> tuple[MemoryBank | None, str]:
    """A fresh bank at ``url``, or ``None`` and why not."""
    try:
        bank = MemoryBank(url, embedder=embedder)
        await bank.search("probe", namespace=ROOT, k=1)
    except Exception as exc:  # the backend may not exist yet
        return None, f"{type(exc).__name__}: {str(exc)[:70]}"
    return bank, ""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f}"


async def speed(args: argparse.Namespace, vectors: Vectors, root: Path) -> list[dict[str, Any]]:
    """Search and remember timings at every size, on every backend that takes a bank."""
    rows: list[dict[str, Any]] = []
    queries = [q.text for q in generate(args.seed, 8, 24).questions][: args.searches]
    while len(queries) < args.searches:
        queries += queries[: args.searches - len(queries)]
    vectors.live = set(queries)
    embed = []
    for query in queries:
        start = time.perf_counter()
        vectors.model.embed([query])
        embed.append(time.perf_counter() - start)
    print(
        f"MiniLM embeds one query in {_ms(statistics.median(embed)).strip()} ms p50 "
        f"({_ms(_percentile(embed, 0.99)).strip()} ms p99): part of every MiniLM search below\n"
    )
    print(SPEED_HEAD)
    print("-" * len(SPEED_HEAD))
    backends: list[tuple[str, str | None]] = [("memory", None), ("sqlite", "sqlite")]
    if not args.no_databases:
        backends += [("postgres", args.postgres), ("redis", args.redis)]
    for size in args.sizes:
        sessions = speed_corpus(size, args.seed)
        texts = [m.text for _, ms in sessions for m in ms]
        fts_path = root / f"fts-{size}.db"
        fts = Fts(str(fts_path))
        fts.add([(m.id, "/".join(ns), m.text) for ns, ms in sessions for m in ms])
        fts_times = time_fts(fts, queries, args.k)
        # The vectors: every distinct text up to the pool, the rest borrow (see the docstring).
        pool = list(dict.fromkeys(texts))[: args.embed_pool]
        vectors.embed_all(pool)
        vectors.alias = {
            t: vectors.cache[pool[i % len(pool)]]
            for i, t in enumerate(dict.fromkeys(texts))
            if t not in vectors.cache
        }
        for backend, target in backends:
            for embedder in (None, "minilm"):
                if size > args.db_max and target not in (None, "sqlite"):
                    continue
                url = bank_url(target, root, f"{size}-{embedder or 'words'}")
                bank, why = await open_bank(url, vectors if embedder else None)
                label = f"{backend} {'MiniLM' if embedder else 'words'}"
                if bank is None:
                    print(f"{size:>7} {label:<16} skipped: {why}")
                    rows.append({"size": size, "label": label, "skipped": why})
                    continue
                gc.collect()
                tracemalloc.start()
                start = time.perf_counter()
                await fill_speed(bank, sessions)
                filled = time.perf_counter() - start
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                search = await time_searches(bank, queries, args.k)
                remember = await time_remembers(bank, args.remembers)
                raw = await raw_inserts(backend, root, args)
                row = {
                    "size": size,
                    "label": label,
                    "fill_s": filled,
                    "peak_mb": peak / 2**20,
                    "search_p50": statistics.median(search),
                    "search_p99": _percentile(search, 0.99),
                    "fts_p50": statistics.median(fts_times),
                    "fts_p99": _percentile(fts_times, 0.99),
                    "remember_p50": statistics.median(remember),
                    "raw_p50": statistics.median(raw) if raw else None,
                }
                rows.append(row)
                print_speed_row(row)
                await bank.close()
                del bank
                await drop_scratch(url)
                gc.collect()
        fts.db.close()
    vectors.alias, vectors.live = {}, set()
    return rows


def bank_url(target: str | None, root: Path, name: str) -> str | None:
    """A fresh bank's URL: a SQLite file, a PostgreSQL schema, a Redis key prefix."""
    if target == "sqlite":
        return f"sqlite:///{root}/bank-{name}.db"
    if target is not None and target.startswith("redis"):
        return f"{target}?prefix=fa-bankbench-{uuid.uuid4().hex[:12]}:"
    if target is not None and target.startswith("postgres"):
        return f"{target}?schema=fa_bankbench_{uuid.uuid4().hex[:12]}"
    return target


async def drop_scratch(url: str | None) -> None:
    """Remove a database bank's scratch schema or keys (a SQLite file goes with the dir)."""
    if url is not None and "?schema=" in url:
        import psycopg

        base, schema = url.split("?schema=")
        async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return
    if url is None or not url.startswith("redis") or "?prefix=" not in url:
        return
    import redis.asyncio as redis

    base, prefix = url.split("?prefix=")
    client = redis.from_url(base)
    keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
    for start in range(0, len(keys), 1000):
        await client.delete(*keys[start : start + 1000])
    await client.aclose()


async def raw_inserts(backend: str, root: Path, args: argparse.Namespace) -> list[float]:
    """The backend's raw insert timings (none for the in-process backend)."""
    if backend == "sqlite":
        return raw_sqlite_inserts(root / f"raw-{uuid.uuid4().hex[:8]}.db", args.remembers)
    if backend == "postgres":
        return await raw_postgres_inserts(args.postgres, args.remembers)
    if backend == "redis":
        return await raw_redis_inserts(args.redis, args.remembers)
    return []


SPEED_HEAD = (
    f"{'records':>7} {'bank':<16} {'search p50':>10} {'p99':>8} {'FTS5 p50':>9} {'p99':>8} "
    f"{'p50 ratio':>9} {'remember p50':>12} {'raw p50':>8} {'ratio':>6} {'peak MB/100k':>12}"
)


def print_speed_row(row: dict[str, Any]) -> None:
    """One line of the speed table."""
    raw = row["raw_p50"]
    raw_cells = f"{_ms(raw)} {row['remember_p50'] / raw:>6.2f}" if raw else f"{'-':>8} {'-':>6}"
    print(
        f"{row['size']:>7} {row['label']:<16} {_ms(row['search_p50'])}ms "
        f"{_ms(row['search_p99'])} {_ms(row['fts_p50'])} {_ms(row['fts_p99'])} "
        f"{row['search_p50'] / row['fts_p50']:>9.2f} {_ms(row['remember_p50'])}ms "
        f"{raw_cells} {row['peak_mb'] * 100_000 / row['size']:>12.0f}"
    )


def main() -> None:
    """Parse arguments, run the quality and speed parts, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    numbers = {
        "--seed": 7,
        "--people": 8,
        "--sessions": 24,
        "--searches": 200,
        "--remembers": 200,
        "--k": 10,
        "--embed-pool": 2000,
        "--db-max": 100_000,  # the largest size run on PostgreSQL and Redis
    }
    for name, default in numbers.items():
        parser.add_argument(name, type=int, default=default)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-databases", action="store_true", help="no PostgreSQL, Redis")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--quick", action="store_true", help="sizes 1000,10000; 50 searches")
    parser.add_argument("--dir", default=None, help="where SQLite files go (default: cwd)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.searches, args.remembers = "1000,10000", 50, 50
    args.sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, sqlite "
        f"{sqlite3.sqlite_version}, {os.cpu_count()} cpus, {platform.machine()}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    vectors = Vectors()
    if not args.no_quality:
        asyncio.run(quality(args, vectors))
    if args.no_speed:
        return
    print(
        f"\nspeed: k={args.k}, {args.searches} searches (root namespace, every record),"
        f" {args.remembers} remembers, MiniLM vectors from a pool of "
        f"{args.embed_pool} texts; times in ms; ratio = bank / baseline\n"
    )
    with tempfile.TemporaryDirectory(prefix=".bank-bench-", dir=args.dir or os.getcwd()) as root:
        asyncio.run(speed(args, vectors, Path(root)))


if __name__ == "__main__":
    main()
