"""Engine candidates for GraphStore, measured on the bench/graph.py workload (run by hand).

``.venv/bin/python bench/graph_engines.py [--triples N]`` (needs ``pip install pyoxigraph``
for the pyoxigraph rows; they are skipped without it).

Measured per candidate: bulk load of the asserted quads, one durable add (commit/fsync),
reading everything back (what reopening costs), a one-subject pattern lookup, and for
pyoxigraph the RDFS/OWL-RL closure computed in the engine with SPARQL ``INSERT ... WHERE``
rules iterated to a fixpoint (the only way to reason inside it: it has no reasoner).
The chosen design (Python indexes + SQLite for durability) is measured by bench/graph.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from framework_agents.graph import Literal
from graph import pct, workload

EX = "http://example.org/"
NS = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "ex": EX,
}

RULES = [  # SPARQL forms of the rules in framework_agents.graph.rules
    "?p rdfs:domain ?c . ?x ?p ?y",
    "?x rdf:type ?c",
    "?p rdfs:range ?c . ?x ?p ?y . FILTER(!isLiteral(?y))",
    "?y rdf:type ?c",
    "?p rdfs:subPropertyOf ?q . ?q rdfs:subPropertyOf ?r",
    "?p rdfs:subPropertyOf ?r",
    "?p rdfs:subPropertyOf ?q . ?x ?p ?y",
    "?x ?q ?y",
    "?c rdfs:subClassOf ?d . ?x rdf:type ?c",
    "?x rdf:type ?d",
    "?c rdfs:subClassOf ?d . ?d rdfs:subClassOf ?e",
    "?c rdfs:subClassOf ?e",
    "?p rdf:type owl:TransitiveProperty . ?x ?p ?y . ?y ?p ?z",
    "?x ?p ?z",
    "?p rdf:type owl:SymmetricProperty . ?x ?p ?y . FILTER(!isLiteral(?y))",
    "?y ?p ?x",
    "?p owl:inverseOf ?q . ?x ?p ?y . FILTER(!isLiteral(?y))",
    "?y ?q ?x",
    "?p owl:inverseOf ?q . ?x ?q ?y . FILTER(!isLiteral(?y))",
    "?y ?p ?x",
    "?x owl:sameAs ?y . FILTER(!isLiteral(?y))",
    "?y owl:sameAs ?x",
    "?x owl:sameAs ?y . ?x ?p ?o . FILTER(!isLiteral(?y))",
    "?y ?p ?o",
    "?x owl:sameAs ?y . ?s ?p ?x",
    "?s ?p ?y",
]


def _iri(value: str) -> str:
    prefix, _, local = value.partition(":")
    return NS[prefix] + local if prefix in NS else value


def rows(facts: list[tuple[Any, ...]]) -> list[tuple[str, str, str, str]]:
    out = []
    for s, p, o in facts:
        obj = json.dumps({"literal": o.value}) if isinstance(o, Literal) else json.dumps(o)
        out.append((s, p, obj, ""))
    return out


def bench_sqlite(data: list[tuple[str, str, str, str]], tmp: Path) -> None:
    conn = sqlite3.connect(tmp / "g.sqlite3", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE q (s, p, o, g, PRIMARY KEY (s, p, o, g)) WITHOUT ROWID")
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO q VALUES (?, ?, ?, ?)", data)
    conn.execute("COMMIT")
    load = time.perf_counter() - t0
    lat = []
    for i in range(200):
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.execute("INSERT INTO q VALUES (?, ?, ?, ?)", (f"ex:n{i}", "ex:p", '"ex:o"', ""))
        conn.execute("COMMIT")
        lat.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    got = conn.execute("SELECT s, p, o, g FROM q").fetchall()
    read = time.perf_counter() - t0
    print(
        f"sqlite3 WAL+FULL: load {load:.2f} s, durable add p50 {pct(lat, 0.5):.2f} ms "
        f"p99 {pct(lat, 0.99):.2f} ms, read all {read:.2f} s ({len(got)} rows)"
    )
    conn.close()


def bench_log(data: list[tuple[str, str, str, str]], tmp: Path) -> None:
    path = tmp / "g.log"
    t0 = time.perf_counter()
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(["+", *r]) + "\n" for r in data)
        fh.flush()
        os.fsync(fh.fileno())
    load = time.perf_counter() - t0
    lat = []
    with open(path, "a", encoding="utf-8") as fh:
        for i in range(200):
            t0 = time.perf_counter()
            fh.write(json.dumps(["+", f"ex:n{i}", "ex:p", '"ex:o"', ""]) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            lat.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    with open(path, encoding="utf-8") as fh:
        got = [json.loads(line) for line in fh]
    read = time.perf_counter() - t0
    print(
        f"append-only log + fsync: load {load:.2f} s, durable add p50 {pct(lat, 0.5):.2f} ms "
        f"p99 {pct(lat, 0.99):.2f} ms, read all {read:.2f} s ({len(got)} records)"
    )


def bench_oxigraph(facts: list[tuple[Any, ...]], tmp: Path) -> None:
    try:
        import pyoxigraph as ox
    except ImportError:
        print("pyoxigraph: not installed, skipped")
        return

    def term(v: Any) -> Any:
        return ox.Literal(v.value) if isinstance(v, Literal) else ox.NamedNode(_iri(v))

    quads = [ox.Quad(term(s), term(p), term(o), ox.DefaultGraph()) for s, p, o in facts]
    for label, store in (("memory", ox.Store()), ("disk", ox.Store(str(tmp / "ox")))):
        t0 = time.perf_counter()
        store.bulk_extend(quads) if label == "disk" else store.extend(quads)
        load = time.perf_counter() - t0
        lat = []
        for i in range(200):
            t0 = time.perf_counter()
            store.add(
                ox.Quad(
                    ox.NamedNode(f"{EX}n{i}"),
                    ox.NamedNode(f"{EX}p"),
                    ox.NamedNode(f"{EX}o"),
                    ox.DefaultGraph(),
                )
            )
            if label == "disk":
                store.flush()
            lat.append(time.perf_counter() - t0)
        subject = quads[len(quads) // 2].subject
        looks = []
        for _ in range(200):
            t0 = time.perf_counter()
            list(store.quads_for_pattern(subject, None, None))
            looks.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        n_all = sum(1 for _ in store)
        read = time.perf_counter() - t0
        print(
            f"pyoxigraph {label}: load {load:.2f} s, add{'+flush' if label == 'disk' else ''} "
            f"p50 {pct(lat, 0.5):.2f} ms p99 {pct(lat, 0.99):.2f} ms, subject lookup "
            f"p50 {pct(looks, 0.5):.3f} ms, read all {read:.2f} s ({n_all} quads)"
        )
        if label == "memory":
            prefixes = "".join(f"PREFIX {k}: <{v}> " for k, v in NS.items())
            updates = [
                f"{prefixes} INSERT {{ {head} }} WHERE {{ {body} }}"
                for body, head in zip(RULES[::2], RULES[1::2], strict=True)
            ]
            t0 = time.perf_counter()
            rounds, size = 0, len(store)
            while True:
                rounds += 1
                for u in updates:
                    store.update(u)
                if len(store) == size or time.perf_counter() - t0 > 300:
                    break
                size = len(store)
            print(
                f"pyoxigraph closure by SPARQL rules to fixpoint: "
                f"{time.perf_counter() - t0:.1f} s, "
                f"{rounds} rounds, {len(store)} quads"
            )


def main(n: int) -> None:
    facts, _, _ = workload(n)
    data = rows(facts)
    with tempfile.TemporaryDirectory() as tmp:
        bench_sqlite(data, Path(tmp))
        bench_log(data, Path(tmp))
        bench_oxigraph(facts, Path(tmp))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=100_000)
    main(parser.parse_args().triples)
