"""Benchmark of GraphStore (run by hand): ``.venv/bin/python bench/graph.py [--triples N]``.

Workload: a class tree (~250 classes under ex:Thing), a property hierarchy with domains and
ranges, a transitive ``ex:partOf`` over an organisation tree, a symmetric ``ex:knows``, an
inverse pair ``ex:manages``/``ex:managedBy``, a few ``owl:sameAs`` links, and people and
organisations with labels and edges, ``N`` asserted triples in all (default 100k).

Reports: bulk load into memory (parse + intern + closure + index), the closure alone from
scratch, closure size, single add/remove latency (memory and on disk, where each is a
durable SQLite commit), reopening an on-disk store, and ``relevant()`` p50/p99 over
queries made of names and property words, also right after adds to a hub class.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from framework_agents.graph import GraphStore, Literal
from framework_agents.graph._snapshot import SNAPSHOT_NAME

FIRST = """Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy
Rupert Sybil Trent Victor Walter Yvonne Zara Omar Lena Hugo Ines Kenji Mira Pavel Quinn
Rosa Tariq Uma Vera Wen Xavier Yusuf Zoe Aiko Bruno Chen""".split()  # noqa: SIM905
LAST = """Smith Jones Brown Garcia Miller Davis Wilson Moore Taylor Anderson Thomas Jackson
White Harris Martin Thompson Lee Walker Young King Wright Lopez Hill Scott Green Adams Baker
Nelson Carter Mitchell Perez Roberts Turner Phillips Campbell Parker Evans Edwards""".split()  # noqa: SIM905
WORDS = """acme global north south river stone cloud data solar green blue quantum metro
bright nova apex summit harbor pixel forge""".split()  # noqa: SIM905

Fact = tuple[Any, ...]


def workload(n: int = 100_000, seed: int = 7) -> tuple[list[Fact], list[str], list[Fact]]:
    """``n`` asserted facts, query texts, and extra facts for incremental adds."""
    rnd = random.Random(seed)
    facts: list[Fact] = []
    classes = ["ex:Thing"]
    frontier = ["ex:Thing"]
    for depth in range(4):
        nxt = []
        for parent in frontier:
            for i in range(4 if depth < 3 else 2):
                name = f"{parent}{'ABCD'[i]}" if depth else f"ex:Kind{'ABCD'[i]}"
                facts.append((name, "rdfs:subClassOf", parent))
                classes.append(name)
                nxt.append(name)
        frontier = nxt
    leaves = frontier
    facts += [
        ("ex:Person", "rdfs:subClassOf", "ex:Thing"),
        ("ex:Employee", "rdfs:subClassOf", "ex:Person"),
        ("ex:Manager", "rdfs:subClassOf", "ex:Employee"),
        ("ex:Organization", "rdfs:subClassOf", "ex:Thing"),
        ("ex:worksFor", "rdfs:domain", "ex:Employee"),
        ("ex:worksFor", "rdfs:range", "ex:Organization"),
        ("ex:headOf", "rdfs:subPropertyOf", "ex:worksFor"),
        ("ex:colleagueOf", "rdfs:subPropertyOf", "ex:knows"),
        ("ex:knows", "rdf:type", "owl:SymmetricProperty"),
        ("ex:knows", "rdfs:domain", "ex:Person"),
        ("ex:partOf", "rdf:type", "owl:TransitiveProperty"),
        ("ex:manages", "owl:inverseOf", "ex:managedBy"),
        ("ex:manages", "rdfs:domain", "ex:Manager"),
        ("ex:livesIn", "rdfs:range", "ex:City"),
    ]
    orgs = [f"ex:{w.title()}{k}" for w in WORDS for k in range(30)]
    for i, org in enumerate(orgs):
        facts.append((org, "rdf:type", "ex:Organization"))
        facts.append((org, "rdfs:label", Literal(f"{org[3:]} Corporation")))
        if i >= 20:  # a shallow org tree: partOf is transitive
            facts.append((org, "ex:partOf", orgs[(i - 20) // 4]))
    cities = [f"ex:City{i}" for i in range(200)]
    people: list[str] = []
    while len(facts) < n:
        i = len(people)
        first, last = rnd.choice(FIRST), rnd.choice(LAST)
        person = f"ex:{first}{last}{i}"
        people.append(person)
        facts.append((person, "rdf:type", rnd.choice(leaves)))
        facts.append((person, "rdfs:label", Literal(f"{first} {last}")))
        facts.append((person, "ex:worksFor" if i % 50 else "ex:headOf", rnd.choice(orgs)))
        facts.append((person, "ex:livesIn", rnd.choice(cities)))
        if i > 10:
            facts.append((person, "ex:knows" if i % 3 else "ex:colleagueOf", rnd.choice(people)))
        if i % 20 == 0 and i > 10:
            facts.append((person, "ex:manages", rnd.choice(people)))
        if i % 500 == 0 and i > 10:
            facts.append((person, "owl:sameAs", f"ex:alias{i}"))
    facts = facts[:n]
    queries = []
    for _ in range(400):
        person = rnd.choice(people)
        name = person[3:].rstrip("0123456789")
        split = next(j for j in range(1, len(name)) if name[j].isupper())
        queries.append(
            rnd.choice(
                [
                    f"Where does {name[:split]} {name[split:]} work?",
                    f"Who does {name[:split]} know?",
                    f"Tell me about {name[:split]}",
                    f"Which organization is {rnd.choice(WORDS)} part of?",
                    f"people living in city {rnd.randrange(200)}",
                ]
            )
        )
    extra = [(f"ex:New{i}", "rdf:type", rnd.choice(leaves)) for i in range(200)]
    extra += [(f"ex:New{i}", "ex:worksFor", rnd.choice(orgs)) for i in range(200)]
    return facts, queries, extra


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` in milliseconds."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn`` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


async def reopen_figures(path: Path, size: int) -> None:
    """Reopen ``path`` as before (rebuild from the quads) and from the closure snapshot."""
    snapshot = path / SNAPSHOT_NAME
    saved = snapshot.read_bytes()

    async def reopen() -> float:
        store = GraphStore(path)
        t0 = time.perf_counter()
        await store.open()
        took = time.perf_counter() - t0
        assert store.closure_size >= size
        store._snapshot_at = store._disk.generation if store._disk else None  # no new save
        await store.close()
        return took

    rows: dict[str, list[float]] = {"rebuild": [], "snapshot": []}
    for _ in range(2):
        snapshot.unlink()
        rows["rebuild"].append(await reopen())
        snapshot.write_bytes(saved)
        rows["snapshot"].append(await reopen())
    rebuild, snap = min(rows["rebuild"]), min(rows["snapshot"])
    print(f"reopen, before (read quads, rebuild closure and index): {rebuild:.2f} s")
    print(f"reopen from the closure snapshot: {snap:.2f} s ({rebuild / snap:.1f}x faster)")


async def reopen_only(n: int) -> None:
    """Build an on-disk store of ``n`` facts, close it (saving the snapshot), reopen it."""
    facts, _, _ = workload(n)
    with tempfile.TemporaryDirectory() as tmp:
        disk = GraphStore(Path(tmp) / "g")
        await disk.add_many(facts)
        size = disk.closure_size
        t0 = time.perf_counter()
        await disk.close()
        print(f"{len(facts)} facts, closure {size}")
        print(f"close, saving the closure snapshot: {time.perf_counter() - t0:.2f} s")
        print(f"snapshot size: {(Path(tmp) / 'g' / SNAPSHOT_NAME).stat().st_size / 1e6:.1f} MB")
        await reopen_figures(Path(tmp) / "g", size)


async def main(n: int) -> None:
    facts, queries, extra = workload(n)
    print(f"workload: {len(facts)} asserted facts, {len(queries)} queries")

    store = GraphStore()
    t0 = time.perf_counter()
    await store.add_many(facts)
    load = time.perf_counter() - t0
    size, asserted = store.closure_size, store.asserted_count
    print(f"load into memory (parse, intern, closure, index): {load:.2f} s")
    print(f"closure: {size} triples ({asserted} asserted, {size - asserted} entailed)")

    state = store._state
    assert state is not None
    base = set(state.closure.base)
    print(f"closure alone from scratch: {timed(lambda: state.closure.rebuild(base)):.2f} s")

    adds: list[float] = []
    removes: list[float] = []
    for fact in extra:
        t0 = time.perf_counter()
        await store.add(*fact)
        adds.append(time.perf_counter() - t0)
    for fact in extra:
        t0 = time.perf_counter()
        await store.remove(*fact)
        removes.append(time.perf_counter() - t0)
    print(f"add one fact (memory): p50 {pct(adds, 0.5):.3f} ms  p99 {pct(adds, 0.99):.3f} ms")
    print(
        f"remove one fact (memory): p50 {pct(removes, 0.5):.3f} ms  p99 {pct(removes, 0.99):.3f} ms"
    )
    for schema in [
        ("ex:KindA", "rdfs:subClassOf", "ex:Thing"),
        ("ex:worksFor", "rdfs:domain", "ex:Employee"),
    ]:
        before = store.closure_size
        t0 = time.perf_counter()
        await store.remove(*schema)
        gone = time.perf_counter() - t0
        after = store.closure_size
        t0 = time.perf_counter()
        await store.add(*schema)
        back = time.perf_counter() - t0
        assert store.closure_size == before
        print(
            f"schema triple {' '.join(schema)}: remove (DRed) {gone * 1000:.0f} ms,"
            f" add back {back * 1000:.0f} ms ({before - after} entailments)"
        )

    cold: list[float] = []
    for q in queries[:100]:
        t0 = time.perf_counter()
        store.relevant(q, 8)
        cold.append(time.perf_counter() - t0)
    warm: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        store.relevant(q, 8)
        warm.append(time.perf_counter() - t0)
    print(
        f"relevant(k=8), first 100 queries: p50 {pct(cold, 0.5):.2f} ms"
        f"  p99 {pct(cold, 0.99):.2f} ms"
    )
    print(
        f"relevant(k=8), {len(warm)} queries: p50 {pct(warm, 0.5):.2f} ms"
        f"  p99 {pct(warm, 0.99):.2f} ms"
    )
    # The GraphMemory pattern: the model records a fact (often about a big class or a
    # busy organisation), then the next prompt is grounded.
    after_add: list[float] = []
    for i, q in enumerate(queries[:200]):
        await store.add(f"ex:Newcomer{i}", "rdf:type", "ex:Person")
        await store.add(f"ex:Newcomer{i}", "ex:worksFor", "ex:Acme1")
        t0 = time.perf_counter()
        store.relevant(f"{q} What type of person?", 8)
        after_add.append(time.perf_counter() - t0)
    print(
        f"relevant(k=8) right after adds to a hub, 200 queries: p50 {pct(after_add, 0.5):.2f} ms"
        f"  p99 {pct(after_add, 0.99):.2f} ms"
    )
    example = next(q for q in queries if q.startswith("Where"))
    print("example:", example)
    for fact in store.relevant(example, 5):
        print(f"  {fact.score:6.2f}  {fact.text}")

    with tempfile.TemporaryDirectory() as tmp:
        disk = GraphStore(Path(tmp) / "g")
        t0 = time.perf_counter()
        await disk.add_many(facts)
        print(f"load on disk (one transaction): {time.perf_counter() - t0:.2f} s")
        adds = []
        for fact in extra[:100]:
            t0 = time.perf_counter()
            await disk.add(*fact)
            adds.append(time.perf_counter() - t0)
        print(
            f"add one fact (disk, durable): p50 {pct(adds, 0.5):.2f} ms"
            f"  p99 {pct(adds, 0.99):.2f} ms"
        )
        t0 = time.perf_counter()
        await disk.close()
        print(f"close, saving the closure snapshot: {time.perf_counter() - t0:.2f} s")
        await reopen_figures(Path(tmp) / "g", size)
    print(f"median of relevant() vs target 5 ms: {statistics.median(warm) * 1000:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=100_000)
    parser.add_argument("--reopen-only", action="store_true", help="only the reopen figures")
    args = parser.parse_args()
    asyncio.run(reopen_only(args.triples) if args.reopen_only else main(args.triples))
